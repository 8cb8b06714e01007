import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { NodeActorRegistry } from "../../src/actors/registry.js";
import { ManualClock } from "../../src/lib/clock.js";
import { listNodeTransitions, type NodeTransitionRow } from "../../src/store/node-transitions.repository.js";
import { CONFIG, openStores, PART_DETECT_MS, PART_TTL_MS, registryDeps, seedNodes, tempDbFile } from "../actors/harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The flight recorder inside the registry's group commit (src/actors/registry.ts): a
 * real SQLite file, the real node machine, a ManualClock. Timers (the detect timeout, the
 * presence sweep's TTL check) record source `timer`; rows commit with the state they lead to
 * (persist before emit).
 */

const TTL_MS = PART_TTL_MS;
const DETECT_MS = PART_DETECT_MS;

/** Retention as the registry drives it in these tests: keep 4 rows per node, a mark every 2nd row. */
const KEEP = 4;
const SLACK = 2;

async function open(t: TestContext) {
  const { store, reader, close } = await openStores(tempDbFile(t));
  const clock = new ManualClock();
  const seenAtEmit: number[] = [];
  const pruned: Array<[string, number]> = [];
  const registry = new NodeActorRegistry(
    registryDeps(store, clock, {
      // Persist before emit: what a second connection sees when the status notification runs.
      onStatusChanged: (_c, nodeId) => seenAtEmit.push(rows(sqliteOf(reader), nodeId).length),
      timelineRetention: { keep: KEEP, slack: SLACK, prune: (nodeId, cutoff) => pruned.push([nodeId, cutoff]) },
    }),
  );
  t.after(async () => {
    await registry.stop();
    await close();
  });
  await seedNodes(store, ["n1"]);
  await registry.start();
  await registry.send(CONFIG, "n1", { type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
  return { store, reader, clock, registry, seenAtEmit, pruned };
}

function rows(sqlite: Parameters<typeof listNodeTransitions>[0], nodeId: string): NodeTransitionRow[] {
  return listNodeTransitions(sqlite, nodeId, Number.MAX_SAFE_INTEGER, 1000);
}

test("spec §3.1 §6.4 rule 8: a detect that times out records the `after` timer as source `timer` (presence online → dropped), the detect as source `detect`", async (t) => {
  const h = await open(t);
  await h.registry.send(CONFIG, "n1", { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: true });
  h.clock.advance(1000);
  await h.registry.send(CONFIG, "n1", { type: "detect.sent", at: h.clock.now() });
  h.clock.advance(DETECT_MS);
  await h.registry.send(CONFIG, "n1", { type: "node.mode_changed", at: h.clock.now(), mode: "dynamic" }); // waits for the commit; changes nothing
  const [timeout, detect] = rows(sqliteOf(h.reader), "n1");
  assert.equal(timeout?.source, "timer");
  assert.equal(timeout?.event, "xstate.after.detectTimeout.node.probe.waiting");
  assert.equal(timeout?.at, 1000 + DETECT_MS + Date.parse("2026-01-01T00:00:00Z"));
  assert.deepEqual(
    [JSON.parse(timeout?.value_before ?? "null").presence, JSON.parse(timeout?.value_after ?? "null").presence],
    [{ online: "fresh" }, "dropped"],
  );
  assert.equal(detect?.source, "detect");
  assert.equal(detect?.event, "detect.sent");
  assert.equal(JSON.parse(detect?.value_after ?? "null").probe, "waiting");
});

test("spec §3.1 heartbeat timeout: the presence sweep's TTL check records source `timer`; rows are committed before the status notification (persist before emit)", async (t) => {
  const h = await open(t);
  await h.registry.send(CONFIG, "n1", { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" });
  const before = rows(sqliteOf(h.reader), "n1").length;
  assert.equal(h.seenAtEmit.at(-1), before, "the heartbeat's row was committed when its status change was emitted");
  h.clock.advance(TTL_MS + 1000);
  await h.registry.send(CONFIG, "n1", { type: "node.mode_changed", at: h.clock.now(), mode: "dynamic" });
  const [dropped] = rows(sqliteOf(h.reader), "n1");
  assert.equal(dropped?.source, "timer");
  assert.equal(dropped?.event, "presence.ttl_check");
  assert.equal(JSON.parse(dropped?.value_after ?? "null").presence, "dropped");
  assert.equal(h.seenAtEmit.at(-1), before + 1);
});

test("the cap: once keep + slack rows came since the last cut, retention is handed a cut-off with exactly keep or more of the node's rows at or above it, all newer than the ones below", async (t) => {
  const h = await open(t);
  const toggle = async (i: number) => {
    h.clock.advance(1000);
    await h.registry.send(CONFIG, "n1", { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: i % 2 === 0 });
  };
  let i = 0;
  while (h.pruned.length === 0 && i < 50) await toggle(i++);
  assert.equal(h.pruned.length, 1, "one cut-off once enough rows came");
  const [nodeId, cutoff] = h.pruned[0] ?? ["", 0];
  assert.equal(nodeId, "n1");
  const all = rows(sqliteOf(h.reader), "n1");
  const above = all.filter((r) => r.transition_id >= cutoff).length;
  assert.ok(above >= KEEP && above < KEEP + SLACK, `keep..keep+slack-1 rows at or above the cut-off (${above})`);
  assert.ok(all.some((r) => r.transition_id === cutoff), "the cut-off is one of the node's rows");
  assert.ok(all.length >= KEEP + SLACK, "not handed before keep + slack rows since start (a fresh store: every row came since)");
  // The next cut-off comes after `slack` more rows, and moves up by exactly that many rows.
  const count = h.pruned.length;
  for (let k = 0; k < SLACK; k++) await toggle(i++);
  assert.equal(h.pruned.length, count + 1);
  const next = h.pruned.at(-1)?.[1] ?? 0;
  const ids = rows(sqliteOf(h.reader), "n1").map((r) => r.transition_id);
  assert.equal(ids.indexOf(cutoff) - ids.indexOf(next), SLACK, "the cut moved up by slack rows");
});

test("heartbeats that change nothing record nothing, and a change of a shown context field alone (client version) records a row", async (t) => {
  const h = await open(t);
  await h.registry.send(CONFIG, "n1", { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: true });
  const n = rows(sqliteOf(h.reader), "n1").length;
  for (let i = 0; i < 5; i++) {
    h.clock.advance(60_000);
    await h.registry.send(CONFIG, "n1", { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: true });
  }
  assert.equal(rows(sqliteOf(h.reader), "n1").length, n);
  await h.registry.send(CONFIG, "n1", { type: "mqtt.signal", at: h.clock.now(), source: "ack", requestId: "req-1", clientVersion: "1.1.0" });
  const [row] = rows(sqliteOf(h.reader), "n1");
  assert.equal(rows(sqliteOf(h.reader), "n1").length, n + 1);
  assert.equal(row?.source, "ack");
  assert.equal(row?.request_id, "req-1");
  assert.equal(row?.value_before, row?.value_after);
  assert.deepEqual(JSON.parse(row?.changes ?? "{}"), { client_version: ["1.0.0", "1.1.0"] });
});
