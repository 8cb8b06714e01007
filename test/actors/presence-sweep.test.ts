import assert from "node:assert/strict";
import { test } from "node:test";
import { PresenceSweep, SWEEP_BUCKET_MS, type Swept } from "../../src/actors/presence-sweep.js";
import { ManualClock } from "../../src/lib/clock.js";

/**
 * The presence sweep on its own (src/actors/presence-sweep.ts): online-TTL deadlines in
 * one-second buckets under one clock timer, driven by a ManualClock (spec §3.1 online TTL).
 */

interface Node extends Swept {
  id: string;
}

/**
 * A sweep whose due nodes are dropped at once, as the node machine does at the TTL: in the
 * registry the hand-over's snapshot change re-tracks the node (null: no longer online) before
 * the sweep looks for the next deadline.
 */
function sweepOf(clock: ManualClock, enabled = true): { sweep: PresenceSweep<Node>; due: string[] } {
  const due: string[] = [];
  const sweep: PresenceSweep<Node> = new PresenceSweep<Node>({
    clock,
    enabled,
    onDue: (node, now) => {
      due.push(`${node.id}@${now - clock.now()}`);
      sweep.track(node, null);
    },
  });
  return { sweep, due };
}

const node = (id: string): Node => ({ id, deadline: null });

test("spec §3.1: a tracked node is handed over exactly at its deadline, not 1 ms before; one timer serves every node, armed for the earliest deadline", () => {
  const clock = new ManualClock();
  const t0 = clock.now();
  const { sweep, due } = sweepOf(clock);
  const a = node("a");
  const b = node("b");
  sweep.track(a, t0 + 5_000);
  sweep.track(b, t0 + 2_500);
  assert.equal(sweep.tracked, 2);
  assert.equal(sweep.nextAt, t0 + 2_500, "armed for the earliest deadline");
  clock.advance(2_499);
  assert.deepEqual(due, []);
  clock.advance(1);
  assert.deepEqual(due, ["b@0"], "due at its deadline, on the clock's time");
  assert.equal(b.deadline, null);
  assert.equal(sweep.nextAt, t0 + 5_000, "re-armed for the next deadline");
  clock.advance(2_500);
  assert.deepEqual(due, ["b@0", "a@0"]);
});

test("spec §3.1 'no other recent reachable signal': a node re-tracked to a later deadline is not due at its old one; an untracked node is never due", () => {
  const clock = new ManualClock();
  const t0 = clock.now();
  const { sweep, due } = sweepOf(clock);
  const a = node("a");
  const b = node("b");
  sweep.track(a, t0 + 1_000);
  sweep.track(b, t0 + 1_200);
  sweep.track(a, t0 + 10 * SWEEP_BUCKET_MS); // a heartbeat moved a's deadline to another bucket
  sweep.untrack(b); // b left management
  assert.equal(b.deadline, null);
  assert.equal(sweep.tracked, 1);
  clock.advance(9 * SWEEP_BUCKET_MS);
  assert.deepEqual(due, [], "the old deadlines passed without a hand-over");
  clock.advance(SWEEP_BUCKET_MS);
  assert.deepEqual(due, ["a@0"]);
});

test("spec §3.1: nodes whose deadlines share a bucket are each handed over at their own deadline", () => {
  const clock = new ManualClock(0);
  const { sweep, due } = sweepOf(clock);
  const a = node("a");
  const b = node("b");
  sweep.track(a, 3_100);
  sweep.track(b, 3_700);
  clock.advance(3_100);
  assert.deepEqual(due, ["a@0"], "b's deadline in the same bucket has not passed");
  assert.equal(sweep.nextAt, 3_700);
  clock.advance(600);
  assert.deepEqual(due, ["a@0", "b@0"]);
});

test("spec §1.7 (MQTT off): a disabled sweep tracks nothing and never fires", () => {
  const clock = new ManualClock();
  const { sweep, due } = sweepOf(clock, false);
  const a = node("a");
  sweep.track(a, clock.now() + 1_000);
  assert.equal(a.deadline, null);
  assert.equal(sweep.tracked, 0);
  assert.equal(sweep.nextAt, null);
  clock.advance(10_000);
  assert.deepEqual(due, []);
});

test("a cleared sweep forgets every deadline and disarms its timer; a stopped one also tracks nothing afterwards", () => {
  const clock = new ManualClock();
  const { sweep, due } = sweepOf(clock);
  const a = node("a");
  sweep.track(a, clock.now() + 1_000);
  sweep.clear();
  assert.equal(a.deadline, null, "cleared nodes carry no deadline");
  assert.deepEqual([sweep.tracked, sweep.nextAt], [0, null]);
  sweep.track(a, clock.now() + 2_000);
  assert.equal(sweep.tracked, 1, "a cleared sweep tracks again (a reload)");
  sweep.stop();
  sweep.track(a, clock.now() + 3_000);
  assert.deepEqual([a.deadline, sweep.tracked, sweep.nextAt], [null, 0, null]);
  clock.advance(10_000);
  assert.deepEqual(due, []);
});
