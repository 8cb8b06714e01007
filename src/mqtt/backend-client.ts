import { randomBytes } from "node:crypto";
import mqtt, { type MqttClient } from "mqtt";
import type { Logger } from "../logger.js";
import type { Envelope } from "../protocol/envelope.schema.js";
import { backendSubscriptions } from "../protocol/topics.js";

export interface BackendClientOptions {
  /** e.g. mqtt://127.0.0.1:1883 */
  url: string;
  username: string;
  password: string;
  log: Logger;
  /** Every upstream message. Must not throw. */
  onMessage(topic: string, payload: Buffer): void;
}

/**
 * The backend's MQTT client (spec §6.4 rule 10): MQTT 3.1.1 (aedes speaks nothing else),
 * subscribed to every upstream topic at QoS 1, resubscribing itself when the broker lost the
 * session, reconnecting with backoff.
 */
export class BackendMqttClient {
  readonly #client: MqttClient;
  readonly #log: Logger;
  #connected = false;

  private constructor(client: MqttClient, log: Logger) {
    this.#client = client;
    this.#log = log;
  }

  /** Connects and subscribes. @throws Error when the first connection or subscription fails */
  static async connect(opts: BackendClientOptions): Promise<BackendMqttClient> {
    const client = mqtt.connect(opts.url, {
      protocolVersion: 4,
      clientId: `svc-backend-${randomBytes(6).toString("hex")}`,
      username: opts.username,
      password: opts.password,
      clean: true,
      reconnectPeriod: 1000,
      connectTimeout: 10_000,
      resubscribe: false,
    });
    const self = new BackendMqttClient(client, opts.log);
    client.on("message", (topic, payload) => {
      try {
        opts.onMessage(topic, payload);
      } catch (err) {
        opts.log.error({ err, topic }, "upstream message handler failed");
      }
    });
    client.on("connect", () => {
      self.#connected = true;
      client.subscribe(backendSubscriptions(), { qos: 1 }, (err, granted) => {
        const refused = (granted ?? []).filter((g) => g.qos === 128);
        if (err || refused.length > 0) opts.log.error({ err, refused }, "backend subscription refused");
      });
    });
    client.on("close", () => {
      if (self.#connected) opts.log.warn("backend MQTT connection closed; reconnecting");
      self.#connected = false;
    });
    client.on("error", (err) => opts.log.error({ err: err.message }, "backend MQTT error"));
    await new Promise<void>((resolve, reject) => {
      const onConnect = () => {
        client.off("error", onError);
        client.subscribe(backendSubscriptions(), { qos: 1 }, (err) => (err ? reject(err) : resolve()));
      };
      const onError = (err: Error) => {
        client.off("connect", onConnect);
        reject(err);
      };
      client.once("connect", onConnect);
      client.once("error", onError);
    });
    return self;
  }

  get connected(): boolean {
    return this.#connected;
  }

  /** Publishes one envelope at QoS 1, never retained (spec §6.4 rule 5). Resolves on PUBACK. */
  publish(topic: string, envelope: Envelope): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#client.publish(topic, JSON.stringify(envelope), { qos: 1, retain: false }, (err) => (err ? reject(err) : resolve()));
    });
  }

  async close(): Promise<void> {
    await this.#client.endAsync(true);
    this.#log.debug("backend MQTT client closed");
  }
}
