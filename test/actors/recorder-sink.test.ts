import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { MAX_REQUEUED_TRANSITIONS, RecorderSink, type NewTransition, type StoredRows } from "../../src/actors/recorder-sink.js";
import { afterEventsOf } from "../../src/actors/recorder.js";
import { ManualClock } from "../../src/lib/clock.js";
import { nodeMachine } from "../../src/machines/node.machine.js";
import { createNodeStateStatements } from "../../src/store/node-client-state.repository.js";
import { listNodeTransitions } from "../../src/store/node-transitions.repository.js";
import { capturingLog, liveNode, openStores, PART_DETECT_MS, seedNodes, tempDbFile } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The flight recorder's sink on its own (src/actors/recorder-sink.ts): which snapshot changes of
 * a node's actor make a row and with what cause, the rows appended inside the caller's
 * transaction and chained per node, and the retention cut-off handed over after the commit
 * (`node_transitions`, spec §6.4). A real SQLite file, the real node machine, a ManualClock.
 */

async function open(t: TestContext, opts: { retention?: { keep: number; slack: number } } = {}) {
  const { store, reader, close } = await openStores(tempDbFile(t));
  await seedNodes(store, ["n-1"]);
  const clock = new ManualClock();
  const pruned: Array<[string, number]> = [];
  const { log: warnings, lines } = capturingLog("warn");
  const retention = opts.retention && { ...opts.retention, prune: (nodeId: string, cutoff: number) => void pruned.push([nodeId, cutoff]) };
  const sink = new RecorderSink({ store, clock, log: warnings, afterEvents: afterEventsOf(nodeMachine.root), ...(retention ? { timelineRetention: retention } : {}) });
  const { actor, entry } = liveNode(clock, "n-1");
  entry.seen = actor.getSnapshot();
  actor.subscribe((snap) => sink.observe(entry, snap));
  t.after(async () => {
    actor.stop();
    await close();
  });
  const nodeState = createNodeStateStatements(sqliteOf(store));
  /** The group commit's share: append the queued rows and store each node's newest row in one transaction, then note them. */
  const commit = () => {
    let stored: StoredRows | undefined;
    const rows = sink.take();
    nodeState.inTransaction(() => {
      stored = sink.append(rows);
      for (const [entry, head] of stored.heads) nodeState.writeHead(entry.nodeId, head);
    });
    if (stored) sink.committed(stored);
  };
  const timeline = () => listNodeTransitions(sqliteOf(reader), "n-1", Number.MAX_SAFE_INTEGER, 1000);
  return { store, reader, clock, sink, actor, entry, commit, timeline, pruned, lines };
}

test("spec §6.4: a transition makes one row naming the event delivered and its source; a heartbeat that moves only the newest signal makes none", async (t) => {
  const h = await open(t);
  h.sink.sendAs(h.actor, { type: "client.bound", at: h.clock.now(), clientVersion: "1.0.0" });
  h.sink.sendAs(h.actor, { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: true });
  assert.equal(h.sink.queued, 2);
  h.clock.advance(1000);
  h.sink.sendAs(h.actor, { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: true });
  assert.equal(h.sink.queued, 2, "a heartbeat that changes nothing shown records nothing");
  const [bound, online] = h.sink.take();
  assert.equal(h.sink.queued, 0);
  assert.deepEqual([bound?.event, bound?.source, JSON.parse(bound?.changes ?? "{}").client_version], ["client.bound", "rest", [null, "1.0.0"]]);
  assert.deepEqual([online?.event, online?.source], ["mqtt.signal", "heartbeat"]);
  assert.equal(online?.value_before, bound?.value_after, "consecutive rows chain: this before is the last after");
  assert.equal(JSON.parse(online?.value_after ?? "null").presence.online, "fresh");
});

test("spec §3.1, §6.4 rule 8: a change made by a machine timer, with no event being delivered, is recorded as source `timer` with the timer's event", async (t) => {
  const h = await open(t);
  h.sink.sendAs(h.actor, { type: "client.bound", at: h.clock.now(), clientVersion: "1.0.0" });
  h.sink.sendAs(h.actor, { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: true });
  h.sink.sendAs(h.actor, { type: "detect.sent", at: h.clock.now() });
  h.sink.take();
  h.clock.advance(PART_DETECT_MS);
  const [timeout] = h.sink.take();
  assert.deepEqual([timeout?.event, timeout?.source, timeout?.at], ["xstate.after.detectTimeout.node.probe.waiting", "timer", h.clock.now()]);
});

test("spec §6.4: rows appended in the caller's transaction chain to the node's newest row, which moves after the commit; a node that left management loses its queued rows", async (t) => {
  const h = await open(t);
  h.sink.sendAs(h.actor, { type: "client.bound", at: h.clock.now(), clientVersion: "1.0.0" });
  h.commit();
  const head = h.entry.head;
  assert.equal(head, h.timeline()[0]?.transition_id, "the entry's head is the newest stored row");
  h.sink.sendAs(h.actor, { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: true });
  h.commit();
  const rows = h.timeline();
  assert.deepEqual(rows.map((r) => r.event), ["mqtt.signal", "client.bound"], "newest first, one chain");
  assert.ok((h.entry.head ?? 0) > (head ?? 0));
  h.sink.sendAs(h.actor, { type: "client.reset", at: h.clock.now() });
  h.entry.gone = true;
  h.commit();
  assert.equal(h.timeline().length, 2, "the row of a node gone is dropped");
});

test("retention hand-off: once keep + slack rows came since the last cut, retention gets the id of a row with exactly keep rows at or above it", async (t) => {
  const h = await open(t, { retention: { keep: 3, slack: 2 } });
  h.sink.sendAs(h.actor, { type: "client.bound", at: h.clock.now(), clientVersion: "1.0.0" });
  h.commit();
  for (let i = 0; h.pruned.length === 0 && i < 20; i++) {
    h.clock.advance(1000);
    h.sink.sendAs(h.actor, { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat", wgOnline: i % 2 === 0 });
    h.commit();
  }
  const rows = h.timeline();
  assert.equal(rows.length, 4, "handed over at the 4th row: the newest mark with keep rows at or above it");
  const [nodeId, cutoff] = h.pruned[0] ?? ["", 0];
  assert.equal(nodeId, "n-1");
  assert.equal(rows.filter((r) => r.transition_id >= cutoff).length, 3);
});

test("a rolled-back append leaves nothing behind: once the store forgets what it interned, the retried rows are stored whole (a second connection reads them)", async (t) => {
  const h = await open(t);
  h.sink.sendAs(h.actor, { type: "client.bound", at: h.clock.now(), clientVersion: "1.0.0" });
  const rows = h.sink.take();
  assert.throws(() =>
    sqliteOf(h.store).transaction(() => {
      h.sink.append(rows);
      throw new Error("disk full");
    })(),
  /disk full/);
  h.sink.rolledBack();
  h.sink.requeue(rows);
  h.commit();
  const [row] = h.timeline();
  assert.equal(row?.event, "client.bound");
  assert.equal(JSON.parse(row?.value_after ?? "null").initialization, "initialized");
});

test("a long storage outage keeps at most MAX_REQUEUED_TRANSITIONS rows queued, dropping the oldest and logging how many", async (t) => {
  const h = await open(t);
  const row = (i: number): NewTransition => ({ entry: h.entry, node_id: "n-1", at: i, event: "e", source: "rest", request_id: null, route: null, value_before: null, value_after: "{}", changes: "{}" });
  h.sink.requeue(Array.from({ length: MAX_REQUEUED_TRANSITIONS + 1 }, (_, i) => row(i)));
  assert.equal(h.sink.queued, MAX_REQUEUED_TRANSITIONS);
  assert.equal(h.sink.take()[0]?.at, 1, "the oldest went");
  assert.ok(h.lines.some((l) => l.dropped === 1));
});

test("with recording off, and once stopped, snapshot changes queue no row", async (t) => {
  const h = await open(t);
  h.sink.recording = false;
  h.sink.sendAs(h.actor, { type: "client.bound", at: h.clock.now(), clientVersion: "1.0.0" });
  assert.equal(h.sink.queued, 0);
  h.sink.recording = true;
  h.sink.stop();
  h.sink.sendAs(h.actor, { type: "client.reset", at: h.clock.now() });
  assert.equal(h.sink.queued, 0);
});
