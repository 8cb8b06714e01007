/**
 * Event-loop stalls of a benchmark process (a benchmark helper, not a test): which process held
 * its loop, when, and for how long, so that a latency spike can be put on the service or on the
 * load generator.
 */
import { performance } from "node:perf_hooks";

/** One event-loop stall: [epoch ms when the late tick ran, how late it was (ms)]. */
export type Stall = [atMs: number, lateMs: number];

/**
 * Records this process's event-loop stalls: a 5 ms interval whose tick comes more than `minMs`
 * late was kept from running by work that long. `stop()` ends it and returns the stalls.
 */
export function recordStalls(minMs = 20): { readonly stalls: readonly Stall[]; stop(): Stall[] } {
  const stalls: Stall[] = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const late = now - last - 5;
    if (late > minMs) stalls.push([performance.timeOrigin + now, late]);
    last = now;
  }, 5);
  timer.unref();
  return { stalls, stop: () => (clearInterval(timer), stalls) };
}

/** The longest stall that ended in [from, to) (ms; 0 when none). */
export function maxStall(stalls: readonly Stall[], from: number, to: number): number {
  let max = 0;
  for (const [at, late] of stalls) if (at >= from && at < to && late > max) max = late;
  return max;
}
