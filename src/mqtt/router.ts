import type { CommandTracker, OpenCommand } from "../actors/commands.js";
import type { NodeActorRegistry } from "../actors/registry.js";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import {
  MAX_ENVELOPE_BYTES,
  UPSTREAM_PAYLOAD_SCHEMAS,
  envelopeSchema,
  type AckPayload,
  type DetectAckPayload,
  type EventPayload,
  type HeartbeatPayload,
} from "../protocol/envelope.schema.js";
import { parseTopic, type UpstreamKind } from "../protocol/topics.js";
import { WG_PEERS_EVENT } from "../protocol/wg-peers.schema.js";
import type { EventLog } from "./event-log.js";

/** Why an upstream message was dropped; counted per reason. */
export type DropReason =
  | "too_large"
  | "bad_topic"
  | "bad_json"
  | "bad_envelope"
  | "id_mismatch"
  | "bad_payload"
  | "unknown_node";

export interface RouterDeps {
  registry: NodeActorRegistry;
  commands: CommandTracker;
  clock: Clock;
  log: Logger;
  /** Where every client event is stored as a control log (spec §2.8, §6.4 rule 9). */
  events: Pick<EventLog, "record">;
}

/** Where `wg_peers` events go instead of the control log (docs/links.md); set once the services exist. */
export interface PeerReportSink {
  ingest(configId: string, nodeId: string, output: string | undefined, at: number): Promise<void>;
}

/**
 * The MQTT router (DESIGN §1 inbound): topic → envelope → payload → node actor. It checks the
 * size, the topic (one of spec §6.1's upstream topics with valid ids), the JSON, the envelope
 * (spec §6.2), that the envelope's ids equal the topic's, and the payload (spec §6.3), then
 * dispatches by `config_id`/`node_id`. Anything malformed is logged, counted and dropped; it
 * never throws and never changes a node.
 */
export class MqttRouter {
  readonly #deps: RouterDeps;
  readonly dropped = new Map<DropReason, number>();
  received = 0;
  /** The link service, which stores peer reports; until set, a report is stored as any event. */
  peerReports: PeerReportSink | null = null;

  constructor(deps: RouterDeps) {
    this.#deps = deps;
  }

  /** Handles one upstream message. @returns true when it was dispatched */
  handle(topic: string, message: Buffer): boolean {
    this.received++;
    const upstream = this.#accept(topic, message);
    if (upstream === false) return false;
    const at = this.#deps.clock.now();
    switch (upstream.kind) {
      case "heartbeat":
        this.#onHeartbeat(upstream, upstream.payload as HeartbeatPayload, at);
        return true;
      case "event":
        this.#onEvent(upstream, upstream.payload as EventPayload, at);
        return true;
      default:
        this.#onAck(upstream, upstream.kind, upstream.payload as AckPayload, at);
        return true;
    }
  }

  /**
   * The checks of {@link handle} in order: size, topic, JSON, envelope (spec §6.2), ids equal
   * the topic's, payload (spec §6.3), a dynamic node under management.
   * @returns the message to dispatch, or false when it was dropped (logged and counted)
   */
  #accept(topic: string, message: Buffer): Upstream | false {
    if (message.length > MAX_ENVELOPE_BYTES) return this.#drop("too_large", topic);
    const parsed = parseTopic(topic);
    if (parsed === null || parsed.direction !== "upstream") return this.#drop("bad_topic", topic);
    let json: unknown;
    try {
      json = JSON.parse(message.toString("utf8"));
    } catch {
      return this.#drop("bad_json", topic);
    }
    const envelope = envelopeSchema.safeParse(json);
    if (!envelope.success) return this.#drop("bad_envelope", topic, envelope.error.issues[0]?.message);
    const env = envelope.data;
    if (env.config_id !== parsed.configId || env.node_id !== parsed.nodeId) return this.#drop("id_mismatch", topic);
    const kind = parsed.kind as UpstreamKind;
    const payload = UPSTREAM_PAYLOAD_SCHEMAS[kind].safeParse(env.payload);
    if (!payload.success) return this.#drop("bad_payload", topic, payload.error.issues[0]?.message);
    const { configId, nodeId } = parsed;
    if (this.#deps.registry.modeOf(configId, nodeId) !== "dynamic") return this.#drop("unknown_node", topic);
    return { kind, configId, nodeId, requestId: env.request_id, payload: payload.data };
  }

  #onHeartbeat({ configId, nodeId }: Upstream, p: HeartbeatPayload, at: number): void {
    this.#deps.registry.post(configId, nodeId, { type: "mqtt.signal", at, source: "heartbeat", wgOnline: p.wg_online });
  }

  #onEvent({ configId, nodeId, requestId }: Upstream, p: EventPayload, at: number): void {
    if (p.event === WG_PEERS_EVENT && this.peerReports !== null) {
      // A peer report is stored as the node's latest measurement (spec §6.4 rule 9), not as a
      // control-log row a minute: it is still a reachable signal.
      void this.peerReports.ingest(configId, nodeId, p.output, at);
      this.#deps.registry.post(configId, nodeId, { type: "mqtt.signal", at, source: "event" });
      return;
    }
    // spec §6.4 rule 9, §2.8: every event is stored (the will's `offline` too: when a node went
    // away is what an operator looks for); control.log.created follows the commit.
    this.#deps.events.record({
      config_id: configId,
      node_id: nodeId,
      kind: p.event === "command_output" ? "output" : "event",
      request_id: p.request_id ?? (requestId || null),
      level: p.level,
      event: p.event,
      message: p.message,
      action: p.action ?? null,
      stream: p.stream ?? null,
      output: p.output ?? null,
      created_at: at,
    });
    if (p.event === "offline") this.#deps.registry.post(configId, nodeId, { type: "mqtt.will", at });
    else this.#deps.registry.post(configId, nodeId, { type: "mqtt.signal", at, source: "event" });
  }

  /** An ACK (spec §6.4): closes its command, and is a signal of the node whatever it closes. */
  #onAck({ configId, nodeId, requestId, payload }: Upstream, kind: AckKind, ack: AckPayload, at: number): void {
    const registry = this.#deps.registry;
    const command = this.#deps.commands.ack(kind, configId, nodeId, requestId, ack);
    if (command === null) {
      // Unknown, late, duplicate or foreign: no command changes (logged by the tracker), but
      // it is still an ACK from this node on its own topic, so it proves reachability
      // (spec §6.4 rule 3).
      registry.post(configId, nodeId, { type: "mqtt.signal", at, source: "ack", requestId });
      return;
    }
    if (kind === "detect_ack" && ack.status === "failed") {
      // The machine decides by presence: an online node drops (the failure itself, spec §3.1
      // row 3), an offline or dropped one is back online (any ACK, §3.1 row 2, §6.4 rule 6).
      registry.post(configId, nodeId, { type: "detect.failed", at, ack: true, requestId });
      return;
    }
    const { wgOnline, clientVersion } = ackFacts(kind, ack, payload, command);
    registry.post(configId, nodeId, {
      type: "mqtt.signal",
      at,
      source: "ack",
      requestId,
      ...(wgOnline === undefined ? {} : { wgOnline }),
      ...(clientVersion === undefined ? {} : { clientVersion }),
    });
    if (kind === "config_push_ack" && ack.status === "applied" && command.pushed !== null) {
      registry.post(configId, nodeId, {
        type: "config.applied",
        at,
        requestId,
        version: command.pushed.version,
        sha: command.pushed.sha,
        protocol: command.pushed.protocol,
      });
    }
  }

  #drop(reason: DropReason, topic: string, detail?: string): false {
    this.dropped.set(reason, (this.dropped.get(reason) ?? 0) + 1);
    // The topic is bounded by the broker's checks; the payload is never logged (it may hold secrets).
    this.#deps.log.warn({ reason, topic: topic.slice(0, 256), detail }, "upstream message dropped");
    return false;
  }
}

/** An upstream message that passed every check of {@link MqttRouter.handle}. */
interface Upstream {
  kind: UpstreamKind;
  configId: string;
  nodeId: string;
  /** The envelope's `request_id` (spec §6.2). */
  requestId: string;
  /** The payload as its kind's schema parsed it (spec §6.3). */
  payload: unknown;
}

type AckKind = Exclude<UpstreamKind, "heartbeat" | "event">;

/**
 * What an ACK that closed `command` tells of the node (spec §6.4 rules 3, 5): a detect ACK
 * carries the client version and, when applied, whether the tunnel is up; an applied start or
 * stop means it is up or down. Anything else tells neither.
 */
function ackFacts(kind: AckKind, ack: AckPayload, payload: unknown, command: OpenCommand): { wgOnline?: boolean; clientVersion?: string } {
  if (kind === "detect_ack") {
    const d = payload as DetectAckPayload;
    return { clientVersion: d.client_version, ...(ack.status === "applied" ? { wgOnline: d.wg_online } : {}) };
  }
  if (kind === "control_ack" && ack.status === "applied") {
    if (command.action === "start") return { wgOnline: true };
    if (command.action === "stop") return { wgOnline: false };
  }
  return {};
}
