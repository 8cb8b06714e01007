import type { LinkState } from "../protocol/links.schema.js";

/**
 * The measured state of a link from WireGuard's own timers (the WireGuard whitepaper §6.1
 * "Timers", constants of `wireguard-go` `device/constants.go` and the kernel's `messages.h`):
 *
 * - REKEY_AFTER_TIME = 120 s: a session older than this is renewed by the next packet sent, so
 *   a link carrying traffic (persistent keepalive counts) never shows a handshake older than
 *   120 s plus the handshake's own retries;
 * - REJECT_AFTER_TIME = 180 s: a session's keys are refused after this, so a handshake older
 *   than 180 s means no session can carry a packet now;
 * - 3 × REJECT_AFTER_TIME = 540 s: WireGuard erases every key of a peer that has not completed
 *   a handshake for this long (the "zero out all keys" timer): the link is gone, not resting.
 *
 * One direction (host X's entry for peer Y), with `age` = seconds since X's latest handshake
 * with Y at the judging moment:
 * - `unknown`: X has not reported;
 * - `down`: X reported its interface not running, or no entry for Y, or never a handshake, or
 *   age ≥ 540 s;
 * - `stale`: 180 s ≤ age < 540 s (keys expired, still kept: an idle link without keepalive, or
 *   one that just stopped);
 * - `up`: age < 180 s (a session whose keys WireGuard still accepts).
 * A pair is the worse of its two directions in the order up < stale < unknown < down: one side
 * that sees no session is enough for `down`, and a side that has not reported keeps the pair
 * from being called `up`.
 */

/** REKEY_AFTER_TIME, seconds. */
export const REKEY_AFTER_TIME_S = 120;
/** REJECT_AFTER_TIME, seconds. */
export const REJECT_AFTER_TIME_S = 180;
/** When WireGuard erases a silent peer's keys: 3 × REJECT_AFTER_TIME, seconds. */
export const KEYS_ZEROED_AFTER_S = 3 * REJECT_AFTER_TIME_S;

/** What one host measured about one peer, as needed to judge it. */
export interface DirectionSample {
  /** The host's interface was running when it reported. */
  running: boolean;
  /** The host's unix seconds when it read its dump. */
  host_time: number;
  /** The peer's latest handshake in the host's unix seconds; null: never. Undefined: no entry for the peer. */
  latest_handshake: number | null | undefined;
  /** The server's clock when the report arrived, ms. */
  received_at_ms: number;
}

/**
 * Seconds since the latest handshake at `nowMs` (server clock): the age the host saw at its
 * dump plus the time since the report arrived (never negative, whatever the host's clock).
 */
export function handshakeAgeS(s: DirectionSample & { latest_handshake: number }, nowMs: number): number {
  const atDump = Math.max(0, s.host_time - s.latest_handshake);
  return atDump + Math.max(0, nowMs - s.received_at_ms) / 1000;
}

/** One direction's state (see the module's rules); `null`: the host has not reported. */
export function directionState(s: DirectionSample | null, nowMs: number): LinkState {
  if (s === null) return "unknown";
  if (!s.running || s.latest_handshake === undefined || s.latest_handshake === null) return "down";
  const age = handshakeAgeS({ ...s, latest_handshake: s.latest_handshake }, nowMs);
  if (age < REJECT_AFTER_TIME_S) return "up";
  if (age < KEYS_ZEROED_AFTER_S) return "stale";
  return "down";
}

const SEVERITY: Record<LinkState, number> = { up: 0, stale: 1, unknown: 2, down: 3 };

/** A pair's state: the worse of its two directions (up < stale < unknown < down). */
export function pairState(aToB: LinkState, bToA: LinkState): LinkState {
  return SEVERITY[aToB] >= SEVERITY[bToA] ? aToB : bToA;
}
