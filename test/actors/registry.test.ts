import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import type { NodeProjection } from "../../src/actors/projection.js";
import { NodeActorRegistry, type RegistryDeps } from "../../src/actors/registry.js";
import { ManualClock } from "../../src/lib/clock.js";
import type { Store } from "../../src/store/db.js";
import { listNodeTransitions } from "../../src/store/node-transitions.repository.js";
import { listClientStates } from "../../src/store/nodes.repository.js";
import { CONFIG, openStores, PART_TTL_MS, registryDeps, seedNodes, tempDbFile, countTransactions } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The node actor registry as a whole (src/actors/registry.ts, the front door over its parts, each
 * tested on its own beside this file): a real SQLite file through `Store`, the real node
 * machine, an injected ManualClock. What the registry promises: one
 * transaction per batch of state changes (group commit, DESIGN §3 "Persistence order"), SSE
 * notifications only after that commit (spec §6.5 rule 6), dormant restored nodes (no actor
 * until their first event), and the presence sweep dropping a node at its online TTL (spec §3.1).
 */

const TTL_MS = PART_TTL_MS;

interface StatusChange {
  nodeId: string;
  projection: NodeProjection;
  /** `sqliteOf(store).inTransaction` when the notification ran. */
  inTransaction: boolean;
  /** Presence of every node of the config as a second connection read it right then. */
  committed: Promise<Map<string, string>>;
}

interface Harness {
  file: string;
  store: Store;
  /** A second connection to the same file: it sees only committed data. */
  reader: Store;
  clock: ManualClock;
  registry: NodeActorRegistry;
  changes: StatusChange[];
  /** Calls of the store's `transaction()` made by the registry's flushes. */
  transactions: () => number;
}

async function openHarness(t: TestContext, opts: { file?: string; clock?: ManualClock; registry?: Partial<RegistryDeps> } = {}): Promise<Harness> {
  const file = opts.file ?? tempDbFile(t);
  const { store, reader, close } = await openStores(file);
  const clock = opts.clock ?? new ManualClock();
  const transactions = countTransactions(store);
  const changes: StatusChange[] = [];
  const registry = new NodeActorRegistry(
    registryDeps(store, clock, {
      onStatusChanged: (_configId, nodeId, projection) => {
        changes.push({
          nodeId,
          projection,
          inTransaction: sqliteOf(store).inTransaction,
          committed: listClientStates(reader.db, CONFIG).then((rows) => new Map([...rows].map(([id, r]) => [id, r.client_presence_state]))),
        });
      },
      ...opts.registry,
    }),
  );
  t.after(async () => {
    await registry.stop();
    await close();
  });
  return { file, store, reader, clock, registry, changes, transactions };
}

/** Takes the stored nodes under management (fresh actors) and binds each (spec §3.2). */
async function boundNodes(h: Harness, ids: string[]): Promise<void> {
  await seedNodes(h.store, ids);
  await h.registry.start();
  for (const id of ids) await h.registry.send(CONFIG, id, { type: "client.bound", at: h.clock.now(), clientVersion: "1.0.0" });
  h.changes.length = 0;
}

/** Lets queued `setImmediate` work (the registry's flush) run; waits for no timer. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

function heartbeat(h: Harness, id: string): boolean {
  return h.registry.post(CONFIG, id, { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" });
}

test("DESIGN §3 group commit, spec §6.5 rule 6: heartbeats of three nodes in one turn are written in ONE transaction, and the status notifications run only after its commit", async (t) => {
  const h = await openHarness(t);
  const ids = ["n-a", "n-b", "n-c"];
  await boundNodes(h, ids);
  const before = h.transactions();

  for (const id of ids) assert.equal(heartbeat(h, id), true);
  assert.equal(h.changes.length, 0, "nothing is notified before the batch is written");
  await settle();

  assert.equal(h.transactions() - before, 1, "one transaction for the batch");
  assert.deepEqual(h.changes.map((c) => c.nodeId).sort(), ids);
  for (const change of h.changes) {
    assert.equal(change.projection.presence, "online");
    assert.equal(change.inTransaction, false, `${change.nodeId}: notified outside the transaction`);
    // Already at the first notification, another connection sees all three committed.
    assert.deepEqual(Object.fromEntries(await change.committed), { "n-a": "online", "n-b": "online", "n-c": "online" });
  }
});

test("DESIGN §3 group commit pacing: a change after a quiet spell commits on the next turn; one within commitPaceMs of the last commit waits for the rest of it (on the commit timer), then commits with everything queued meanwhile", async (t) => {
  let now = 1_000;
  // Set-up runs paced commits at once; from then on the test fires the commit timer itself.
  let manual = false;
  const timers: Array<{ ms: number; run: () => void }> = [];
  const commitTimer = { now: () => now, setTimeout: (run: () => void, ms: number) => (manual ? void timers.push({ run, ms }) : void setImmediate(run)) };
  const h = await openHarness(t, { registry: { commitPaceMs: 40, commitTimer } });
  await boundNodes(h, ["n-a", "n-b"]);
  manual = true;
  now += 1_000;
  const before = h.transactions();

  heartbeat(h, "n-a");
  await settle();
  assert.equal(h.transactions() - before, 1, "after a quiet spell: committed on the next turn, no timer");
  assert.equal(timers.length, 0);

  now += 10;
  heartbeat(h, "n-b");
  h.clock.advance(1);
  heartbeat(h, "n-a");
  await settle();
  assert.equal(h.transactions() - before, 1, "10 ms after the last commit: not yet");
  assert.deepEqual(timers.map((x) => x.ms), [30], "waits the 30 ms left of the pace");
  assert.equal(h.changes.length, 1, "only the first commit was notified");

  now += 30;
  timers[0]?.run();
  await settle();
  assert.equal(h.transactions() - before, 2, "one commit for both changes queued meanwhile");
  assert.deepEqual(h.changes.map((c) => c.nodeId), ["n-a", "n-b"]);
});

test("DESIGN §3 group commit: a failed batch write notifies nobody and rejects the callers waiting on it", async (t) => {
  const h = await openHarness(t);
  await boundNodes(h, ["n-a"]);
  // The row the batch updates is made unwritable: a trigger aborts the UPDATE (the real SQLite error path).
  sqliteOf(h.reader).exec(
    "CREATE TRIGGER refuse BEFORE UPDATE ON node_client_state BEGIN SELECT RAISE(ABORT, 'refused by test'); END",
  );
  await assert.rejects(h.registry.send(CONFIG, "n-a", { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" }), /refused by test/);
  await settle();
  assert.equal(h.changes.length, 0, "no notification for a write that did not commit");
  assert.equal((await listClientStates(h.reader.db, CONFIG)).get("n-a")?.client_presence_state, "offline");
});

test("DESIGN §3 group commit: a failed batch stays queued and is written by the next attempt once the store takes writes again; then, and only then, the change is notified", async (t) => {
  const h = await openHarness(t);
  await boundNodes(h, ["n-a"]);
  sqliteOf(h.reader).exec(
    "CREATE TRIGGER refuse BEFORE UPDATE ON node_client_state BEGIN SELECT RAISE(ABORT, 'refused by test'); END",
  );
  await assert.rejects(h.registry.send(CONFIG, "n-a", { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" }), /refused by test/);
  // Still refused: the retry a second later fails too and keeps the work queued.
  h.clock.advance(1000);
  await settle();
  assert.equal(h.changes.length, 0);
  assert.equal((await listClientStates(h.reader.db, CONFIG)).get("n-a")?.client_presence_state, "offline");
  // The fault ends: the next retry writes the state the actor holds, then notifies it once.
  sqliteOf(h.reader).exec("DROP TRIGGER refuse");
  h.clock.advance(1000);
  await settle();
  assert.equal((await listClientStates(h.reader.db, CONFIG)).get("n-a")?.client_presence_state, "online", "the queued state was written");
  assert.deepEqual(h.changes.map((c) => [c.nodeId, c.projection.presence]), [["n-a", "online"]]);
  // Read through another connection: a state value first stored by the rolled-back attempt must
  // have been stored again by the one that committed (the writer forgets what it had interned).
  const timeline = listNodeTransitions(sqliteOf(h.reader), "n-a", Number.MAX_SAFE_INTEGER, 1)[0];
  assert.match(timeline?.value_after ?? "", /online/, "the flight-recorder row of the change was kept and written with it");
});

test("DESIGN §2 actors (rehydration), dormant nodes: after a restart, restored nodes get no actor until their first event; their stored projection answers meanwhile and start writes no row", async (t) => {
  const first = await openHarness(t);
  const ids = ["n-a", "n-b", "n-c"];
  await boundNodes(first, ids);
  for (const id of ids) heartbeat(first, id);
  await settle();
  await first.registry.stop();
  const updatedAt = async (hh: Harness) => [...(await listClientStates(hh.reader.db, CONFIG)).values()].map((r) => r.updated_at);
  const stored = await updatedAt(first);

  first.clock.advance(60_000);
  const h = await openHarness(t, { file: first.file, clock: first.clock });
  assert.equal(await h.registry.start(), 3);
  assert.deepEqual(h.registry.stats(), { nodes: 3, liveActors: 0, sweepTracked: 3, sweepNextAt: first.clock.now() - 60_000 + TTL_MS, coalescedHeartbeats: 0 });
  assert.equal(h.registry.projection(CONFIG, "n-b")?.presence, "online", "stored projection of a dormant node");
  assert.deepEqual(await updatedAt(h), stored, "start wrote no node row");

  await h.registry.send(CONFIG, "n-b", { type: "mqtt.signal", at: h.clock.now(), source: "event", wgOnline: true });
  assert.equal(h.registry.stats().liveActors, 1, "only the node that got an event has an actor");
  assert.equal(h.registry.projection(CONFIG, "n-b")?.runtime, "running");
  assert.equal(h.registry.projection(CONFIG, "n-a")?.runtime, "unknown");
});

test("spec §3.1 heartbeat timeout: the presence sweep drops an online node exactly at its online TTL on the injected clock, not 1 ms before", async (t) => {
  const h = await openHarness(t);
  await boundNodes(h, ["n-a"]);
  heartbeat(h, "n-a");
  await settle();
  h.changes.length = 0;

  h.clock.advance(TTL_MS - 1);
  await settle();
  assert.equal(h.registry.projection(CONFIG, "n-a")?.presence, "online", "1 ms before the TTL");
  assert.equal(h.changes.length, 0);

  h.clock.advance(1);
  await settle();
  assert.equal(h.registry.projection(CONFIG, "n-a")?.presence, "dropped", "at the TTL");
  assert.deepEqual(h.changes.map((c) => [c.nodeId, c.projection.presence]), [["n-a", "dropped"]]);
  assert.equal((await listClientStates(h.reader.db, CONFIG)).get("n-a")?.client_presence_state, "dropped");
  assert.equal(h.registry.stats().sweepTracked, 0, "a dropped node leaves the sweep");
});

test("spec §3.1 'no other recent reachable signal': a heartbeat before the deadline moves it; the node drops one TTL after that heartbeat", async (t) => {
  const h = await openHarness(t);
  await boundNodes(h, ["n-a"]);
  heartbeat(h, "n-a");
  await settle();
  h.clock.advance(TTL_MS / 2);
  heartbeat(h, "n-a");
  const renewedAt = h.clock.now();
  await settle();

  h.clock.advance(TTL_MS / 2);
  await settle();
  assert.equal(h.registry.projection(CONFIG, "n-a")?.presence, "online", "the first heartbeat's deadline passed without a drop");

  h.clock.advance(renewedAt + TTL_MS - h.clock.now() - 1);
  await settle();
  assert.equal(h.registry.projection(CONFIG, "n-a")?.presence, "online");
  h.clock.advance(1);
  await settle();
  assert.equal(h.registry.projection(CONFIG, "n-a")?.presence, "dropped");
});

test("spec §3.1 heartbeat timeout after a restart: a dormant restored node is dropped by the sweep at the TTL of its stored newest signal", async (t) => {
  const first = await openHarness(t);
  await boundNodes(first, ["n-a"]);
  heartbeat(first, "n-a");
  const signalAt = first.clock.now();
  await settle();
  await first.registry.stop();

  first.clock.advance(10 * 60_000); // the service was down for 10 minutes
  const h = await openHarness(t, { file: first.file, clock: first.clock });
  await h.registry.start();
  assert.equal(h.registry.stats().liveActors, 0);
  assert.equal(h.registry.stats().sweepNextAt, signalAt + TTL_MS);

  h.clock.advance(signalAt + TTL_MS - h.clock.now() - 1);
  await settle();
  assert.equal(h.registry.projection(CONFIG, "n-a")?.presence, "online");
  h.clock.advance(1);
  await settle();
  assert.equal(h.registry.projection(CONFIG, "n-a")?.presence, "dropped");
  assert.equal((await listClientStates(h.reader.db, CONFIG)).get("n-a")?.client_presence_state, "dropped");
});

test("DESIGN §2 actors: a node removed, or every node reloaded, right after a lookup of it is looked up afresh (no event reaches a stopped actor)", async (t) => {
  const h = await openHarness(t);
  await boundNodes(h, ["n-a", "n-b"]);
  assert.equal(heartbeat(h, "n-a"), true);
  await settle();
  assert.equal(h.registry.modeOf(CONFIG, "n-a"), "dynamic");
  h.registry.remove(CONFIG, "n-a");
  assert.equal(h.registry.modeOf(CONFIG, "n-a"), undefined, "a removed node has no mode");
  assert.equal(heartbeat(h, "n-a"), false, "nor takes events");

  h.clock.advance(1000);
  assert.equal(heartbeat(h, "n-b"), true);
  await settle();
  await h.registry.reload();
  h.clock.advance(1000);
  const at = h.clock.now();
  assert.equal(heartbeat(h, "n-b"), true);
  await settle();
  assert.equal(h.registry.projection(CONFIG, "n-b")?.lastSignalAt, at, "the reloaded actor took the heartbeat");
});
