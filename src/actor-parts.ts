import { CommandTracker } from "./actors/commands.js";
import { NodeActorRegistry } from "./actors/registry.js";
import type { AppEvents } from "./app-events.js";
import type { BrokerConnection } from "./broker-factory.js";
import type { Clock } from "./clock.js";
import type { Settings } from "./config.js";
import type { Logger } from "./logger.js";
import { EventLog } from "./mqtt/event-log.js";
import { MqttRouter } from "./mqtt/router.js";
import { ControlLogRetention } from "./services/control-log-retention.js";
import type { Store } from "./store/db.js";
import { currentRoute } from "./lib/request-route.js";
import { deleteNodeTransitionsBelow, timelineSlack, transitionCutoff } from "./store/node-transitions.repository.js";

/** The actor system and the MQTT ingest path: what the services are built on. */
export interface ActorParts {
  registry: NodeActorRegistry;
  commands: CommandTracker;
  eventLog: EventLog;
  controlLogRetention: ControlLogRetention;
  /** Issue 13: prunes each node's flight recorder (`node_transitions`) to its newest rows. */
  timelineRetention: ControlLogRetention;
  router: MqttRouter;
}

/**
 * Group commits at most this often under load, ms (`RegistryDeps.commitPaceMs`). Measured with
 * `scripts/bench/ingest.ts --only latency` at 2,000 state changes/s: 3 ms took the service's CPU
 * per message from ~445 to ~345 µs and the p99 of quiet windows to ~5.6 ms; 8 ms cut CPU a
 * little more but put 5 ms on every p50 (docs/decisions.md "Issue 14 item 7").
 */
const GROUP_COMMIT_PACE_MS = 3;

/** The node actor registry, its effects on the broker and the app events, and its flight recorder's retention. */
function createRegistry(
  deps: { settings: Settings; log: Logger; clock: Clock; store: Store; events: AppEvents; mqtt: BrokerConnection },
  timelineRetention: ControlLogRetention,
): NodeActorRegistry {
  const { settings, log, clock, store, events, mqtt } = deps;
  return new NodeActorRegistry({
    store,
    clock,
    log: log.child({ name: "actors" }),
    onlineTtlMs: settings.onlineTtlMs,
    detectTimeoutMs: settings.detectTimeoutMs,
    // spec §1.7: with MQTT off, time changes nothing stored for dynamic nodes.
    timersEnabled: settings.mqttEnabled,
    effects: {
      // Reset and dynamic → static: the broker account goes and the live client is cut (spec §3.1, §4 rule 12).
      revokeClient: (configId, nodeId) => mqtt.removeNode(configId, nodeId),
      requestConfigPush: (configId, nodeId) => events.emit("node.config_push_requested", configId, nodeId),
    },
    onStatusChanged: (configId, nodeId, projection) => events.emit("node.status_changed", configId, nodeId, projection),
    currentRoute,
    commitPaceMs: GROUP_COMMIT_PACE_MS,
    // The registry marks every timelineSlack(cap)-th row of a node and hands retention the cut-off:
    // no chain walk per commit or per check (docs/decisions.md "Issue 13: recorder cost, compact rows").
    timelineRetention: {
      keep: settings.timelineMaxPerNode,
      slack: timelineSlack(settings.timelineMaxPerNode),
      prune: (nodeId, cutoff) => timelineRetention.noteCutoff(nodeId, cutoff),
    },
  });
}

/** Issue 13: the flight recorder keeps each node's newest SVC_TIMELINE_MAX_PER_NODE rows. */
function createTimelineRetention(deps: { settings: Settings; log: Logger; clock: Clock; store: Store }): ControlLogRetention {
  return new ControlLogRetention({
    store: deps.store,
    clock: deps.clock,
    log: deps.log.child({ name: "timeline-retention" }),
    keep: deps.settings.timelineMaxPerNode,
    rows: { table: "node_transitions", cutoff: transitionCutoff, deleteBelow: deleteNodeTransitionsBelow },
  });
}

/**
 * Builds the registry, the command tracker, the client-event log, control-log retention and the
 * router (not started). What they report after a commit goes out on `events` (the notifier,
 * control and metrics subscribe once built); broker effects go to `mqtt`, which exists (unstarted)
 * before them.
 */
export function createActorParts(deps: {
  settings: Settings;
  log: Logger;
  clock: Clock;
  store: Store;
  events: AppEvents;
  mqtt: BrokerConnection;
}): ActorParts {
  const { settings, log, clock, store, events, mqtt } = deps;
  const timelineRetention = createTimelineRetention(deps);
  const registry = createRegistry(deps, timelineRetention);
  const controlLogRetention = new ControlLogRetention({
    store,
    clock,
    log: log.child({ name: "retention" }),
    keep: settings.controlLogRetention,
  });
  const commands = new CommandTracker({
    store,
    clock,
    log: log.child({ name: "commands" }),
    timeoutMs: settings.commandTimeoutMs,
    detectTimeoutMs: settings.detectTimeoutMs,
    publish: (topic, envelope) => mqtt.publish(topic, envelope),
    onLog: (change, row) => {
      events.emit("control.log", change, row);
      if (change === "created") controlLogRetention.noteInsert(row.node_id);
    },
    onTimeout: () => undefined, // detects: the node machine runs its own timeout
    // spec §3.1, §6.4 rule 8: a detect the broker did not take has failed now, not at its
    // timeout (the tracker has logged it with the node; the machine may drop the node).
    onPublishFailed: (command) => {
      if (command.kind === "detect") registry.post(command.configId, command.nodeId, { type: "detect.failed", at: clock.now() });
    },
    onFinal: (command, final) => events.emit("command.finished", command.action, final),
  });
  const eventLog = new EventLog({
    store,
    log: log.child({ name: "events-log" }),
    onStored: (row) => {
      events.emit("control.log", "created", row);
      controlLogRetention.noteInsert(row.node_id);
    },
  });
  const router = new MqttRouter({ registry, commands, clock, log: log.child({ name: "mqtt" }), events: eventLog });
  return { registry, commands, eventLog, controlLogRetention, timelineRetention, router };
}
