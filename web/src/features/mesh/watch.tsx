import type { NodeTransitionView, NodeView } from "../../api/types.js";
import { describe } from "../node/machine.js";

/**
 * "Watch a whole config": the mesh page colours each node by one region's
 * state, chosen in a select kept in the URL (`watch=presence|runtime|sync`), and shows each
 * node's last recorded transition on hover and focus. The states are the node view's own
 * (`client.client_presence_state`, `client.runtime_state`, `client.config_version_state`): shown
 * as the backend says, never derived (spec §6.5 rule 7). Colour is never the only signal: the
 * state is written next to it.
 */

export const WATCH_REGIONS = ["presence", "runtime", "sync"] as const;
export type WatchRegion = (typeof WATCH_REGIONS)[number];

/** The `watch` URL value as a region, or null (nothing chosen, or a value no longer offered). */
export function watchRegion(value: string): WatchRegion | null {
  return (WATCH_REGIONS as readonly string[]).includes(value) ? (value as WatchRegion) : null;
}

/** The node's state in `region`, as its view carries it (a static node has no sync state: `static`). */
export function regionState(n: NodeView, region: WatchRegion): string {
  if (region === "presence") return n.client.client_presence_state;
  if (region === "runtime") return n.client.runtime_state;
  return n.client.config_version_state ?? "static";
}

/** The colour of a state: `good` (online, running, latest), `warn` (dropped, pending), else `idle`. */
export function stateTone(state: string): "good" | "warn" | "idle" {
  if (state === "online" || state === "running" || state === "latest") return "good";
  if (state === "dropped" || state === "pending") return "warn";
  return "idle";
}

/** `presence: online`, coloured by its tone. */
export function WatchChip({ node, region }: { node: NodeView; region: WatchRegion }) {
  const state = regionState(node, region);
  return <span className={`watch-chip watch-${stateTone(state)}`}>{`${region}: ${state}`}</span>;
}

/** `Last transition 12:00:03: presence offline → online.fresh: mqtt.signal (heartbeat)`. */
export function lastTransitionText(row: NodeTransitionView | undefined): string {
  if (row === undefined) return "No transition recorded";
  const at = new Date(row.at).toLocaleTimeString([], { hour12: false, hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return `Last transition ${at}: ${describe(row)}`;
}

/** The select of the region to colour by (`""`: none). */
export function WatchSelect({ value, onChange }: { value: string; onChange: (v: string) => void }) {
  return (
    <div className="watch-select">
      <label htmlFor="watch-region">Colour nodes by</label>
      <select id="watch-region" value={watchRegion(value) ?? ""} onChange={(e) => onChange(e.target.value)}>
        <option value="">nothing</option>
        {WATCH_REGIONS.map((r) => (
          <option key={r} value={r}>
            {r}
          </option>
        ))}
      </select>
    </div>
  );
}
