import { z } from "zod";
import { ackStatusSchema, applyModeSchema, controlActionSchema, tunnelProtocolSchema } from "./enums.js";
import { interfaceNameSchema } from "./fields.js";
import { ID_PATTERN } from "./ids.js";

/**
 * The envelope (spec §6.2) and every payload (spec §6.3) of the control channel, shared by the
 * backend and the agent. Schemas are lenient about extra fields (a newer agent may add some) and
 * strict about the ones named by the spec; every string is bounded.
 */

/** Largest MQTT payload either side accepts, bytes (spec §8 leaves it open; DESIGN decision). */
export const MAX_ENVELOPE_BYTES = 256 * 1024;

// The enums are declared once in ./enums.ts; re-exported here for the envelope's importers.
export {
  ACK_STATUSES,
  ackStatusSchema,
  CONTROL_ACTIONS,
  controlActionSchema,
  TUNNEL_PROTOCOLS,
  tunnelProtocolSchema,
  type AckStatus,
  type ControlAction,
  type TunnelProtocol,
} from "./enums.js";

const text = (max: number) => z.string().max(max);
const idText = z.string().regex(ID_PATTERN);
/** wg-quick's interface name rule (one definition: src/protocol/fields.ts). */
export { interfaceNameSchema };

/** spec §6.2. `request_id` is empty for passive messages (heartbeat, event). */
export const envelopeSchema = z.object({
  type: text(32).min(1),
  request_id: text(128),
  config_id: idText,
  node_id: idText,
  boot_id: text(128),
  session_id: text(128),
  sent_at: z.iso.datetime({ offset: true }),
  payload: z.record(z.string(), z.unknown()),
});
export type Envelope = z.infer<typeof envelopeSchema>;

// ---- downstream payloads ----------------------------------------------------------------

/**
 * Topic config/push (spec §6.3). `apply_mode` is an extension beyond the spec's table, sent only
 * for a config whose pushes are `hitless` (docs/decisions.md "Hitless peer updates"): an agent
 * that does not know it drops it and runs the spec's sequence (§3.8); absent means `restart`.
 */
export const configPushPayloadSchema = z.object({
  action: z.literal("push_config"),
  tunnel_protocol: tunnelProtocolSchema,
  previous_tunnel_protocol: tunnelProtocolSchema,
  interface_name: interfaceNameSchema,
  config_version: z.number().int().nonnegative(),
  config_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  config_text: text(128 * 1024),
  apply_mode: applyModeSchema.optional(),
});
export type ConfigPushPayload = z.infer<typeof configPushPayloadSchema>;

/** Topic control (spec §6.3): must carry tunnel_protocol and interface_name. */
export const controlPayloadSchema = z.object({
  action: controlActionSchema,
  tunnel_protocol: tunnelProtocolSchema,
  interface_name: interfaceNameSchema,
});
export type ControlPayload = z.infer<typeof controlPayloadSchema>;

/** Topic detect (spec §6.3). */
export const detectPayloadSchema = z.object({
  tunnel_protocol: tunnelProtocolSchema,
  interface_name: interfaceNameSchema,
});
export type DetectPayload = z.infer<typeof detectPayloadSchema>;

/** Topic info (spec §6.3): runs raw `wg` / `awg`. */
export const infoPayloadSchema = z.object({
  action: z.literal("wg_show"),
  tunnel_protocol: tunnelProtocolSchema,
  interface_name: interfaceNameSchema,
});
export type InfoPayload = z.infer<typeof infoPayloadSchema>;

// ---- upstream payloads ------------------------------------------------------------------

/** Common ACK payload (spec §6.3): status, message, action. ACKs never carry output (§6.4 rule 4). */
export const ackPayloadSchema = z.object({
  status: ackStatusSchema,
  message: text(4096).default(""),
  action: text(32).default(""),
});
export type AckPayload = z.infer<typeof ackPayloadSchema>;

/** Detect ACK payload (spec §6.3). */
export const detectAckPayloadSchema = ackPayloadSchema.extend({
  client_online: z.boolean(),
  wg_online: z.boolean(),
  platform: text(64),
  client_version: text(64),
});
export type DetectAckPayload = z.infer<typeof detectAckPayloadSchema>;

/** Config push ACK: the common ACK, plus the pair the agent applied (echoed from the push). */
export const configPushAckPayloadSchema = ackPayloadSchema.extend({
  config_version: z.number().int().nonnegative().optional(),
  config_sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
});
export type ConfigPushAckPayload = z.infer<typeof configPushAckPayloadSchema>;

/** Event payload (spec §6.3). Command output only: request_id, action, stream, output. */
export const eventPayloadSchema = z.object({
  level: text(16),
  event: text(64).min(1),
  message: text(4096).default(""),
  request_id: text(128).optional(),
  action: text(32).optional(),
  stream: text(16).optional(),
  output: text(128 * 1024).optional(),
});
export type EventPayload = z.infer<typeof eventPayloadSchema>;

/** Heartbeat payload (spec §6.3). */
export const heartbeatPayloadSchema = z.object({
  client_online: z.boolean(),
  wg_online: z.boolean(),
});
export type HeartbeatPayload = z.infer<typeof heartbeatPayloadSchema>;

/** The schema of each upstream topic's payload. */
export const UPSTREAM_PAYLOAD_SCHEMAS = {
  config_push_ack: configPushAckPayloadSchema,
  control_ack: ackPayloadSchema,
  detect_ack: detectAckPayloadSchema,
  info_ack: ackPayloadSchema,
  event: eventPayloadSchema,
  heartbeat: heartbeatPayloadSchema,
} as const;

/**
 * The last will (spec §6.3): a full envelope of type `event` on the event topic, empty boot_id
 * and session_id, payload level `info`, event `offline`, and a message.
 */
export function willEnvelope(configId: string, nodeId: string, sentAt: string): Envelope {
  return {
    type: "event",
    request_id: "",
    config_id: configId,
    node_id: nodeId,
    boot_id: "",
    session_id: "",
    sent_at: sentAt,
    payload: { level: "info", event: "offline", message: "agent connection lost" },
  };
}
