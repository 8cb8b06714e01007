import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import type { NodeProjection } from "../../src/actors/projection.js";
import { NodeActorRegistry } from "../../src/actors/registry.js";
import { ManualClock } from "../../src/lib/clock.js";
import { sqliteOf } from "../../src/store/connection.js";
import type { Store } from "../../src/store/db.js";
import { listClientStates } from "../../src/store/nodes.repository.js";
import { CONFIG, openStores, PART_DETECT_MS, PART_TTL_MS, registryDeps, seedNodes, tempDbFile } from "./harness.js";

/**
 * The window after an outage of the backend's broker link (spec §3.1; src/actors/registry.ts
 * `outageEnded`): nothing a node sent during the outage was heard, so each node online with no
 * signal since the link came back is treated as having an outstanding detect sent then. A node
 * that speaks (its agent's reconnect event) stays online; a silent one is dropped exactly at the
 * window's end (the detect timeout), not before, and the console hears of it only after the
 * drop is committed (spec §6.5 rule 6). All on an injected ManualClock.
 */

const TTL_MS = PART_TTL_MS;
const DETECT_MS = PART_DETECT_MS;

interface Change {
  nodeId: string;
  projection: NodeProjection;
  inTransaction: boolean;
  /** Presence of the node as a second connection read it when the notification ran. */
  committed: Promise<string | undefined>;
}

async function openRegistry(t: TestContext, ids: string[]): Promise<{ registry: NodeActorRegistry; clock: ManualClock; reader: Store; changes: Change[] }> {
  const { store, reader, close } = await openStores(tempDbFile(t));
  const clock = new ManualClock();
  const changes: Change[] = [];
  const registry = new NodeActorRegistry(
    registryDeps(store, clock, {
      onStatusChanged: (_configId, nodeId, projection) =>
        changes.push({
          nodeId,
          projection,
          inTransaction: sqliteOf(store).inTransaction,
          committed: listClientStates(reader.db, CONFIG).then((rows) => rows.get(nodeId)?.client_presence_state),
        }),
    }),
  );
  t.after(async () => {
    await registry.stop();
    await close();
  });
  await seedNodes(store, ids);
  await registry.start();
  for (const id of ids) {
    await registry.send(CONFIG, id, { type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
    await registry.send(CONFIG, id, { type: "mqtt.signal", at: clock.now(), source: "heartbeat", wgOnline: true });
  }
  changes.length = 0;
  return { registry, clock, reader, changes };
}

function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

const presence = (registry: NodeActorRegistry, id: string) => registry.projection(CONFIG, id)?.presence;

test("spec §3.1: after the broker link returns, a node whose agent reconnects stays online; a silent one is dropped exactly at the window's end (the detect timeout), not 1 ms before", async (t) => {
  const { registry, clock, reader, changes } = await openRegistry(t, ["n-back", "n-dead"]);
  const down = clock.now() + 1; // the link goes down after the last heartbeat
  clock.advance(60_000); // the outage: nothing heard
  const since = clock.now();
  assert.equal(await registry.outageEnded(down, since), 2, "both online nodes are silent since the link went down");

  clock.advance(3_000);
  // The reconnecting agent's `mqtt_connected` event: a reachable signal (spec §3.1).
  await registry.send(CONFIG, "n-back", { type: "mqtt.signal", at: clock.now(), source: "event" });

  clock.advance(DETECT_MS - 3_000 - 1);
  await settle();
  assert.equal(presence(registry, "n-dead"), "online", "1 ms before the window ends");
  assert.equal(changes.filter((c) => c.projection.presence === "dropped").length, 0);

  clock.advance(1);
  await settle();
  assert.equal(presence(registry, "n-dead"), "dropped", "at the window's end");
  assert.equal(presence(registry, "n-back"), "online", "the node that spoke");
  assert.equal(registry.projection(CONFIG, "n-dead")?.runtime, "unknown", "spec §3.3: runtime unknown once dropped");
  assert.equal((await listClientStates(reader.db, CONFIG)).get("n-dead")?.client_presence_state, "dropped");

  // spec §6.5 rule 6: the drop is announced after its commit, and the commit already holds it.
  const drop = changes.find((c) => c.nodeId === "n-dead" && c.projection.presence === "dropped");
  assert.ok(drop, "the drop is announced");
  assert.equal(drop.inTransaction, false, "announced outside the transaction");
  assert.equal(await drop.committed, "dropped", "what a second connection reads when the console is told");

  // spec §3.1 transition 2: the dropped node comes back with its next signal.
  await registry.send(CONFIG, "n-dead", { type: "mqtt.signal", at: clock.now(), source: "event" });
  assert.equal(presence(registry, "n-dead"), "online");
});

test("spec §3.1: the window concerns only nodes online and silent since the return: a node that spoke after it, or one already dropped, is untouched", async (t) => {
  const { registry, clock } = await openRegistry(t, ["n-spoke", "n-dropped", "n-silent"]);
  clock.advance(TTL_MS); // every node's TTL ran out: all dropped by the sweep
  await settle();
  assert.equal(presence(registry, "n-dropped"), "dropped");
  await registry.send(CONFIG, "n-spoke", { type: "mqtt.signal", at: clock.now(), source: "heartbeat" });
  await registry.send(CONFIG, "n-silent", { type: "mqtt.signal", at: clock.now(), source: "heartbeat" });
  const down = clock.now() + 1;
  clock.advance(10_000);
  // A message the broker queued for the backend's session, delivered as the link came back
  // (after its CONNACK, before its SUBACK): it answers for the outage.
  await registry.send(CONFIG, "n-spoke", { type: "mqtt.signal", at: clock.now(), source: "event" });
  clock.advance(50);
  const since = clock.now();

  assert.equal(await registry.outageEnded(down, since), 1, "only the node online and silent since the link went down");
  assert.deepEqual(registry.machineState(CONFIG, "n-silent")?.value, { ...(registry.machineState(CONFIG, "n-silent")?.value as object), probe: "waiting" });
  assert.equal((registry.machineState(CONFIG, "n-spoke")?.value as { probe: string }).probe, "idle");

  clock.advance(DETECT_MS);
  await settle();
  assert.equal(presence(registry, "n-silent"), "dropped");
  assert.equal(presence(registry, "n-spoke"), "online");
  assert.equal(presence(registry, "n-dropped"), "dropped");
});

test("spec §3.1: the window survives a restart of the service: a second registry over the same file drops the silent node at the same instant", async (t) => {
  const file = tempDbFile(t);
  const { store, reader, close } = await openStores(file);
  t.after(close);
  const clock = new ManualClock();
  const deps = registryDeps(store, clock);
  const first = new NodeActorRegistry(deps);
  await seedNodes(store, ["n-a"]);
  await first.start();
  await first.send(CONFIG, "n-a", { type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
  await first.send(CONFIG, "n-a", { type: "mqtt.signal", at: clock.now(), source: "heartbeat" });
  const down = clock.now() + 1;
  clock.advance(5_000);
  await first.outageEnded(down, clock.now());
  clock.advance(5_000);
  await first.stop();

  const second = new NodeActorRegistry(deps);
  t.after(() => second.stop());
  await second.start();
  clock.advance(DETECT_MS - 5_000 - 1);
  await settle();
  assert.equal(second.projection(CONFIG, "n-a")?.presence, "online", "1 ms before the window's end");
  clock.advance(1);
  await settle();
  assert.equal(second.projection(CONFIG, "n-a")?.presence, "dropped");
  assert.equal((await listClientStates(reader.db, CONFIG)).get("n-a")?.client_presence_state, "dropped");
});
