import assert from "node:assert/strict";
import { test } from "node:test";
import { backgroundTurn } from "../../src/lib/background-turn.js";

/**
 * One background step per turn (docs/history/decisions-2026.md): background tasks
 * that yield with `backgroundTurn()` take turns, one step per event-loop iteration, in the order
 * they asked. A ticker that re-arms itself with `setImmediate` runs once per iteration and marks
 * the iterations.
 */
test("background steps run one per event-loop iteration, in the order they asked, and all of them run", async () => {
  const log: string[] = [];
  let running = true;
  const tick = () => {
    log.push("|");
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  const task = async (name: string) => {
    for (let k = 0; k < 3; k++) {
      await backgroundTurn();
      log.push(`${name}${k}`);
    }
  };
  await Promise.all([task("a"), task("b"), task("c")]);
  running = false;
  const steps = log.filter((e) => e !== "|");
  assert.deepEqual(steps, ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"], "first come, first served");
  // Between two iterations' ticks, at most one background step.
  const perIteration = log.join(" ").split("|").map((chunk) => chunk.trim().split(/\s+/).filter(Boolean).length);
  assert.ok(Math.max(...perIteration) <= 1, `steps per iteration: ${perIteration.join(",")} (${log.join(" ")})`);
});
