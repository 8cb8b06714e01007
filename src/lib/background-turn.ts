/**
 * Turns of the event loop for background work (rendering, mesh reports, automatic pushes): each
 * caller waits its turn in one FIFO, and one waiter is let go per loop iteration. Several
 * background tasks that yield "until the next turn" with `setImmediate` would all run again in
 * the same check phase, so one iteration holds all their steps at once; here an iteration holds
 * one step of one of them, and ingest, commits and socket writes run between
 * (docs/history/decisions-2026.md "one background step per turn").
 */
const waiting: Array<() => void> = [];
let armed = false;

function release(): void {
  const next = waiting.shift();
  // The continuation runs in this callback's microtasks, before the next immediate.
  next?.();
  if (waiting.length > 0) setImmediate(release);
  else armed = false;
}

/** Resolves on a later turn of the event loop, after every background step that asked before. */
export function backgroundTurn(): Promise<void> {
  return new Promise<void>((resolve) => {
    waiting.push(resolve);
    if (!armed) {
      armed = true;
      setImmediate(release);
    }
  });
}
