import { randomBytes } from "node:crypto";
import mqtt, { type IClientOptions, type MqttClient } from "mqtt";
import { z } from "zod";
import type { Logger } from "../logger.js";
import { redactUrl } from "./backend-client.js";
import { BrokerUnavailableError } from "./broker-admin.js";
import { responseSchema, type DynsecCommand, type DynsecResponse } from "./mosquitto-dynsec.js";

/**
 * The Mosquitto adapter's control channel: its own MQTT connection as the dynamic-security
 * admin (reconnecting with doubling backoff), over which commands go to `$CONTROL` in batches
 * and come back on the response topic, matched by `correlationData`. A command sent while
 * disconnected, a batch unanswered within the timeout, or a connection that closes with answers
 * pending rejects with {@link BrokerUnavailableError}; the broker sync retries.
 */

export const CONTROL_TOPIC = "$CONTROL/dynamic-security/v1";
export const RESPONSE_TOPIC = `${CONTROL_TOPIC}/response`;

const responsesSchema = z.object({ responses: z.array(responseSchema) });

/** The admin connection (the Mosquitto adapter's options, less what it plans with). */
export interface DynsecControlOptions {
  /** The broker, e.g. mqtt://mosquitto:1883 (`mqtts://` = TLS). */
  url: string;
  /** The dynamic-security admin (not the backend user). */
  username: string;
  /** Never logged. */
  password: string;
  ca?: string | Buffer | string[] | Buffer[];
  log: Logger;
  /** An unanswered batch of commands fails after this long, ms. Default 10 000. */
  requestTimeoutMs?: number;
  /** Commands per `$CONTROL` message. Default 200. */
  batchSize?: number;
  /** Reconnect backoff of the admin connection, ms (doubling from min to max). */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  /** The admin connection is (re)established and subscribed: the broker may have restarted, reconcile. */
  onConnect?(): void;
}

export class DynsecControl {
  readonly #client: MqttClient;
  readonly #log: Logger;
  readonly #timeoutMs: number;
  readonly #batchSize: number;
  readonly #prefix = randomBytes(4).toString("hex");
  #seq = 0;
  #ready = false;
  #closed = false;
  readonly #pending = new Map<string, { resolve: (r: DynsecResponse) => void; reject: (e: Error) => void }>();

  private constructor(client: MqttClient, opts: DynsecControlOptions) {
    this.#client = client;
    this.#log = opts.log;
    this.#timeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.#batchSize = opts.batchSize ?? 200;
  }

  /** Starts connecting in the background; never waits for the broker. */
  static start(opts: DynsecControlOptions): DynsecControl {
    const minMs = opts.reconnectMinMs ?? 1000;
    const maxMs = Math.max(opts.reconnectMaxMs ?? 30_000, minMs);
    const options: IClientOptions = {
      protocolVersion: 4,
      clientId: `svc-dynsec-admin-${randomBytes(6).toString("hex")}`,
      username: opts.username,
      password: opts.password,
      clean: true,
      reconnectPeriod: minMs,
      connectTimeout: 10_000,
      reconnectOnConnackError: true,
      resubscribe: false,
      ...(opts.ca === undefined ? {} : { ca: opts.ca }),
    };
    const client = mqtt.connect(opts.url, options);
    const self = new DynsecControl(client, opts);
    let lastProblem = "";
    client.on("connect", () => {
      client.options.reconnectPeriod = minMs;
      lastProblem = "";
      client.subscribe(RESPONSE_TOPIC, { qos: 1 }, (err, _g, suback) => {
        const refused = ((suback?.granted ?? []) as number[]).some((c) => c >= 128);
        if (err || refused) {
          opts.log.error({ err: err?.message }, "mosquitto admin: subscription to the dynamic-security responses refused");
          return;
        }
        self.#ready = true;
        opts.log.info({ url: redactUrl(opts.url) }, "mosquitto admin connected");
        opts.onConnect?.();
      });
    });
    client.on("close", () => {
      self.#ready = false;
      self.#failPending("the admin connection to mosquitto closed");
      client.options.reconnectPeriod = Math.min((client.options.reconnectPeriod ?? minMs) * 2, maxMs);
    });
    client.on("error", (err: Error & { code?: unknown }) => {
      if (self.#closed || err.message === lastProblem) return;
      lastProblem = err.message;
      opts.log.warn({ url: redactUrl(opts.url), err: err.message, code: err.code }, "mosquitto admin connection failed; retrying with backoff");
    });
    client.on("message", (topic, payload) => {
      if (topic === RESPONSE_TOPIC) self.#onResponse(payload);
    });
    return self;
  }

  /** Whether the admin connection is up and subscribed to the responses. */
  get connected(): boolean {
    return this.#ready;
  }

  /**
   * Sends commands in batches, one batch at a time, and answers their responses in order.
   * @throws BrokerUnavailableError when not connected, unanswered in time, or the connection closes
   */
  async run(commands: DynsecCommand[]): Promise<DynsecResponse[]> {
    const out: DynsecResponse[] = [];
    for (let i = 0; i < commands.length; i += this.#batchSize) {
      out.push(...(await this.#batch(commands.slice(i, i + this.#batchSize))));
    }
    return out;
  }

  /** Fails what is pending and ends the connection. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#ready = false;
    this.#failPending("the mosquitto admin is closing");
    await this.#client.endAsync(true);
  }

  #batch(commands: DynsecCommand[]): Promise<DynsecResponse[]> {
    if (!this.#ready) return Promise.reject(new BrokerUnavailableError("not connected to mosquitto"));
    const ids = commands.map(() => `${this.#prefix}-${++this.#seq}`);
    const answers = ids.map(
      (id) => new Promise<DynsecResponse>((resolve, reject) => this.#pending.set(id, { resolve, reject })),
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new BrokerUnavailableError(`mosquitto did not answer within ${this.#timeoutMs} ms`)), this.#timeoutMs);
    });
    const payload = JSON.stringify({ commands: commands.map((c, i) => ({ ...c, correlationData: ids[i] })) });
    this.#client.publish(CONTROL_TOPIC, payload, { qos: 1 }, (err) => {
      if (err) for (const id of ids) this.#pending.get(id)?.reject(new BrokerUnavailableError("publish to $CONTROL failed", { cause: err }));
    });
    return Promise.race([Promise.all(answers), timeout]).finally(() => {
      clearTimeout(timer);
      for (const id of ids) this.#pending.delete(id);
    });
  }

  #onResponse(payload: Buffer): void {
    let parsed;
    try {
      parsed = responsesSchema.safeParse(JSON.parse(payload.toString("utf8")));
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      this.#log.warn("mosquitto admin: unparsable dynamic-security response ignored");
      return;
    }
    for (const r of parsed.data.responses) {
      if (r.correlationData === undefined) continue;
      const p = this.#pending.get(r.correlationData);
      if (p === undefined) continue; // another admin's, or one that timed out
      this.#pending.delete(r.correlationData);
      p.resolve(r);
    }
  }

  #failPending(reason: string): void {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(new BrokerUnavailableError(reason));
  }
}
