import { randomUUID } from "node:crypto";
import mqtt, { type IClientOptions, type MqttClient } from "mqtt";
import { willEnvelope, type Envelope } from "../protocol/envelope.schema.js";
import { nodeTopic, type UpstreamKind } from "../protocol/topics.js";
import type { AgentProfile } from "./profile.js";

/**
 * The broker URL of a bind profile (spec §2.6 `mqtt.host`, `mqtt.port`, `mqtt.tls`):
 * `mqtts://` with TLS, an IPv6 literal host in brackets (`mqtt://[2001:db8::1]:1883`).
 */
export function brokerUrl(mqtt: { host: string; port: number; tls: boolean }): string {
  const host = mqtt.host.includes(":") && !mqtt.host.startsWith("[") ? `[${mqtt.host}]` : mqtt.host;
  return `${mqtt.tls ? "mqtts" : "mqtt"}://${host}:${mqtt.port}`;
}

/** MQTT.js options of a profile's connection: MQTT 3.1.1, clean session, the will of spec §6.3. */
function connectOptions(profile: AgentProfile): IClientOptions {
  const { config_id: configId, node_id: nodeId } = profile.profile;
  return {
    protocolVersion: 4,
    clientId: profile.mqtt.client_id,
    username: profile.mqtt.username,
    password: profile.mqtt.password,
    clean: true,
    keepalive: 60,
    reconnectPeriod: 1000,
    // A refused CONNACK is retried too (with the backoff of AgentLink): the account may not exist
    // yet (bound while an external broker was down; the backend provisions it when the broker
    // returns, spec §1.8). MQTT.js gives up after a refusal by default.
    reconnectOnConnackError: true,
    connectTimeout: 15_000,
    resubscribe: false,
    ...(profile.mqtt.tls && profile.mqtt.ca_cert ? { ca: profile.mqtt.ca_cert } : {}),
    will: {
      topic: nodeTopic(configId, nodeId, "event"),
      payload: Buffer.from(JSON.stringify(willEnvelope(configId, nodeId, new Date().toISOString()))),
      qos: 1,
      retain: false,
    },
  };
}

/** The first reconnect backoff and its ceiling, ms. */
export const RECONNECT_BACKOFF_MS = { first: 1000, max: 30_000 } as const;

/**
 * The wait before the next reconnect, ms: "equal jitter" over the exponential backoff, so a fleet
 * that lost its broker at one instant does not come back at one instant (the broker's accept
 * backlog is small: docs/history/decisions-2026.md "the 100k fleet").
 * @param backoffMs the current backoff, ms (1 s doubling to 30 s)
 * @param random a number in [0, 1), `Math.random` by default
 * @returns a wait in [backoffMs / 2, backoffMs)
 */
export function reconnectDelay(backoffMs: number, random: () => number = Math.random): number {
  return Math.round(backoffMs / 2 + (random() * backoffMs) / 2);
}

/**
 * The agent's MQTT session for one profile (spec §6): connects at once, reconnects with backoff
 * (1 s doubling to 30 s, each wait jittered by {@link reconnectDelay}, reset on a successful connect), takes a fresh `session_id` and
 * subscribes to the four downstream topics on every connect (a clean session). Envelopes carry
 * the profile's ids, a `boot_id` fixed per process and the current `session_id` (spec §6.2).
 */
export class AgentLink {
  readonly client: MqttClient;
  readonly configId: string;
  readonly nodeId: string;
  readonly #bootId = randomUUID();
  #sessionId = "";
  readonly #log: (line: Record<string, unknown>) => void;

  constructor(profile: AgentProfile, log: (line: Record<string, unknown>) => void) {
    this.configId = profile.profile.config_id;
    this.nodeId = profile.profile.node_id;
    this.#log = log;
    this.client = mqtt.connect(brokerUrl(profile.mqtt), connectOptions(profile));
    this.#wire();
  }

  #wire(): void {
    const client = this.client;
    let backoff: number = RECONNECT_BACKOFF_MS.first;
    client.on("close", () => {
      client.options.reconnectPeriod = reconnectDelay(backoff);
      backoff = Math.min(backoff * 2, RECONNECT_BACKOFF_MS.max);
    });
    client.on("error", (err) => this.#log({ level: "warn", msg: "mqtt error", err: err.message }));
    client.on("connect", () => {
      backoff = RECONNECT_BACKOFF_MS.first;
      this.#sessionId = randomUUID();
      const topics = (["config_push", "control", "detect", "info"] as const).map((k) => nodeTopic(this.configId, this.nodeId, k));
      client.subscribe(topics, { qos: 1 }, (err) => {
        if (err) this.#log({ level: "error", msg: "subscribe failed", err: err.message });
      });
      this.#log({ level: "info", msg: "connected", session_id: this.#sessionId });
    });
  }

  /** Runs `fn` after every connect, once the session is set up. */
  onConnect(fn: () => void): void {
    this.client.on("connect", fn);
  }

  /** An envelope of this agent (spec §6.2), sent now. */
  envelope(type: string, payload: Record<string, unknown>, requestId = ""): Envelope {
    return {
      type,
      request_id: requestId,
      config_id: this.configId,
      node_id: this.nodeId,
      boot_id: this.#bootId,
      session_id: this.#sessionId,
      sent_at: new Date().toISOString(),
      payload,
    };
  }

  /** Publishes at QoS 1, never retained (spec §6.4 rule 5). @throws what MQTT.js rejects with */
  async publish(kind: UpstreamKind, env: Envelope): Promise<void> {
    await this.client.publishAsync(nodeTopic(this.configId, this.nodeId, kind), JSON.stringify(env), { qos: 1, retain: false });
  }

  /** {@link publish}, a failure logged instead of thrown. */
  safePublish(kind: UpstreamKind, env: Envelope): Promise<void> {
    return this.publish(kind, env).catch((err: unknown) => this.#log({ level: "warn", msg: "publish failed", kind, err: String(err) }));
  }
}
