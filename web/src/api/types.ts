/**
 * The wire types the console reads, derived from the backend's zod schemas (`z.output`), never
 * copied by hand (issue 12; DESIGN §2: `web/` may import `src/protocol` only). Type-only imports:
 * nothing of zod reaches the bundle. Add a type here when a page needs one.
 */
import type { z } from "zod";
import type {
  configDetailViewSchema,
  configViewSchema,
  controlLogViewSchema,
  endpointStatusViewSchema,
  meshPairViewSchema,
  mqttSettingsViewSchema,
  nodeViewSchema,
  portForwardViewSchema,
  snapshotEntrySchema,
  systemStatusSchema,
  tagViewSchema,
} from "../../../src/protocol/views.schema.js";

export type { SseEventType, SseWirePayloads } from "../../../src/protocol/sse-events.schema.js";
export type {
  ControlAction,
  NodeMode,
  PresenceState,
  RuntimeState,
  TunnelProtocol,
  ConfigVersionState,
  CommandStatus,
} from "../../../src/protocol/enums.js";

export type SystemStatus = z.output<typeof systemStatusSchema>;
export type ConfigView = z.output<typeof configViewSchema>;
export type ConfigDetailView = z.output<typeof configDetailViewSchema>;
export type NodeView = z.output<typeof nodeViewSchema>;
export type TagView = z.output<typeof tagViewSchema>;
export type MeshPairView = z.output<typeof meshPairViewSchema>;
export type PortForwardView = z.output<typeof portForwardViewSchema>;
export type EndpointStatusView = z.output<typeof endpointStatusViewSchema>;
export type ControlLogView = z.output<typeof controlLogViewSchema>;
export type MqttSettingsView = z.output<typeof mqttSettingsViewSchema>;
export type SnapshotEntry = z.output<typeof snapshotEntrySchema>;

/** The body of `PUT /api/v1/settings/mqtt`: a value overrides, `null` goes back to the environment. */
export type MqttSettingsUpdate = Partial<{ [K in "public_host" | "public_port" | "public_tls_port"]: MqttSettingsView[K] | null }>;

/** `POST /api/v1/auth/login` answer (DESIGN §5). */
export interface LoginAnswer {
  access_token: string;
  token_type: "Bearer";
  expires_at: string;
}
