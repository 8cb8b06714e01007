import type { PresenceState } from "../api/types.js";

/** A node client's presence (spec §3.1) as a badge; colour is never the only signal (text too). */
export function PresenceBadge({ presence }: { presence: PresenceState }) {
  return <span className={`badge badge-${presence}`}>{presence}</span>;
}
