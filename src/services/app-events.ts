import { EventEmitter } from "node:events";
import type { ControlLogView } from "../actors/commands.js";
import type { NodeProjection } from "../actors/projection.js";
import type { FinalCommandStatus } from "../protocol/enums.js";
import type { MeshChange } from "./mesh.service.js";

/**
 * What the parts of the service tell each other after a write has committed, keyed by event
 * name with the listener's arguments. The registry, the command tracker, the client-event log,
 * the broker link and the mesh service's after-commit step report here (through the callbacks
 * the composition root gives them); the services that react (notifier, control, metrics)
 * subscribe in their own constructors. Nothing calls back up through the root, and the registry
 * ↔ control ↔ notifier knot stays untied without late-bound variables.
 */
export interface AppEventMap {
  /** A node's projection changed in a committed group (spec §6.5 `endpoint.status.updated`). */
  "node.status_changed": [configId: string, nodeId: string, projection: NodeProjection];
  /** The node machine asks for a config push (spec §3.8). */
  "node.config_push_requested": [configId: string, nodeId: string];
  /** A control log row was created or updated (spec §6.5 `control.log.*`). */
  "control.log": [change: "created" | "updated", row: ControlLogView];
  /** A command reached a final status (`GET /metrics` counters). */
  "command.finished": [action: string, status: FinalCommandStatus];
  /** A mesh write committed (spec §6.5 publishing points). */
  "mesh.changed": [change: MeshChange];
  /** A node's config download served its staged config (the static node page's "last download"). */
  "node.config_downloaded": [configId: string, nodeId: string];
  /** The backend's broker connection came up or went down (`services.mqtt.connected`). */
  "broker.connection_changed": [];
  /** The delivery worker disabled an alert channel (410 Gone, or failing too long; docs/alerts.md). */
  "alert.channel_disabled": [channelId: string, reason: string];
  /** The alert rules wrote deliveries to the outbox (committed): the delivery worker looks for due ones. */
  "alert.enqueued": [];
}

/**
 * The typed emitter of {@link AppEventMap}. Synchronous, like direct calls: a listener runs
 * inside `emit`, and an event with no listener is dropped.
 */
export class AppEvents extends EventEmitter<AppEventMap> {}
