import { z } from "zod";
import {
  configDetailViewSchema,
  configViewSchema,
  controlLogViewSchema,
  endpointStatusViewSchema,
  meshPairViewSchema,
  mqttSettingsViewSchema,
  nodeViewSchema,
  serverSettingsViewSchema,
  snapshotEntrySchema,
  systemStatusSchema,
  tagViewSchema,
} from "./views.schema.js";
import { channelViewSchema, deliveryViewSchema } from "./alerts.schema.js";
import { alertRuleViewSchema } from "./alert-rules.schema.js";

/**
 * The realtime SSE event types of spec §6.5 and the payload schema of each. The console
 * refetches the affected REST projection on each event (spec §6.5 rule 7), so these payloads are
 * refresh signals, not the source of truth; their shapes are still fixed here, once.
 */

/**
 * Every event type of the spec §6.5 table, in the table's order, with `settings.server.updated`
 * beside `settings.mqtt.updated`; then the alert delivery log's events (docs/alerts.md), then
 * measured link health's (docs/links.md), then the alert rules'.
 */
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
  "settings.server.updated",
  "snapshot.list.updated",
  "system.status.updated",
  "system.clock.sync",
  "audit.appended",
  "alert.delivery.updated",
  "alert.channel.updated",
  "config.links.updated",
  "alert.rule.updated",
] as const;

/** One event type of spec §6.5; it is the SSE `event` field and the `type` inside `data`. */
export type SseEventType = (typeof SSE_EVENT_TYPES)[number];

/** Whether `value` names an event type of spec §6.5. */
export function isSseEventType(value: unknown): value is SseEventType {
  return typeof value === "string" && (SSE_EVENT_TYPES as readonly string[]).includes(value);
}

/** An id as the payloads carry it: the plain string of `protocol/ids.ts` syntax. */
const id = z.string();

/**
 * The payload schema of each event type (spec §6.5 table: the typical keys; "inner payload
 * shapes beyond the typical keys: not shown", so each key carries the REST view of the same
 * thing, one schema per wire shape in `views.schema.ts`). Plain data only: times are
 * ISO 8601 strings and enums their wire strings, so the hub serializes a payload with one
 * `JSON.stringify` (spec §6.5: "times, enums and domain objects are converted to strings or plain
 * objects before sending" — by the services that build the views, checked here by type).
 *
 * The hub does not parse payloads with these schemas (`endpoint.status.updated` goes out per
 * heartbeat); `tsc` checks every publishing point against the types below and
 * `test/events/event-types.test.ts` parses the frames the real service paths publish.
 */
export const SSE_PAYLOAD_SCHEMAS = {
  /** Home config cards and the sidebar list. */
  "config.list.updated": z.object({ configs: z.array(configViewSchema) }),
  /** Config overview header, node cards and tags (`tags` repeats `overview.tags`). */
  "config.overview.updated": z.object({ config_id: id, overview: configDetailViewSchema, tags: z.array(tagViewSchema) }),
  /** Node header and workspace: the node view. */
  "node.workspace.updated": z.object({ config_id: id, node_id: id, workspace: nodeViewSchema }),
  /**
   * Config preview and sync state: the newly staged config (`preview`), the node's sync state
   * (`static` for nodes effectively static, spec §3.5) and whether the staged config is applied.
   */
  "node.apply.updated": z.object({
    config_id: id,
    node_id: id,
    sync_status: z.enum(["latest", "pending", "static"]),
    preview: z.object({ config_version: z.number(), config_sha256: z.string() }),
    applied: z.boolean(),
  }),
  /**
   * Mesh page workspace; published for the changed endpoint and every affected peer.
   * `workspace.connections[*]` carries connection-integrity results (spec §6.5 emission rules).
   */
  "mesh.workspace.updated": z.object({
    config_id: id,
    node_id: id,
    workspace: z.object({ node: nodeViewSchema, connections: z.array(meshPairViewSchema) }),
    nodes: z.array(nodeViewSchema),
  }),
  /** Endpoint control runtime and sync state (presence, runtime state, last_reachable_at, ...). */
  "endpoint.status.updated": z.object({ config_id: id, node_id: id, status: endpointStatusViewSchema }),
  /** A new control log row. */
  "control.log.created": z.object({ config_id: id, node_id: id, log: controlLogViewSchema }),
  /** A control log status change (ACK or timeout). */
  "control.log.updated": z.object({ config_id: id, node_id: id, log: controlLogViewSchema }),
  /** MQTT settings form refresh (never secrets). */
  "settings.mqtt.updated": z.object({ mqtt: mqttSettingsViewSchema }),
  /** Server settings refresh: the public URL hosts are told (an addition to the spec's table, beside settings.mqtt.updated). */
  "settings.server.updated": z.object({ server: serverSettingsViewSchema }),
  /** Snapshot list refresh. */
  "snapshot.list.updated": z.object({ snapshots: z.array(snapshotEntrySchema) }),
  /** Home, system page and global status: the body of `GET /api/v1/system/status` (DESIGN §5). */
  "system.status.updated": systemStatusSchema,
  /** Server time sync and liveness: ISO 8601 UTC time of the server's clock. */
  "system.clock.sync": z.object({ timestamp: z.iso.datetime() }),
  /**
   * An entry was appended to the audit log (README "Audit log"; an addition to the spec's table).
   * Only its id and action: streams reach viewers too, and the entry itself is for admins
   * (`GET /api/v1/audit`), which the Audit page reads again on it.
   */
  "audit.appended": z.object({ audit_id: z.number().int(), action: z.string() }),
  /** An alert delivery was enqueued or attempted (docs/alerts.md): the delivery log's row. */
  "alert.delivery.updated": z.object({ delivery: deliveryViewSchema }),
  /** An alert channel was created, changed, disabled by the delivery worker, or deleted (`channel` null). */
  "alert.channel.updated": z.object({ channel_id: id, channel: channelViewSchema.nullable() }),
  /** A node's host reported its peers and the report is stored (docs/links.md): the config's link matrix and that node's peer table read again. */
  "config.links.updated": z.object({ config_id: id, node_id: id }),
  /** An alert rule was created, changed or deleted (`rule` null). */
  "alert.rule.updated": z.object({ rule_id: id, rule: alertRuleViewSchema.nullable() }),
} as const satisfies Record<SseEventType, z.ZodType>;

/** What a publisher hands the hub for each event type (`z.input` of its schema). */
export type SsePayloads = { [T in SseEventType]: z.input<(typeof SSE_PAYLOAD_SCHEMAS)[T]> };

/** What a subscriber reads in `data.payload` for each event type (`z.output` of its schema). */
export type SseWirePayloads = { [T in SseEventType]: z.output<(typeof SSE_PAYLOAD_SCHEMAS)[T]> };

/** The `data` field of every frame, parsed: `{type, payload}` (spec §6.5 frame fields). */
export interface SseData<T extends SseEventType = SseEventType> {
  type: T;
  payload: SseWirePayloads[T];
}
