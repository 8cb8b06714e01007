import mqtt, { type IClientOptions, type MqttClient } from "mqtt";
import type { Logger } from "../logger.js";
import type { Envelope } from "../protocol/envelope.schema.js";
import { backendSubscriptions } from "../protocol/topics.js";
import { rearmMqttReconnect } from "./lib-internals.js";

export interface BackendClientOptions {
  /** e.g. mqtt://127.0.0.1:1883; `mqtts://` connects with TLS (spec §1.9). */
  url: string;
  username: string;
  /** Never logged. */
  password: string;
  /** PEM CA(s) trusted for an `mqtts://` URL; undefined: the system's trust store. */
  ca?: string | Buffer | string[] | Buffer[];
  log: Logger;
  /** Every upstream message. Must not throw. */
  onMessage(topic: string, payload: Buffer): void;
  /**
   * After every (re)connection whose subscriptions were all granted (SUBACK): from then on
   * {@link BackendMqttClient.connected} is true (broker-sync reconciles then). Must not throw.
   */
  onConnect?(): void;
  /**
   * The broker refused the connection (CONNACK return code, e.g. 4 bad credentials, 5 not
   * authorized) or one of the subscriptions: the backend user may be missing or stale at an
   * external broker, so broker-sync reconciles. Must not throw.
   */
  onRefused?(reason: string): void;
  /** A connection that was up closed (the system status changes). Must not throw. */
  onDisconnect?(): void;
  /** First reconnect period, ms; doubled per failed attempt up to {@link reconnectMaxMs}. Default 1000. */
  reconnectMinMs?: number;
  /** Cap of the reconnect period, ms. Default 30 000. */
  reconnectMaxMs?: number;
  /** A connection attempt without CONNACK in this time is abandoned, ms. Default 10 000. */
  connectTimeoutMs?: number;
}

/**
 * The backend's MQTT client (spec §6.4 rule 10): MQTT 3.1.1 (aedes speaks nothing else),
 * subscribed to every upstream topic at QoS 1, reconnecting forever with a period that doubles per failure up to a cap and resets
 * on success — also after a refused CONNACK, since an external broker may not hold the backend
 * user yet (spec §1.7 last bullet, §1.8: the backend starts and serves without the broker).
 *
 * Its session is persistent: a fixed client id ({@link backendClientId}) and `clean: false`, so
 * a broker that keeps sessions (Mosquitto with `persistence true`, EMQX durable sessions) holds
 * the backend's subscriptions across the backend's reconnects and its own restarts, and queues
 * what agents publish meanwhile (their `mqtt_connected` events above all) for delivery at the
 * backend's next CONNACK: no upstream message falls into the window before the backend has
 * subscribed again. It still subscribes at every connection (a broker that lost the session, or
 * a session the broker restored from before a subscription changed). "Connected" means
 * subscribed: {@link connected} turns true at the SUBACK granting every filter, not at CONNACK.
 */
export class BackendMqttClient {
  readonly #client: MqttClient;
  readonly #log: Logger;
  readonly #minMs: number;
  #connected = false;
  #closed = false;

  private constructor(client: MqttClient, log: Logger, minMs: number) {
    this.#client = client;
    this.#log = log;
    this.#minMs = minMs;
  }

  /**
   * Starts connecting in the background and returns at once; {@link connected} tells whether the
   * broker is reachable now. Never throws for an unreachable or refusing broker.
   */
  static start(opts: BackendClientOptions): BackendMqttClient {
    const minMs = opts.reconnectMinMs ?? 1000;
    const maxMs = Math.max(opts.reconnectMaxMs ?? 30_000, minMs);
    const client = mqtt.connect(opts.url, backendConnectOptions(opts, minMs));
    const self = new BackendMqttClient(client, opts.log, minMs);
    self.#wire(opts, minMs, maxMs);
    return self;
  }

  /** The connection's events: messages to `onMessage`, subscribe on connect, backoff on close, one log line per distinct problem. */
  #wire(opts: BackendClientOptions, minMs: number, maxMs: number): void {
    const client = this.#client;
    const log = opts.log;
    let lastProblem = "";
    const problem = (msg: string, extra: Record<string, unknown> = {}) => {
      // One line per distinct problem, not one per reconnect attempt.
      if (msg === lastProblem) return;
      lastProblem = msg;
      log.warn({ url: redactUrl(opts.url), ...extra }, msg);
    };
    client.on("message", (topic, payload) => {
      try {
        opts.onMessage(topic, payload);
      } catch (err) {
        log.error({ err, topic }, "upstream message handler failed");
      }
    });
    client.on("connect", (connack) => {
      client.options.reconnectPeriod = minMs;
      lastProblem = "";
      log.info({ url: redactUrl(opts.url), session_present: connack.sessionPresent }, "backend MQTT connected; subscribing");
      this.#subscribe(opts);
    });
    client.on("close", () => {
      const wasConnected = this.#connected;
      if (wasConnected && !this.#closed) log.warn("backend MQTT connection closed; reconnecting");
      this.#connected = false;
      if (wasConnected && !this.#closed) opts.onDisconnect?.();
      // Applies to the next attempt (MQTT.js re-arms its timer from this option at every close).
      client.options.reconnectPeriod = Math.min((client.options.reconnectPeriod ?? minMs) * 2, maxMs);
    });
    client.on("error", (err: Error & { code?: unknown }) => {
      if (this.#closed) return;
      if (typeof err.code === "number") {
        problem("backend MQTT connection refused by the broker", { code: err.code, err: err.message });
        opts.onRefused?.(`CONNACK ${err.code}`);
        return;
      }
      problem("backend MQTT connection failed; retrying with backoff", { err: err.message });
    });
  }

  /**
   * Subscribes to every upstream topic (spec §5 rule 3); once all are granted the client counts
   * as connected and `onConnect` runs, otherwise `onRefused`. A SUBACK that arrives after the
   * connection it was asked on closed changes nothing.
   */
  #subscribe(opts: BackendClientOptions): void {
    const stream = this.#client.stream;
    this.#client.subscribe(backendSubscriptions(), { qos: 1 }, (err, _granted, suback) => {
      if (this.#closed || !this.#client.connected || this.#client.stream !== stream) return;
      // brokers.md: MQTT.js reports the real return codes in the SUBACK packet only.
      const codes = (suback?.granted ?? []) as number[];
      const refused = codes.filter((c) => c >= 128).length;
      if (err || refused > 0) {
        opts.log.error({ err: err?.message, refused }, "backend subscription refused");
        opts.onRefused?.("subscription refused");
        return;
      }
      this.#connected = true;
      opts.onConnect?.();
    });
  }

  /**
   * True while connected to the broker with every upstream subscription granted (spec §1.8: the
   * system status reports it): from the SUBACK, not the CONNACK.
   */
  get connected(): boolean {
    return this.#connected;
  }

  /**
   * Shortens the wait before the next attempt to the minimum period (broker-sync just created
   * the backend user, so the grown backoff no longer helps). Only between attempts: an attempt
   * in flight is left alone.
   */
  reconnectNow(): void {
    if (this.#closed || this.#connected) return;
    rearmMqttReconnect(this.#client, this.#minMs);
  }

  /**
   * Publishes one envelope at QoS 1, never retained (spec §6.4 rule 5). Resolves on PUBACK.
   * @throws Error at once while disconnected (nothing is queued: the command then ends failed)
   */
  publish(topic: string, envelope: Envelope): Promise<void> {
    if (!this.#connected) return Promise.reject(new Error("the backend is not connected to the broker"));
    return new Promise((resolve, reject) => {
      this.#client.publish(topic, JSON.stringify(envelope), { qos: 1, retain: false }, (err) => (err ? reject(err) : resolve()));
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#client.endAsync(true);
    this.#connected = false;
    this.#log.debug("backend MQTT client closed");
  }
}

/**
 * The backend's client id: fixed per backend user, so that its broker session is found again
 * after a reconnect or a restart. Contains `:`, which no node's client id does (authz.policy.ts
 * `nodeClientId`), so it never takes over an agent's session.
 */
export function backendClientId(username: string): string {
  return `svc:backend:${username}`;
}

/** MQTT.js options of the backend's connection: MQTT 3.1.1, a persistent session under a fixed client id. */
function backendConnectOptions(opts: BackendClientOptions, minMs: number): IClientOptions {
  return {
    protocolVersion: 4,
    clientId: backendClientId(opts.username),
    username: opts.username,
    password: opts.password,
    clean: false,
    reconnectPeriod: minMs,
    connectTimeout: opts.connectTimeoutMs ?? 10_000,
    resubscribe: false,
    // An external broker may not hold the backend user yet: keep trying while broker-sync creates it.
    reconnectOnConnackError: true,
    ...(opts.ca === undefined ? {} : { ca: opts.ca }),
  };
}

/** The URL without user info, for logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    return u.toString();
  } catch {
    return "(unparsable URL)";
  }
}
