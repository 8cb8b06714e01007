import { SimulatedClock } from "xstate";

/**
 * Time source of the service: the current time and timers. Everything that compares or stamps
 * times, or waits, takes a {@link Clock}, so that tests drive expiry and timeouts without
 * sleeping. The shape is XState's clock (`createActor(machine, { clock })`) plus `now()`.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Runs `fn` after `ms` milliseconds; returns a handle for {@link Clock.clearTimeout}. */
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The wall clock with Node's timers (unref'd: a pending timer never holds the process open). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * A clock that moves only when told to, for tests: XState's `SimulatedClock`, started at a fixed
 * date. `advance(ms)` moves time and fires the timers that fall due, in order.
 */
export class ManualClock extends SimulatedClock implements Clock {
  /** @param startMs initial time, ms since the epoch */
  constructor(startMs = Date.parse("2026-01-01T00:00:00.000Z")) {
    super();
    this.set(startMs);
  }

  /** Moves the clock forward by `ms` milliseconds, firing due timers. */
  advance(ms: number): void {
    this.increment(ms);
  }

  override clearTimeout(handle: unknown): void {
    super.clearTimeout(handle as number);
  }
}

/** ISO 8601 UTC text of a millisecond timestamp. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
