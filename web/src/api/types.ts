/**
 * Names for the wire types pages spell out (props, cache updaters), derived from the zod schemas
 * of `src/protocol` (`z.output` of an answer, `z.input` of a body), never copied by hand (DESIGN
 * §2). What an API call takes and answers needs no name here: `api.<operationId>` is typed from
 * its declaration (`endpoints.ts`). Add a type when a page needs one; remove it when none does.
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
  serverSettingsViewSchema,
  snapshotEntrySchema,
  systemStatusSchema,
} from "../../../src/protocol/views.schema.js";

import type * as rest from "../../../src/protocol/rest.schema.js";
import type { auditEntrySchema, auditVerifyAnswer } from "../../../src/protocol/audit.schema.js";

export type { SseEventType, SseWirePayloads } from "../../../src/protocol/sse-events.schema.js";
export type {
  ApplyMode,
  ControlAction,
  NodeMode,
  PresenceState,
  TunnelProtocol,
  CommandStatus,
} from "../../../src/protocol/enums.js";

export type SystemStatus = z.output<typeof systemStatusSchema>;
export type ConfigView = z.output<typeof configViewSchema>;
export type ConfigDetailView = z.output<typeof configDetailViewSchema>;
export type NodeView = z.output<typeof nodeViewSchema>;
export type MeshPairView = z.output<typeof meshPairViewSchema>;
export type PortForwardView = z.output<typeof portForwardViewSchema>;
export type EndpointStatusView = z.output<typeof endpointStatusViewSchema>;
export type ControlLogView = z.output<typeof controlLogViewSchema>;
export type MqttSettingsView = z.output<typeof mqttSettingsViewSchema>;
export type ServerSettingsView = z.output<typeof serverSettingsViewSchema>;
export type SnapshotEntry = z.output<typeof snapshotEntrySchema>;

// ---- REST bodies (what the console sends: `z.input`) and answers (`z.output`), DESIGN §5 ----
export type CreateConfigBody = z.input<typeof rest.createConfigBody>;
export type UpdateConfigBody = z.input<typeof rest.updateConfigBody>;
export type CreateNodeBody = z.input<typeof rest.createNodeBody>;
export type CreatePortForwardBody = z.input<typeof rest.createPortForwardBody>;
export type UpdateNodeBody = z.input<typeof rest.updateNodeBody>;
/** `PUT /api/v1/settings/mqtt`: a value overrides, `null` goes back to the environment. */
export type MqttSettingsUpdate = z.input<typeof rest.mqttSettingsBody>;
/** `PUT /api/v1/settings/server`: a public URL stores it, `null` goes back to the default. */
export type ServerSettingsUpdate = z.input<typeof rest.serverSettingsBody>;
export type ArtifactRequestBody = z.input<typeof rest.artifactRequestBody>;

export type ConfigListAnswer = z.output<typeof rest.configListAnswer>;
export type NodeListAnswer = z.output<typeof rest.nodeListAnswer>;
export type NodeCountsAnswer = z.output<typeof rest.nodeCountsAnswer>;
export type NodeFilterQuery = z.input<typeof rest.nodeFilterQuery>;
export type MeshPairListAnswer = z.output<typeof rest.meshPairListAnswer>;
export type PortForwardListAnswer = z.output<typeof rest.portForwardListAnswer>;
export type RestoreAnswer = z.output<typeof rest.restoreAnswer>;
export type StagedConfigAnswer = z.output<typeof rest.stagedConfigAnswer>;

// ---- users and personal access tokens (src/protocol/users.schema.ts) ----
type UsersSchemas = typeof import("../../../src/protocol/users.schema.js");
export type { Role } from "../../../src/protocol/roles.js";
export type UserView = z.output<UsersSchemas["userViewSchema"]>;
export type UserListAnswer = z.output<UsersSchemas["userListAnswer"]>;
export type CreateUserBody = z.input<UsersSchemas["createUserBody"]>;
export type UpdateUserBody = z.input<UsersSchemas["updateUserBody"]>;
export type AccessTokenView = z.output<UsersSchemas["accessTokenViewSchema"]>;
export type AccessTokenListAnswer = z.output<UsersSchemas["accessTokenListAnswer"]>;
export type CreateAccessTokenBody = z.input<UsersSchemas["createAccessTokenBody"]>;

// ---- the node statechart and its recorded transitions (src/protocol/machine.schema.ts) ----
type MachineSchemas = typeof import("../../../src/protocol/machine.schema.js");
export type MachineGraph = z.output<MachineSchemas["machineGraphSchema"]>;
export type MachineState = z.output<MachineSchemas["machineStateSchema"]>;
export type MachineTransition = z.output<MachineSchemas["machineTransitionSchema"]>;
export type RegionValues = z.output<MachineSchemas["regionValuesSchema"]>;
export type NodeTransitionView = z.output<MachineSchemas["nodeTransitionViewSchema"]>;

export type AuditEntry = z.output<typeof auditEntrySchema>;
export type AuditVerifyAnswer = z.output<typeof auditVerifyAnswer>;

/** Measured link health (docs/links.md): a pair's measured state and both sides' views, one host's running peers, its drift. */
export type { LinkDirection, LinkMatrixAnswer, LinkRefreshAnswer, LinkState, LinkView, NodeDrift, NodePeersAnswer, PeerStat } from "../../../src/protocol/links.schema.js";
// ---- alert channels and their deliveries (src/protocol/alerts.schema.ts) ----
type AlertsSchemas = typeof import("../../../src/protocol/alerts.schema.js");
export type { ChannelKind, DeliveryStatus } from "../../../src/protocol/alerts.schema.js";
export type ChannelView = z.output<AlertsSchemas["channelViewSchema"]>;
export type ChannelListAnswer = z.output<AlertsSchemas["channelListAnswer"]>;
export type CreateChannelBody = z.input<AlertsSchemas["createChannelBody"]>;
export type UpdateChannelBody = z.input<AlertsSchemas["updateChannelBody"]>;
export type DeliveryView = z.output<AlertsSchemas["deliveryViewSchema"]>;
export type DeliveryAttempt = z.output<AlertsSchemas["deliveryAttemptSchema"]>;

// ---- alert rules (src/protocol/alert-rules.schema.ts) ----
type AlertRulesSchemas = typeof import("../../../src/protocol/alert-rules.schema.js");
export type { AlertRuleEvent } from "../../../src/protocol/alert-rules.schema.js";
export type AlertRuleView = z.output<AlertRulesSchemas["alertRuleViewSchema"]>;
export type AlertRuleListAnswer = z.output<AlertRulesSchemas["alertRuleListAnswer"]>;
export type CreateAlertRuleBody = z.input<AlertRulesSchemas["createAlertRuleBody"]>;
export type UpdateAlertRuleBody = z.input<AlertRulesSchemas["updateAlertRuleBody"]>;
