/**
 * The realtime SSE event types of spec §6.5, and the typical payload keys of each.
 *
 * The payload shapes below are documentation: the specification names only the typical keys
 * ("Inner payload shapes of the SSE events beyond the typical keys above: not shown"), and the
 * hub sends whatever plain object its caller gives ({@link EventHub.publish}). The console
 * refetches the affected REST projection on each event (spec §6.5 rule 7), so these payloads are
 * refresh signals, not the source of truth.
 */

/** Every event type of the spec §6.5 table, in the table's order. */
export const SSE_EVENT_TYPES = [
  "config.list.updated",
  "config.overview.updated",
  "node.workspace.updated",
  "node.apply.updated",
  "mesh.workspace.updated",
  "endpoint.status.updated",
  "control.log.created",
  "control.log.updated",
  "settings.mqtt.updated",
  "snapshot.list.updated",
  "system.status.updated",
  "system.clock.sync",
] as const;

/** One event type of spec §6.5; it is the SSE `event` field and the `type` inside `data`. */
export type SseEventType = (typeof SSE_EVENT_TYPES)[number];

/** Whether `value` names an event type of spec §6.5. */
export function isSseEventType(value: unknown): value is SseEventType {
  return typeof value === "string" && (SSE_EVENT_TYPES as readonly string[]).includes(value);
}

/**
 * Typical payload keys of each event type (spec §6.5 table), with what each key carries in this
 * service. Docs only: `publish()` accepts any JSON-safe object for any type.
 */
export interface SsePayloads {
  /** Home config cards and the sidebar list. */
  "config.list.updated": { configs?: unknown[] };
  /** Config overview header, node cards and tags. */
  "config.overview.updated": { config_id: string; overview?: unknown; tags?: unknown[] };
  /** Node header and workspace. */
  "node.workspace.updated": { config_id: string; node_id: string; workspace?: unknown };
  /** Config preview and sync state (staged vs confirmed config). */
  "node.apply.updated": {
    config_id: string;
    node_id: string;
    sync_status?: string;
    preview?: unknown;
    applied?: unknown;
  };
  /**
   * Mesh page workspace; published for the changed endpoint and every affected peer.
   * `workspace.connections[*]` carries connection-integrity results (spec §6.5 emission rules).
   */
  "mesh.workspace.updated": { config_id: string; node_id: string; workspace?: unknown; nodes?: unknown[] };
  /** Endpoint control runtime and sync state (presence, runtime state, last_reachable_at, ...). */
  "endpoint.status.updated": { config_id: string; node_id: string; status: unknown };
  /** A new control log row. */
  "control.log.created": { config_id: string; node_id: string; log: unknown };
  /** A control log status change (ACK or timeout). */
  "control.log.updated": { config_id: string; node_id: string; log: unknown };
  /** MQTT settings form refresh (never secrets). */
  "settings.mqtt.updated": { mqtt: unknown };
  /** Snapshot list refresh. */
  "snapshot.list.updated": { snapshots?: unknown[] };
  /** Home, system page and global status: the body of `GET /api/v1/system/status` (DESIGN §5). */
  "system.status.updated": { summary?: unknown; services?: unknown; sync?: unknown; topology?: unknown; update?: unknown };
  /** Server time sync and liveness: ISO 8601 UTC time of the server's clock. */
  "system.clock.sync": { timestamp: string };
}

/** The `data` field of every frame, parsed: `{type, payload}` (spec §6.5 frame fields). */
export interface SseData<T extends SseEventType = SseEventType> {
  type: T;
  payload: SsePayloads[T];
}
