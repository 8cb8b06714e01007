/**
 * Measured link health as words: how long ago a handshake was, transfer in binary units, and the
 * sentence naming a pair (the topology's edges, the node page's peer table). Shown as text beside
 * every colour, so the state never rests on colour alone.
 */
import type { LinkDirection, LinkState, LinkView } from "../../api/types.js";

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** `n` bytes as "1.5 MiB" (binary units, one decimal below 10, whole above; "0 B"). */
export function bytesText(n: number): string {
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  const shown = unit === 0 || value >= 10 ? Math.round(value).toString() : value.toFixed(1);
  return `${shown} ${BYTE_UNITS[unit]}`;
}

/** Age of `iso` at `nowMs` as "12 s ago", "4 min ago", "3 h ago", "2 d ago"; null → "never". */
export function ageText(iso: string | null, nowMs: number): string {
  if (iso === null) return "never";
  const s = Math.max(0, Math.round((nowMs - Date.parse(iso)) / 1000));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.floor(s / 60)} min ago`;
  if (s < 172_800) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

/** The newer of the two sides' handshakes with each other, ISO; null when neither side ever completed one. */
export function newestHandshake(link: Pick<LinkView, "a_to_b" | "b_to_a">): string | null {
  const times = [link.a_to_b?.latest_handshake_at, link.b_to_a?.latest_handshake_at].filter((t): t is string => typeof t === "string");
  if (times.length === 0) return null;
  return times.reduce((a, b) => (Date.parse(a) >= Date.parse(b) ? a : b));
}

/** What the words say about each measured state (the legend's text). */
export const LINK_STATE_TEXT: Record<LinkState, string> = {
  up: "up",
  stale: "stale",
  down: "down",
  unknown: "not measured",
};

/** "a ↔ b: up, handshake 12 s ago" (the state, and the newest handshake when either side has one). */
export function linkSentence(a: string, b: string, link: LinkView | undefined, nowMs: number): string {
  if (link === undefined || link.link === "unknown") return `${a} ↔ ${b}: not measured`;
  const at = newestHandshake(link);
  return `${a} ↔ ${b}: ${link.link}, ${at === null ? "no handshake yet" : `handshake ${ageText(at, nowMs)}`}`;
}

/** One side's view of the other: "a → b: handshake 12 s ago, received 1.5 MiB, sent 300 KiB, endpoint 192.0.2.1:51820". */
export function directionSentence(from: string, to: string, d: LinkDirection | null, nowMs: number): string {
  if (d === null) return `${from} → ${to}: no report`;
  const endpoint = d.endpoint === null ? "no endpoint" : `endpoint ${d.endpoint}`;
  return `${from} → ${to}: handshake ${ageText(d.latest_handshake_at, nowMs)}, received ${bytesText(d.rx_bytes)}, sent ${bytesText(d.tx_bytes)}, ${endpoint}`;
}
