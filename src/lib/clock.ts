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

const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00.000Z: from there on `toISOString` writes a six-digit, signed year. */
const YEAR_10000_MS = 253_402_300_800_000;
/** The character code of a decimal digit. */
const digit = (n: number) => 48 + n;

/**
 * ISO 8601 UTC text of a millisecond timestamp: exactly `new Date(ms).toISOString()` (a
 * non-finite `ms` throws its RangeError). Integer times from 1970 to 9999 are written without a
 * `Date`: the civil date by Howard Hinnant's `civil_from_days`, the text in one
 * `String.fromCharCode` (a flat string: JSON.stringify copies it as is, where a concatenation's
 * rope would be flattened first). A view of 5,000 nodes writes 10,000–15,000 of these, and
 * `toISOString` was ~10 % of the mesh page's workspace read (test/clock.test.ts
 * checks both paths agree).
 */
export function isoTime(ms: number): string {
  if (!(ms >= 0 && ms < YEAR_10000_MS && Number.isInteger(ms))) return new Date(ms).toISOString();
  const days = Math.floor(ms / DAY_MS);
  let rest = ms - days * DAY_MS;
  // civil_from_days (https://howardhinnant.github.io/date_algorithms.html), days >= 0.
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  const millis = rest - seconds * 1000;
  // "YYYY-MM-DDTHH:mm:ss.sssZ": '-' 45, 'T' 84, ':' 58, '.' 46, 'Z' 90.
  return String.fromCharCode(
    digit(Math.floor(year / 1000)), digit(Math.floor(year / 100) % 10), digit(Math.floor(year / 10) % 10), digit(year % 10), 45,
    digit(Math.floor(month / 10)), digit(month % 10), 45,
    digit(Math.floor(day / 10)), digit(day % 10), 84,
    digit(Math.floor(hours / 10)), digit(hours % 10), 58,
    digit(Math.floor(minutes / 10)), digit(minutes % 10), 58,
    digit(Math.floor(seconds / 10)), digit(seconds % 10), 46,
    digit(Math.floor(millis / 100)), digit(Math.floor(millis / 10) % 10), digit(millis % 10), 90,
  );
}
