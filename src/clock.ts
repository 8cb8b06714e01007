/**
 * Time source of the service. Everything that compares or stamps times takes a {@link Clock}
 * so that tests can drive expiry without sleeping.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to; for tests. */
export class ManualClock implements Clock {
  #ms: number;

  /** @param startMs initial time, ms since the epoch */
  constructor(startMs = Date.parse("2026-01-01T00:00:00.000Z")) {
    this.#ms = startMs;
  }

  now(): number {
    return this.#ms;
  }

  /** Moves the clock forward by `ms` milliseconds. */
  advance(ms: number): void {
    this.#ms += ms;
  }
}

/** ISO 8601 UTC text of a millisecond timestamp. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
