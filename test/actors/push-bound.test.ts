import assert from "node:assert/strict";
import { test } from "node:test";
import { CommandTracker } from "../../src/actors/commands.js";
import { ManualClock } from "../../src/lib/clock.js";
import { CONFIG, log, openStores, seedNodes, tempDbFile } from "./harness.js";

/**
 * Config pushes after a re-stage of many nodes go out with bounded
 * concurrency (p-queue in src/actors/commands.ts): at most `pushConcurrency` are published and
 * waiting for the broker at once; the rest wait their turn, none is lost. Control commands are
 * not queued behind pushes. A real SQLite file; the broker is a publish function the test
 * releases by hand (the seam the tracker publishes through).
 */
test("spec §3.8: config pushes in flight never exceed pushConcurrency, and every push is published once its turn comes", async (t) => {
  const nodes = Array.from({ length: 10 }, (_, i) => `node-${i}`);
  const { store, close } = await openStores(tempDbFile(t));
  t.after(close);
  await seedNodes(store, nodes);
  const inFlight: Array<{ node: string; release: () => void }> = [];
  let maxInFlight = 0;
  const published: string[] = [];
  const tracker = new CommandTracker({
    store,
    clock: new ManualClock(),
    log,
    timeoutMs: 60_000,
    detectTimeoutMs: 20_000,
    pushConcurrency: 3,
    publish: (_topic, envelope) =>
      new Promise<void>((resolve) => {
        inFlight.push({ node: envelope.node_id, release: resolve });
        maxInFlight = Math.max(maxInFlight, inFlight.length);
      }).then(() => {
        published.push(envelope.node_id);
      }),
    onLog: () => {},
    onTimeout: () => {},
  });
  t.after(() => tracker.stop());
  const payload = { action: "push_config" } as never;
  const sends = nodes.map((nodeId) => tracker.send({ configId: CONFIG, nodeId, kind: "config_push", action: "push_config", payload }));
  await new Promise((r) => setImmediate(r));
  assert.equal(inFlight.length, 3, "only pushConcurrency pushes are handed to the broker");
  // A control command does not wait behind the queued pushes.
  const control = tracker.send({ configId: CONFIG, nodeId: "node-0", kind: "control", action: "start", payload: { action: "start" } as never });
  await new Promise((r) => setImmediate(r));
  assert.equal(inFlight.length, 4);
  inFlight.splice(3, 1)[0]?.release();
  await control;
  while (inFlight.length > 0) {
    inFlight.shift()?.release();
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    assert.ok(inFlight.length <= 3);
  }
  await Promise.all(sends);
  assert.equal(maxInFlight, 4, "3 pushes + the one control command");
  assert.deepEqual([...published].filter((n) => n !== "node-0").sort(), nodes.filter((n) => n !== "node-0").sort());
  assert.equal(published.length, 11);
});
