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

import type * as rest from "../../../src/protocol/rest.schema.js";

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

// ---- REST bodies (what the console sends: `z.input`) and answers (`z.output`), DESIGN §5 ----
export type LoginBody = z.input<typeof rest.loginBody>;
export type CreateConfigBody = z.input<typeof rest.createConfigBody>;
export type UpdateConfigBody = z.input<typeof rest.updateConfigBody>;
export type CreateNodeBody = z.input<typeof rest.createNodeBody>;
export type UpdateNodeBody = z.input<typeof rest.updateNodeBody>;
export type CreatePairBody = z.input<typeof rest.createPairBody>;
export type UpdatePairBody = z.input<typeof rest.updatePairBody>;
export type CreatePortForwardBody = z.input<typeof rest.createPortForwardBody>;
export type UpdatePortForwardBody = z.input<typeof rest.updatePortForwardBody>;
/** `PUT /api/v1/settings/mqtt`: a value overrides, `null` goes back to the environment. */
export type MqttSettingsUpdate = z.input<typeof rest.mqttSettingsBody>;
export type ControlBody = z.input<typeof rest.controlBody>;
export type ArtifactRequestBody = z.input<typeof rest.artifactRequestBody>;
export type BulkPackageBody = z.input<typeof rest.bulkPackageBody>;

export type LoginAnswer = z.output<typeof rest.loginAnswer>;
export type HealthAnswer = z.output<typeof rest.healthAnswer>;
export type ConfigListAnswer = z.output<typeof rest.configListAnswer>;
export type TagListAnswer = z.output<typeof rest.tagListAnswer>;
export type NodeListAnswer = z.output<typeof rest.nodeListAnswer>;
export type NodeCountsAnswer = z.output<typeof rest.nodeCountsAnswer>;
export type NodeFilterQuery = z.input<typeof rest.nodeFilterQuery>;
export type MeshPairListAnswer = z.output<typeof rest.meshPairListAnswer>;
export type PortForwardListAnswer = z.output<typeof rest.portForwardListAnswer>;
export type StagedConfigAnswer = z.output<typeof rest.stagedConfigAnswer>;
export type DownloadTokenAnswer = z.output<typeof rest.downloadTokenAnswer>;
export type BindCommandAnswer = z.output<typeof rest.bindCommandAnswer>;
export type ControlAnswer = z.output<typeof rest.controlAnswer>;
export type ControlLogListAnswer = z.output<typeof rest.controlLogListAnswer>;
export type ArtifactBuildAnswer = z.output<typeof rest.artifactBuildAnswer>;
export type ArtifactGrantAnswer = z.output<typeof rest.artifactGrantAnswer>;
export type DownloadGrantAnswer = z.output<typeof rest.downloadGrantAnswer>;
export type SnapshotListAnswer = z.output<typeof rest.snapshotListAnswer>;
export type RestoreAnswer = z.output<typeof rest.restoreAnswer>;

// ---- issue 13: the node statechart, a node's live state, its flight recorder (src/protocol/machine.schema.ts) ----
type MachineSchemas = typeof import("../../../src/protocol/machine.schema.js");
export type MachineGraph = z.output<MachineSchemas["machineGraphSchema"]>;
export type MachineState = z.output<MachineSchemas["machineStateSchema"]>;
export type MachineTransition = z.output<MachineSchemas["machineTransitionSchema"]>;
export type RegionValues = z.output<MachineSchemas["regionValuesSchema"]>;
export type NodeMachineView = z.output<MachineSchemas["nodeMachineViewSchema"]>;
export type NodeTransitionView = z.output<MachineSchemas["nodeTransitionViewSchema"]>;
export type NodeTimeline = z.output<MachineSchemas["nodeTimelineSchema"]>;
export type ConfigLatestTransitions = z.output<MachineSchemas["configLatestTransitionsSchema"]>;
