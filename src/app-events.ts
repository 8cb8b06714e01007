import { EventEmitter } from "node:events";
import type { ControlLogView } from "./actors/commands.js";
import type { NodeProjection } from "./actors/projection.js";
import type { FinalCommandStatus } from "./protocol/enums.js";
import type { MeshChange } from "./services/mesh.service.js";

/**
 * What the parts of the service tell each other after a write has committed, keyed by event
 * name with the listener's arguments. The registry and the command tracker are built before the
 * services that react to them (control, notifier, metrics, broker sync); they emit here, and
 * those services subscribe once they exist (docs/decisions.md "Issue 11: composition root").
 * This breaks the registry ↔ control ↔ notifier cycle without late-bound variables.
 */
export interface AppEventMap {
  /** A node's projection changed in a committed group (spec §6.5 `endpoint.status.updated`). */
  "node.status_changed": [configId: string, nodeId: string, projection: NodeProjection];
  /** Reset and dynamic → static: the broker account goes and the live client is cut (spec §3.1, §4 rule 12). */
  "node.client_revoked": [configId: string, nodeId: string];
  /** The node machine asks for a config push (spec §3.8). */
  "node.config_push_requested": [configId: string, nodeId: string];
  /** A control log row was created or updated (spec §6.5 `control.log.*`). */
  "control.log": [change: "created" | "updated", row: ControlLogView];
  /** A command reached a final status (`GET /metrics` counters). */
  "command.finished": [action: string, status: FinalCommandStatus];
  /** A mesh write committed (spec §6.5 publishing points). */
  "mesh.changed": [change: MeshChange];
  /** The backend's broker connection came up or went down (`services.mqtt.connected`). */
  "broker.connection_changed": [];
}

/**
 * The typed emitter of {@link AppEventMap}. Synchronous, like the direct calls it replaces: a
 * listener runs inside `emit`, and an event with no listener yet is dropped.
 */
export class AppEvents extends EventEmitter<AppEventMap> {}
