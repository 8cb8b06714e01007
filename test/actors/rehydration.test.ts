import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { stopActor } from "../../src/actors/node-entries.js";
import type { TransitionOrigin } from "../../src/actors/recorder.js";
import { ManualClock } from "../../src/lib/clock.js";
import type { Store } from "../../src/store/db.js";
import { listNodeTransitions } from "../../src/store/node-transitions.repository.js";
import { listClientStates } from "../../src/store/nodes.repository.js";
import { buildParts, CONFIG, openStores, PART_DETECT_MS, PART_TTL_MS, seedNodes, tempDbFile, type Parts } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Rehydration on its own (src/actors/rehydration.ts) with its real neighbours: stored nodes
 * taken under management at start (DESIGN §2 actors, rehydration), dormant until their first
 * event, timers re-armed from stored times, and the store's mode or staged config caught up. A
 * real SQLite file, two "runs" of the service over it, a ManualClock.
 */

const RESTORE: TransitionOrigin = { source: "restore" };

/** One run of the service's actor parts over `store`; stopped after the test. */
function run(t: TestContext, store: Store, clock: ManualClock): Parts {
  const parts = buildParts(store, clock);
  t.after(() => stopParts(parts));
  return parts;
}

async function stopParts(parts: Parts): Promise<void> {
  await parts.commit.flushNow().catch(() => undefined);
  parts.commit.stop();
  parts.recorder.stop();
  parts.sweep.stop();
  for (const e of parts.entries.values()) stopActor(e);
  parts.entries.clear();
}

function startAll(parts: Parts): void {
  for (const row of parts.commit.storedNodes()) parts.rehydrator.spawn(row, RESTORE);
}

const entryOf = (parts: Parts, id: string) => {
  const entry = parts.entries.lookup(CONFIG, id);
  assert.ok(entry, id);
  return entry;
};

/** A first run: the nodes bound and online (one heartbeat each), committed, then stopped. */
async function firstRun(t: TestContext, ids: string[], after?: (parts: Parts) => void) {
  const { store, reader, close } = await openStores(tempDbFile(t));
  t.after(close);
  await seedNodes(store, ids);
  const clock = new ManualClock();
  const parts = buildParts(store, clock);
  startAll(parts);
  for (const id of ids) {
    parts.deliver(entryOf(parts, id), { type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
    parts.deliver(entryOf(parts, id), { type: "mqtt.signal", at: clock.now(), source: "heartbeat", wgOnline: true });
  }
  after?.(parts);
  await parts.commit.flushNow();
  await stopParts(parts);
  return { store, reader, clock };
}

test("DESIGN §2 rehydration: a stored node without a snapshot gets a live actor at once; its first state is one `xstate.init` row with no before, written by the next commit", async (t) => {
  const { store, reader, close } = await openStores(tempDbFile(t));
  t.after(close);
  await seedNodes(store, ["n-a"]);
  const parts = run(t, store, new ManualClock());
  startAll(parts);
  assert.equal(entryOf(parts, "n-a").state.kind, "live");
  await parts.commit.flushNow();
  const [init, ...more] = listNodeTransitions(sqliteOf(reader), "n-a", Number.MAX_SAFE_INTEGER, 10);
  assert.deepEqual([init?.event, init?.source, init?.value_before, more.length], ["xstate.init", "restore", null, 0]);
  assert.notEqual((await listClientStates(reader.db, CONFIG)).get("n-a")?.machine_snapshot, null, "its first state is stored");
});

test("DESIGN §2 rehydration, spec §3.1: after a restart a stored node is dormant (no actor), answers with its stored projection, sits under the presence sweep at its stored deadline, and nothing is written", async (t) => {
  const { store, reader, clock } = await firstRun(t, ["n-a"]);
  const signalAt = clock.now();
  const stored = await listClientStates(reader.db, CONFIG);
  clock.advance(60_000);
  const parts = run(t, store, clock);
  startAll(parts);
  const entry = entryOf(parts, "n-a");
  assert.equal(entry.state.kind, "dormant");
  assert.equal(entry.state.kind === "dormant" ? entry.state.projection.presence : "", "online");
  assert.equal(entry.deadline, signalAt + PART_TTL_MS);
  await parts.commit.flushNow();
  assert.deepEqual(await listClientStates(reader.db, CONFIG), stored, "start wrote no row");
});

test("DESIGN §2 rehydration: a newer stored last_signal_at (a signal-only write) wins over the snapshot's, and a dormant node's first event wakes its actor with it", async (t) => {
  const { store, reader, clock } = await firstRun(t, ["n-a"]);
  const newer = clock.now() + 30_000;
  sqliteOf(reader).exec(`UPDATE node_client_state SET last_signal_at = ${newer} WHERE node_id = 'n-a'`);
  const parts = run(t, store, clock);
  startAll(parts);
  const entry = entryOf(parts, "n-a");
  assert.equal(entry.deadline, newer + PART_TTL_MS);
  const actor = parts.rehydrator.actorOf(entry);
  assert.equal(entry.state.kind, "live");
  assert.equal(actor.getSnapshot().context.lastSignalAt, newer);
});

test("DESIGN §2 rehydration: a mode changed in the store while the service was down wakes the actor at start; the catch-up is recorded as `restore` and the state written back", async (t) => {
  const { store, reader, clock } = await firstRun(t, ["n-a"]);
  sqliteOf(reader).exec("UPDATE nodes SET mode = 'static' WHERE node_id = 'n-a'");
  const parts = run(t, store, clock);
  startAll(parts);
  assert.equal(entryOf(parts, "n-a").state.kind, "live");
  await parts.commit.flushNow();
  const [row] = listNodeTransitions(sqliteOf(reader), "n-a", Number.MAX_SAFE_INTEGER, 1);
  assert.deepEqual([row?.event, row?.source], ["node.mode_changed", "restore"]);
  assert.match((await listClientStates(reader.db, CONFIG)).get("n-a")?.machine_snapshot ?? "", /"mode":"static"/);
});

test("spec §3.1 detect timeout across a restart: a pending timer is re-armed with the time left and fires at its original deadline", async (t) => {
  let sentAt = 0;
  const { store, reader, clock } = await firstRun(t, ["n-a"], (parts) => {
    // A detect sent a second after the node's newest signal (spec §3.1 "no other recent signal").
    sentAt = Date.parse("2026-01-01T00:00:01Z");
    parts.deliver(entryOf(parts, "n-a"), { type: "detect.sent", at: sentAt });
  });
  clock.set(sentAt);
  clock.advance(PART_DETECT_MS / 2);
  const parts = run(t, store, clock);
  startAll(parts);
  assert.equal(entryOf(parts, "n-a").state.kind, "live", "a timer to re-arm needs an actor now");
  clock.advance(PART_DETECT_MS / 2 - 1);
  await parts.commit.flushNow();
  assert.equal((await listClientStates(reader.db, CONFIG)).get("n-a")?.client_presence_state, "online");
  clock.advance(1);
  await parts.commit.flushNow();
  assert.equal((await listClientStates(reader.db, CONFIG)).get("n-a")?.client_presence_state, "dropped");
  const [timeout] = listNodeTransitions(sqliteOf(reader), "n-a", Number.MAX_SAFE_INTEGER, 1);
  assert.deepEqual([timeout?.source, timeout?.at], ["timer", sentAt + PART_DETECT_MS]);
});

test("docs/decisions.md quarantine: a stored snapshot that fails the check throws, and nothing of the node is under management", async (t) => {
  const { store, reader, clock } = await firstRun(t, ["n-a"]);
  sqliteOf(reader).exec(`UPDATE node_client_state SET machine_snapshot = '{"status":"done"}' WHERE node_id = 'n-a'`);
  const parts = run(t, store, clock);
  const [row] = parts.commit.storedNodes();
  assert.ok(row);
  assert.throws(() => parts.rehydrator.spawn(row, RESTORE), /status must be active/);
  assert.equal(parts.entries.size, 0);
});
