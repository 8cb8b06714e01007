/**
 * Event-loop stalls of a benchmark process (a benchmark helper, not a test): which process held
 * its loop, when, and for how long, so that a latency spike can be put on the service or on the
 * load generator.
 */
import { performance, PerformanceObserver } from "node:perf_hooks";

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

/**
 * Names what was running when the loop stalled: a benchmark sets `label` around each operation,
 * and every stall of at least `minMs` is kept with the label in effect and the garbage
 * collection pauses (`PerformanceObserver` "gc" entries) that overlap it. `top(k)` answers the
 * `k` longest as "260 ms during endpoint change (GC 180 ms)".
 */
export function attributeStalls(minMs = 40): { label: string; top(k: number): string[]; stop(): void } {
  const recorder = recordStalls(minMs);
  const gcs: Array<[start: number, end: number]> = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push([e.startTime, e.startTime + e.duration]);
  });
  observer.observe({ entryTypes: ["gc"] });
  // The labels in effect from each time on (epoch ms, as the recorder's stalls are stamped).
  const labels: Array<[since: number, label: string]> = [[0, "between operations"]];
  const labelAt = (at: number) => labels.findLast(([since]) => since <= at)?.[1] ?? "between operations";
  const gcWithin = (from: number, to: number) => gcs.reduce((ms, [s, e]) => ms + Math.max(0, Math.min(e, to) - Math.max(s, from)), 0);
  return {
    get label() {
      return labels[labels.length - 1]?.[1] ?? "between operations";
    },
    set label(value: string) {
      labels.push([performance.timeOrigin + performance.now(), value]);
    },
    top: (k) =>
      [...recorder.stalls]
        .sort((a, b) => b[1] - a[1])
        .slice(0, k)
        .map(([at, late]) => {
          const end = at - performance.timeOrigin;
          return `${late.toFixed(0)} ms during ${labelAt(at)} (GC ${gcWithin(end - late, end).toFixed(0)} ms)`;
        }),
    stop: () => {
      recorder.stop();
      observer.disconnect();
    },
  };
}
