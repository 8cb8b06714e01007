import type { PresenceState } from "../api/types.js";

/** A node client's presence (spec §3.1) as a badge; colour is never the only signal (text too). */
export function PresenceBadge({ presence }: { presence: PresenceState }) {
  return <span className={`badge badge-${presence}`}>{presence}</span>;
}

/** What a static node reads instead of a presence or runtime state: no agent reports them (spec §3.3: runtime `unknown`). */
export const NO_AGENT = "static (no agent)";

/**
 * The presence cell of a node: its badge, or for a node the service treats as static "static (no
 * agent)" (a static node has no agent, so `offline` would read like a fault); a dynamic node
 * while MQTT is off says so instead.
 */
export function NodePresence({ node }: { node: { mode: string; effective_mode: string; client: { client_presence_state: PresenceState } } }) {
  if (node.effective_mode !== "static") return <PresenceBadge presence={node.client.client_presence_state} />;
  return <span className="badge badge-static">{node.mode === "static" ? NO_AGENT : "no agent (MQTT off)"}</span>;
}
