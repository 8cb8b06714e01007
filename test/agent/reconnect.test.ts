import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { RECONNECT_BACKOFF_MS, reconnectDelay } from "../../src/agent/agent-link.js";
import { mulberry32 } from "../security/seed.js";

/**
 * The agent's reconnect wait (src/agent/agent-link.ts): jittered so that a fleet that lost its
 * broker at one instant spreads its reconnects (at 19,900 agents retrying in
 * step, Mosquitto's accept backlog of 100 held connections back for seconds).
 */

test("every reconnect wait lies in [backoff/2, backoff] for every backoff of the schedule and every random draw", () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 5 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (doublings, r) => {
      const backoff = Math.min(RECONNECT_BACKOFF_MS.first * 2 ** doublings, RECONNECT_BACKOFF_MS.max);
      const wait = reconnectDelay(backoff, () => r);
      assert.ok(wait >= backoff / 2 && wait <= backoff, `${wait} for ${backoff}`);
    }),
  );
});

test("agents that lost the broker together do not retry together (the waits of 1,000 agents spread over the window)", () => {
  const random = mulberry32(7);
  const waits = Array.from({ length: 1000 }, () => reconnectDelay(RECONNECT_BACKOFF_MS.max, random));
  const buckets = new Set(waits.map((w) => Math.floor(w / 1000)));
  // 15 one-second buckets between 15 s and 30 s; without jitter all 1,000 fall in one.
  assert.ok(buckets.size >= 14, `waits fall into ${buckets.size} one-second buckets`);
  assert.ok(Math.max(...waits) - Math.min(...waits) > 10_000);
});
