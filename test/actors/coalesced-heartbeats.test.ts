import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import fc from "fast-check";
import type { RoutedNodeEvent } from "../../src/actors/recorder.js";
import { NodeActorRegistry } from "../../src/actors/registry.js";
import { ManualClock } from "../../src/lib/clock.js";
import { listNodeTransitions } from "../../src/store/node-transitions.repository.js";
import { listClientStates } from "../../src/store/nodes.repository.js";
import { CONFIG, openStores, registryDeps, seedNodes, tempDbFile } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Coalesced heartbeats (src/actors/heartbeat-coalescer.ts): a heartbeat that would change nothing
 * but `lastSignalAt` is held instead of delivered to XState. The rule: for every sequence of
 * events, a registry that coalesces is indistinguishable from one that delivers every heartbeat
 * (`coalesceHeartbeats: false`): the same projections and machine states at every step, the same
 * status notifications and effects, and after every commit the same stored rows and flight
 * recorder (spec §3.1 presence and its online TTL, §3.3 runtime, DESIGN §3 "Persistence order").
 */

const TTL_MS = 45 * 60_000;
const IDS = ["n-a", "n-b", "n-c"];

type Step =
  | { kind: "heartbeat"; node: number; wgOnline: boolean | undefined }
  | { kind: "event"; node: number; event: "ack" | "will" | "bound" | "reset" | "detect.sent" | "detect.failed" | "staged" | "applied" }
  | { kind: "advance"; ms: number }
  | { kind: "commit" };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  // Mostly heartbeats, as on the wire: runs of them are what gets coalesced.
  { weight: 8, arbitrary: fc.record({ kind: fc.constant("heartbeat" as const), node: fc.nat(IDS.length - 1), wgOnline: fc.constantFrom(true, false, undefined) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("event" as const),
      node: fc.nat(IDS.length - 1),
      event: fc.constantFrom("ack", "will", "bound", "reset", "detect.sent", "detect.failed", "staged", "applied"),
    }),
  },
  // Small steps, and steps across the online TTL and the detect timeout (the sweep and `after` timers fire).
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.oneof(fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: TTL_MS - 2_000, max: TTL_MS + 2_000 })) }) },
  { weight: 2, arbitrary: fc.constant({ kind: "commit" as const }) },
);

function eventOf(step: Exclude<Step, { kind: "advance" | "commit" }>, at: number): RoutedNodeEvent {
  if (step.kind === "heartbeat") {
    return step.wgOnline === undefined ? { type: "mqtt.signal", at, source: "heartbeat" } : { type: "mqtt.signal", at, source: "heartbeat", wgOnline: step.wgOnline };
  }
  switch (step.event) {
    case "ack":
      return { type: "mqtt.signal", at, source: "ack", wgOnline: true, requestId: "r-1" };
    case "will":
      return { type: "mqtt.will", at };
    case "bound":
      return { type: "client.bound", at, clientVersion: "1.0.0" };
    case "reset":
      return { type: "client.reset", at };
    case "detect.sent":
      return { type: "detect.sent", at };
    case "detect.failed":
      return { type: "detect.failed", at };
    case "staged":
      return { type: "config.staged", at, version: 2, sha: "a".repeat(64) };
    case "applied":
      return { type: "config.applied", at, version: 2, sha: "a".repeat(64) };
  }
}

interface Side {
  registry: NodeActorRegistry;
  /** Status notifications and effects, in order, as JSON. */
  seen: string[];
  rows(): Promise<unknown>;
  close(): Promise<void>;
}

async function openSide(t: TestContext, clock: ManualClock, coalesceHeartbeats: boolean): Promise<Side> {
  const { store, reader, close } = await openStores(tempDbFile(t));
  await seedNodes(store, IDS);
  const seen: string[] = [];
  const registry = new NodeActorRegistry(
    registryDeps(store, clock, {
      onlineTtlMs: TTL_MS,
      coalesceHeartbeats,
      effects: {
        revokeClient: (_c, nodeId, reason) => seen.push(`revoke ${nodeId} ${reason}`),
        requestConfigPush: (_c, nodeId) => seen.push(`push ${nodeId}`),
      },
      onStatusChanged: (_c, nodeId, projection) => seen.push(`status ${nodeId} ${JSON.stringify(projection)}`),
    }),
  );
  await registry.start();
  return {
    registry,
    seen,
    rows: async () => {
      const states = [...(await listClientStates(reader.db, CONFIG))].sort(([a], [b]) => a.localeCompare(b));
      const transitions = [];
      for (const id of IDS) transitions.push(listNodeTransitions(sqliteOf(reader), id, Number.MAX_SAFE_INTEGER, 10_000).map(({ transition_id: _id, ...row }) => row));
      return { states, transitions };
    },
    close: async () => {
      await registry.stop();
      await close();
    },
  };
}

function compareNow(coalescing: Side, reference: Side, where: string): void {
  for (const id of IDS) {
    assert.deepEqual(coalescing.registry.projection(CONFIG, id), reference.registry.projection(CONFIG, id), `${where}: projection of ${id}`);
    const a = coalescing.registry.machineState(CONFIG, id);
    const b = reference.registry.machineState(CONFIG, id);
    assert.deepEqual({ value: a?.value, context: a?.context }, { value: b?.value, context: b?.context }, `${where}: machine state of ${id}`);
  }
}

/** Lets the registries' queued flushes run (setImmediate); waits for no timer. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

test("spec §3.1, §3.3, DESIGN §3: a registry that coalesces heartbeats is indistinguishable from one that delivers each, for random event sequences (fast-check)", async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 120 }), async (steps) => {
      const clock = new ManualClock();
      const coalescing = await openSide(t, clock, true);
      const reference = await openSide(t, clock, false);
      try {
        // Both start bound and online, so the runs of heartbeats begin at once.
        for (const side of [coalescing, reference]) {
          for (const id of IDS) {
            await side.registry.send(CONFIG, id, { type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
            await side.registry.send(CONFIG, id, { type: "mqtt.signal", at: clock.now(), source: "heartbeat", wgOnline: true });
          }
        }
        for (const [i, step] of steps.entries()) {
          const where = `step ${i} ${JSON.stringify(step)}`;
          if (step.kind === "advance") clock.advance(step.ms);
          else if (step.kind === "commit") {
            await settle();
            assert.deepEqual(await coalescing.rows(), await reference.rows(), `${where}: stored rows`);
          } else {
            const id = IDS[step.node] as string;
            const at = clock.now();
            coalescing.registry.post(CONFIG, id, eventOf(step, at));
            reference.registry.post(CONFIG, id, eventOf(step, at));
            clock.advance(1);
          }
          compareNow(coalescing, reference, where);
        }
        await settle();
        assert.deepEqual(await coalescing.rows(), await reference.rows(), "stored rows at the end");
        assert.deepEqual(coalescing.seen, reference.seen, "status notifications and effects");
      } finally {
        await coalescing.close();
        await reference.close();
      }
    }),
    { numRuns: 60, seed: 20261126 },
  );
});

test("spec §3.1: after one heartbeat delivered in full, identical ones are held (not sent to XState), yet each moves the stored newest signal and the presence deadline; a different report is delivered", async (t) => {
  const clock = new ManualClock();
  const side = await openSide(t, clock, true);
  t.after(() => side.close());
  const id = "n-a";
  const heartbeat = (wgOnline: boolean) => side.registry.send(CONFIG, id, { type: "mqtt.signal", at: clock.now(), source: "heartbeat", wgOnline });
  await side.registry.send(CONFIG, id, { type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
  await heartbeat(true); // offline → online, running: delivered
  await heartbeat(true); // only lastSignalAt moves: delivered, and learned
  assert.equal(side.registry.stats().coalescedHeartbeats, 0);
  clock.advance(TTL_MS - 1_000);
  const at = clock.now();
  await heartbeat(true);
  assert.equal(side.registry.stats().coalescedHeartbeats, 1, "the third identical heartbeat is held");
  assert.equal(side.registry.projection(CONFIG, id)?.lastSignalAt, at);
  assert.equal(side.registry.machineState(CONFIG, id)?.context.lastSignalAt, at);
  const stored = (await side.rows()) as { states: Array<[string, { last_signal_at: number | null }]> };
  assert.equal(stored.states.find(([n]) => n === id)?.[1].last_signal_at, at, "the commit wrote the held heartbeat's time");
  // The TTL of the heartbeat before it has passed: the sweep checks, the machine sees the held time.
  clock.advance(2_000);
  assert.equal(side.registry.projection(CONFIG, id)?.presence, "online");
  // A report that changes the runtime is delivered.
  await heartbeat(false);
  assert.equal(side.registry.stats().coalescedHeartbeats, 1);
  assert.equal(side.registry.projection(CONFIG, id)?.runtime, "stopped");
  clock.advance(TTL_MS);
  assert.equal(side.registry.projection(CONFIG, id)?.presence, "dropped");
});
