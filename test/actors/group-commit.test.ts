import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { FLUSH_RETRY_MS, MAX_BATCH_STATES } from "../../src/actors/group-commit.js";
import type { NodeProjection } from "../../src/actors/projection.js";
import { ManualClock } from "../../src/lib/clock.js";
import type { Store } from "../../src/store/db.js";
import { listClientStates } from "../../src/store/nodes.repository.js";
import { buildParts, CONFIG, liveNode, openStores, seedNodes, tempDbFile, type Parts, countTransactions } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The group commit on its own (src/actors/group-commit.ts) with its real neighbours (recorder
 * sink, coalescer, rehydrated actors), a real SQLite file and a ManualClock. What it promises
 * (DESIGN §3 "Persistence order", spec §6.5 rule 6): persist before emit. Queued states are
 * written in one transaction; the listener, the machines' effects and the waiting callers come
 * only after the commit; a failed commit is retried and nothing of it is told before it is written.
 */

interface Told {
  nodeId: string;
  projection: NodeProjection;
  inTransaction: boolean;
  /** Presence of every node as a second connection read it when the listener was told. */
  committed: Promise<Map<string, string>>;
}

async function open(t: TestContext, ids: string[]): Promise<{ store: Store; reader: Store; clock: ManualClock; parts: Parts; told: Told[]; transactions: () => number }> {
  const { store, reader, close } = await openStores(tempDbFile(t));
  await seedNodes(store, ids);
  const transactions = countTransactions(store);
  const clock = new ManualClock();
  const told: Told[] = [];
  const listener = {
    onStatusChanged: (_c: string, nodeId: string, projection: NodeProjection) =>
      void told.push({
        nodeId,
        projection,
        inTransaction: sqliteOf(store).inTransaction,
        committed: listClientStates(reader.db, CONFIG).then((rows) => new Map([...rows].map(([id, r]) => [id, r.client_presence_state]))),
      }),
  };
  const parts = buildParts(store, clock, { listener });
  t.after(async () => {
    await parts.commit.flushNow().catch(() => undefined);
    parts.commit.stop();
    parts.sweep.stop();
    await close();
  });
  // Every node under management, bound: the first commit of each is its first state (told to nobody).
  for (const row of parts.commit.storedNodes()) parts.rehydrator.spawn(row, { source: "restore" });
  for (const entry of parts.entries.values()) parts.deliver(entry, { type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
  await parts.commit.flushNow();
  told.length = 0;
  return { store, reader, clock, parts, told, transactions };
}

const entryOf = (parts: Parts, id: string) => {
  const entry = parts.entries.lookup(CONFIG, id);
  assert.ok(entry, id);
  return entry;
};

/** Lets queued `setImmediate` work run; waits for no timer. */
const settle = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

test("DESIGN §3 persist before emit: the states of three nodes changed in one turn are written in ONE transaction; the listener hears each only after the commit, then effects run, then the waiting caller resolves", async (t) => {
  const ids = ["n-a", "n-b", "n-c"];
  const h = await open(t, ids);
  const before = h.transactions();
  const order: string[] = [];
  for (const id of ids) h.parts.deliver(entryOf(h.parts, id), { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" });
  h.parts.commit.queueEffect(() => void order.push(`effect after ${h.told.length} told`));
  const waiting = h.parts.commit.wait().then(() => void order.push("resolved"));
  assert.equal(h.told.length, 0, "nothing is told before the batch is written");
  await waiting;
  assert.equal(h.transactions() - before, 1, "one transaction for the batch");
  assert.deepEqual(order, ["effect after 3 told", "resolved"]);
  assert.deepEqual(h.told.map((c) => c.nodeId).sort(), ids);
  for (const change of h.told) {
    assert.equal(change.projection.presence, "online");
    assert.equal(change.inTransaction, false, `${change.nodeId}: told outside the transaction`);
    assert.deepEqual(Object.fromEntries(await change.committed), { "n-a": "online", "n-b": "online", "n-c": "online" });
  }
});

test("DESIGN §3: a change of the newest signal alone writes last_signal_at and nothing else of the row, and tells nobody", async (t) => {
  const h = await open(t, ["n-a"]);
  const entry = entryOf(h.parts, "n-a");
  h.parts.deliver(entry, { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" });
  await h.parts.commit.wait();
  const stored = (await listClientStates(h.reader.db, CONFIG)).get("n-a");
  h.told.length = 0;
  h.clock.advance(60_000);
  h.parts.deliver(entry, { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" });
  await h.parts.commit.wait();
  const now = (await listClientStates(h.reader.db, CONFIG)).get("n-a");
  assert.equal(now?.last_signal_at, h.clock.now());
  assert.equal(now?.machine_snapshot, stored?.machine_snapshot, "the snapshot JSON is not rewritten");
  assert.deepEqual(h.told, []);
});

test("DESIGN §3: a failed commit tells nobody, runs no effect and rejects the waiting caller; the retry FLUSH_RETRY_MS later on the clock writes it, then tells and runs it once", async (t) => {
  const h = await open(t, ["n-a"]);
  sqliteOf(h.reader).exec("CREATE TRIGGER refuse BEFORE UPDATE ON node_client_state BEGIN SELECT RAISE(ABORT, 'refused by test'); END");
  const effects: string[] = [];
  h.parts.deliver(entryOf(h.parts, "n-a"), { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" });
  h.parts.commit.queueEffect(() => void effects.push("ran"));
  await assert.rejects(h.parts.commit.wait(), /refused by test/);
  assert.deepEqual([h.told.length, effects.length], [0, 0]);
  sqliteOf(h.reader).exec("DROP TRIGGER refuse");
  h.clock.advance(FLUSH_RETRY_MS - 1);
  await settle();
  assert.equal((await listClientStates(h.reader.db, CONFIG)).get("n-a")?.client_presence_state, "offline", "no attempt before the retry time");
  h.clock.advance(1);
  await settle();
  assert.equal((await listClientStates(h.reader.db, CONFIG)).get("n-a")?.client_presence_state, "online");
  assert.deepEqual(h.told.map((c) => [c.nodeId, c.projection.presence]), [["n-a", "online"]]);
  assert.deepEqual(effects, ["ran"]);
});

test("DESIGN §3: while a request's transaction holds the connection the commit waits, and writes once it ends (never inside it)", async (t) => {
  const h = await open(t, ["n-a"]);
  const before = h.transactions();
  sqliteOf(h.store).exec("BEGIN");
  h.parts.deliver(entryOf(h.parts, "n-a"), { type: "mqtt.signal", at: h.clock.now(), source: "heartbeat" });
  await settle();
  assert.equal(h.transactions() - before, 0);
  assert.equal(h.told.length, 0);
  sqliteOf(h.store).exec("COMMIT");
  await settle();
  assert.equal(h.transactions() - before, 1);
  assert.deepEqual(h.told.map((c) => c.nodeId), ["n-a"]);
});

test(`DESIGN §3 group commit cap: with ${MAX_BATCH_STATES} states queued the commit runs right after the current message (a microtask), not a turn later`, async (t) => {
  const h = await open(t, []);
  const before = h.transactions();
  const nodes = Array.from({ length: MAX_BATCH_STATES }, (_, i) => liveNode(h.clock, `n-${i}`));
  t.after(() => nodes.forEach((n) => n.actor.stop()));
  for (const n of nodes.slice(0, -1)) h.parts.commit.markDirty(n.entry);
  await Promise.resolve();
  assert.equal(h.transactions() - before, 0, `${MAX_BATCH_STATES - 1} states wait for the next turn`);
  h.parts.commit.markDirty((nodes.at(-1) as (typeof nodes)[number]).entry);
  await Promise.resolve();
  assert.equal(h.transactions() - before, 1, "the cap commits in a microtask");
});
