import assert from "node:assert/strict";
import { test } from "node:test";
import type { NodeActorRegistry } from "../../src/actors/registry.js";
import type { NodeProjection } from "../../src/actors/projection.js";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { DetectScheduler } from "../../src/mqtt/detect-scheduler.js";
import { OutageResync } from "../../src/mqtt/outage-resync.js";

/**
 * When the backend's broker link counts as back after an outage (src/mqtt/outage-resync.ts,
 * spec §3.1, §6.4 rules 8 and 10), on a ManualClock with the registry and the detect scheduler
 * as recording fakes; and the detect scheduler's answer to it: a round at once while the console
 * has viewers, nothing without.
 */

const log = createLogger("silent");

function harness() {
  const clock = new ManualClock();
  let up = false;
  const ended: Array<[number, number]> = [];
  let returned = 0;
  const resync = new OutageResync({
    connected: () => up,
    clock,
    log,
    registry: {
      outageEnded: async (since, at) => {
        ended.push([since, at]);
        return 0;
      },
    },
    detect: { linkReturned: () => void returned++ },
  });
  const set = (v: boolean) => {
    up = v;
    resync.linkChanged();
  };
  return { clock, set, ended, returned: () => returned };
}

test("spec §3.1: the first connection of a run is no return; after the link went down and came back, nodes silent since it went down are asked for, once per outage", () => {
  const h = harness();
  h.set(true);
  assert.deepEqual(h.ended, [], "the first connection");
  h.clock.advance(1000);
  const down = h.clock.now();
  h.set(false);
  h.clock.advance(5000);
  h.set(false); // reported again while still down: the outage began at the first report
  h.clock.advance(7000);
  h.set(true);
  assert.deepEqual(h.ended, [[down, down + 12_000]]);
  assert.equal(h.returned(), 1);
  h.set(true); // a change report while up is no second return
  assert.equal(h.ended.length, 1);
});

test("spec §6.4 rule 8: when the link returns, the detect round starts at once only while the console has viewers", async () => {
  const clock = new ManualClock();
  const sent: string[] = [];
  const online = { mode: "dynamic", clientInitialized: true, presence: "online" } as NodeProjection;
  const registry = { projections: () => [{ configId: "c", nodeId: "n", projection: online }] } as unknown as NodeActorRegistry;
  const detect = new DetectScheduler({ registry, clock, log, intervalMs: 120_000, sendDetect: async (_c, n) => void sent.push(n) });

  detect.linkReturned();
  await detect.whenIdle();
  assert.deepEqual(sent, [], "no viewers: no probe");

  detect.setActive(true);
  await detect.whenIdle();
  assert.equal(sent.length, 1, "the first round when a viewer arrives");
  clock.advance(1000);
  detect.linkReturned();
  await detect.whenIdle();
  assert.equal(sent.length, 2, "a round at once, not at its timer");
  assert.equal(detect.rounds, 2);
  await detect.stop();
});
