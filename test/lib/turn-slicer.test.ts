import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { TurnSlicer, type SliceJob } from "../../src/lib/turn-slicer.js";

/**
 * Upstream messages in slices of a turn (docs/history/decisions-2026.md):
 * the slicer that hands the broker thread's messages on runs every step, in push order, in slices
 * of at most `sliceMs` (plus one step), and always continues on a later turn. A fake clock that
 * each step advances by its cost, and a `defer` that collects callbacks, make the turns explicit.
 */
function harness(sliceMs: number) {
  let now = 0;
  let deferred: Array<() => void> = [];
  const ran: string[] = [];
  /** Per slice: the cost of each step run in it. */
  const slices: number[][] = [[]];
  const errors: unknown[] = [];
  const slicer = new TurnSlicer({
    sliceMs,
    now: () => now,
    defer: (fn) => deferred.push(fn),
    onError: (err) => errors.push(err),
  });
  /** A job of `costs.length` steps, step i taking costs[i] ms; `also(i)` runs inside step i. */
  const job = (name: string, costs: readonly number[], also?: (i: number) => void): SliceJob => {
    let i = 0;
    return {
      step: () => {
        const cost = costs[i] ?? 0;
        ran.push(`${name}.${i}`);
        slices.at(-1)?.push(cost);
        now += cost;
        also?.(i);
        i++;
        return i >= costs.length;
      },
    };
  };
  /** Ends the turn: runs the callbacks deferred so far (each opens a slice of its own). */
  const turn = () => {
    const due = deferred;
    deferred = [];
    for (const fn of due) {
      slices.push([]);
      fn();
    }
    // The next push opens a new slice (the deferred callback closed the last one).
    slices.push([]);
  };
  return { slicer, job, turn, ran, slices, errors, deferredCount: () => deferred.length };
}

test("a burst is run in order, in slices of at most sliceMs plus one step, continued on later turns until done (fast-check)", () => {
  const jobArb = fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 0, maxLength: 30 });
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 10 }),
      // Turns: each a list of jobs pushed during it (steps' costs in ms).
      fc.array(fc.array(jobArb, { maxLength: 4 }), { minLength: 1, maxLength: 6 }),
      (sliceMs, turns) => {
        const h = harness(sliceMs);
        const expected: string[] = [];
        let n = 0;
        for (const pushes of turns) {
          for (const costs of pushes) {
            const name = `j${n++}`;
            // A job with no steps still counts as one step that does nothing.
            const steps = costs.length === 0 ? [0] : costs;
            for (let i = 0; i < steps.length; i++) expected.push(`${name}.${i}`);
            h.slicer.push(h.job(name, steps));
          }
          h.turn();
        }
        let turnsLeft = 10_000;
        while (h.slicer.pending > 0 && turnsLeft-- > 0) {
          assert.ok(h.deferredCount() > 0, "work left always has a later turn to run on");
          h.turn();
        }
        assert.equal(h.slicer.pending, 0);
        assert.deepEqual(h.ran, expected, "every step, in push order");
        for (const slice of h.slices) {
          const beforeLast = slice.slice(0, -1).reduce((a, b) => a + b, 0);
          assert.ok(beforeLast < sliceMs, `a slice ran ${beforeLast} ms before its last step (slice ${sliceMs} ms): ${slice.join(",")}`);
        }
      },
    ),
    { numRuns: 300 },
  );
});

test("a job pushed from inside a step runs after the jobs already queued, not before", () => {
  const h = harness(5);
  // The slice is used up, so a and b both wait for the next turn.
  h.slicer.push(h.job("x", [5]));
  h.slicer.push(h.job("a", [1, 1], (i) => (i === 0 ? h.slicer.push(h.job("c", [1])) : undefined)));
  h.slicer.push(h.job("b", [1]));
  h.turn();
  assert.deepEqual(h.ran, ["x.0", "a.0", "a.1", "b.0", "c.0"]);
});

test("a step that throws drops its job, reports the error and the next job runs", () => {
  const h = harness(100);
  const boom = new Error("boom");
  h.slicer.push({
    step: () => {
      throw boom;
    },
  });
  h.slicer.push(h.job("next", [1, 1]));
  h.turn();
  assert.deepEqual(h.errors, [boom]);
  assert.deepEqual(h.ran, ["next.0", "next.1"]);
  assert.equal(h.slicer.pending, 0);
});

test("once a slice is used up, pushes in the same turn wait for the next turn", () => {
  const h = harness(3);
  h.slicer.push(h.job("a", [2, 2, 2]));
  assert.deepEqual(h.ran, ["a.0", "a.1"], "the slice ends after the step that reached 3 ms");
  h.slicer.push(h.job("b", [1]));
  assert.deepEqual(h.ran, ["a.0", "a.1"], "nothing more in this turn");
  h.turn();
  assert.deepEqual(h.ran, ["a.0", "a.1", "a.2", "b.0"]);
});
