/**
 * The link-state rule (src/domain/link-state.ts; docs/links.md) at its boundaries: REJECT_AFTER_TIME
 * (180 s) between up and stale, 3 × REJECT_AFTER_TIME (540 s) between stale and down; the age
 * measured on the host's clock at its dump plus the server's time since the report arrived.
 */
import assert from "node:assert/strict";
import test from "node:test";
import fc from "fast-check";
import { directionState, KEYS_ZEROED_AFTER_S, pairState, REJECT_AFTER_TIME_S, type DirectionSample } from "../../src/domain/link-state.js";
import { LINK_STATES } from "../../src/protocol/links.schema.js";

const HOST_NOW = 1_800_000_000;
const RECEIVED = 5_000_000;
const sample = (ageAtDumpS: number, over: Partial<DirectionSample> = {}): DirectionSample => ({
  running: true,
  host_time: HOST_NOW,
  latest_handshake: HOST_NOW - ageAtDumpS,
  received_at_ms: RECEIVED,
  ...over,
});

test("up below REJECT_AFTER_TIME, stale from it, down from 3 × REJECT_AFTER_TIME", () => {
  assert.equal(REJECT_AFTER_TIME_S, 180);
  assert.equal(KEYS_ZEROED_AFTER_S, 540);
  assert.equal(directionState(sample(0), RECEIVED), "up");
  assert.equal(directionState(sample(179), RECEIVED), "up");
  assert.equal(directionState(sample(179), RECEIVED + 999), "up");
  assert.equal(directionState(sample(179), RECEIVED + 1000), "stale", "the server's time since the report adds to the age");
  assert.equal(directionState(sample(180), RECEIVED), "stale");
  assert.equal(directionState(sample(539), RECEIVED), "stale");
  assert.equal(directionState(sample(540), RECEIVED), "down");
  assert.equal(directionState(sample(0), RECEIVED + 540_000), "down");
});

test("never a handshake, no entry for the peer, or an interface not running: down; no report: unknown", () => {
  assert.equal(directionState(sample(0, { latest_handshake: null }), RECEIVED), "down");
  assert.equal(directionState(sample(0, { latest_handshake: undefined }), RECEIVED), "down");
  assert.equal(directionState(sample(0, { running: false }), RECEIVED), "down");
  assert.equal(directionState(null, RECEIVED), "unknown");
});

test("a host clock ahead of its handshakes' or a server clock behind the report never makes an age negative", () => {
  assert.equal(directionState(sample(-50), RECEIVED - 10_000), "up");
});

test("a pair is the worse direction, up < stale < unknown < down, whichever side it is on", () => {
  assert.equal(pairState("up", "up"), "up");
  assert.equal(pairState("up", "stale"), "stale");
  assert.equal(pairState("stale", "unknown"), "unknown");
  assert.equal(pairState("unknown", "down"), "down");
  fc.assert(
    fc.property(fc.constantFrom(...LINK_STATES), fc.constantFrom(...LINK_STATES), (a, b) => {
      assert.equal(pairState(a, b), pairState(b, a));
      assert.ok(pairState(a, b) === a || pairState(a, b) === b);
      if (a === "down" || b === "down") assert.equal(pairState(a, b), "down");
    }),
    { numRuns: 50 },
  );
});
