import type { Worker } from "node:worker_threads";
import { moduleExtension, startWorker } from "../lib/worker.js";
import { TurnSlicer, type SliceJob } from "../lib/turn-slicer.js";
import type { Logger } from "../logger.js";
import type { Envelope } from "../protocol/envelope.schema.js";
import type { BackendLink, EmbeddedBrokerHandle, EmbeddedBrokerOptions } from "./embedded-broker.js";

/**
 * The embedded broker in a worker thread (issue 14 item 7; docs/decisions.md "Issue 14 item 7:
 * the embedded broker in a worker thread"). The worker (`broker-thread.worker.ts`) runs the same
 * {@link EmbeddedBroker}: sockets, MQTT parsing, PUBACKs, authentication against the store (a
 * read-only connection of its own, so rotated or deleted credentials stop working at once, DESIGN
 * §3 Broker identity) and the authorization policy. The main thread keeps routing and committing.
 *
 * - Upstream messages reach `onMessage` in the order the broker delivered them. They come once
 *   per worker turn in one transferred buffer (no copy per message), and are handed on in slices
 *   of at most about {@link ThreadedBrokerOptions.sliceMs} of a main-thread turn (a
 *   {@link TurnSlicer}): a burst never holds the group commit's timer or socket writes for long.
 *   Every other message from the worker goes through the same queue, so none overtakes an
 *   upstream message sent before it.
 * - Downstream publishes resolve when the broker has queued them (as in-process).
 * - {@link isConnected} and {@link kick}'s answer come from a mirror of the broker's registered
 *   clients, updated by messages from the worker: it lags the broker by one message hop.
 * - The worker's log records are re-logged through the given logger at their own level.
 */

/**
 * What the worker is started with (structured-cloned within the process): with TLS on it holds
 * the listener's private key, as the in-process broker's options do; never logged.
 */
export interface BrokerThreadInit {
  broker: Omit<EmbeddedBrokerOptions, "users" | "log">;
  /** The service's SQLite file (never ":memory:"). */
  dbFile: string;
  backendUsername: string;
  /** SHA-256 hex of the backend's broker password. */
  backendPasswordHash: string;
  /** The pino level of the service's logger. */
  logLevel: string;
}

/** Main → worker. */
export type ToBrokerThread =
  | { t: "attach"; link: number; filters: string[] }
  | { t: "detach"; link: number }
  | { t: "publish"; id: number; link: number; topic: string; envelope: Envelope }
  | { t: "kick"; clientId: string }
  | { t: "close" };

/** Worker → main. */
export type FromBrokerThread =
  | { t: "ready"; port: number; tlsPort: number | null }
  | { t: "failed"; message: string }
  | { t: "attached"; link: number }
  | { t: "published"; id: number; error?: string }
  | { t: "client"; clientId: string; up: boolean }
  /** For backend link `link`: payloads back to back in `packed`, `lengths[i]` bytes each, for `topics[i]`. */
  | { t: "upstream"; link: number; topics: string[]; lengths: number[]; packed: ArrayBuffer }
  | { t: "log"; line: string }
  | { t: "closed" };

export interface ThreadedBrokerOptions extends Omit<EmbeddedBrokerOptions, "users"> {
  dbFile: string;
  backendUsername: string;
  backendPasswordHash: string;
  /** Longest slice of a main-thread turn spent handing on upstream messages, ms (default 5). */
  sliceMs?: number;
}

const LOG_FIELDS_DROPPED = new Set(["level", "time", "msg", "pid", "hostname", "service"]);

export class ThreadedBroker implements EmbeddedBrokerHandle {
  readonly port: number;
  readonly tlsPort: number | null;
  readonly #worker: Worker;
  readonly #log: Logger;
  /** Registered client ids, as the worker last reported. */
  readonly #clients = new Set<string>();
  readonly #published = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  #nextId = 1;
  /** Open backend links: where their upstream messages go. */
  readonly #links = new Map<number, (topic: string, payload: Buffer) => void>();
  readonly #attaching = new Map<number, () => void>();
  #closed: (() => void) | undefined;
  #closing: Promise<void> | undefined;
  #exited = false;
  /** Every message from the worker, in order, handed on in slices of a turn. */
  readonly #inbox: TurnSlicer;

  private constructor(worker: Worker, log: Logger, ready: { port: number; tlsPort: number | null }, sliceMs: number | undefined) {
    this.#worker = worker;
    this.#log = log;
    this.port = ready.port;
    this.tlsPort = ready.tlsPort;
    this.#inbox = new TurnSlicer({ ...(sliceMs === undefined ? {} : { sliceMs }), onError: (err) => log.error({ err }, "broker thread message handling failed") });
    worker.on("message", (m: FromBrokerThread) => this.#inbox.push(this.#job(m)));
  }

  /**
   * Starts the worker and waits until its broker listens.
   * @throws Error with the worker's reason when the broker cannot start (e.g. the port is taken)
   */
  static async start(opts: ThreadedBrokerOptions): Promise<ThreadedBroker> {
    const { log, dbFile, backendUsername, backendPasswordHash, sliceMs, ...broker } = opts;
    const init: BrokerThreadInit = { broker, dbFile, backendUsername, backendPasswordHash, logLevel: log.level };
    const worker = startWorker(new URL(`./broker-thread.worker${moduleExtension(import.meta.url)}`, import.meta.url), { workerData: init });
    const early: FromBrokerThread[] = [];
    const listening = new Promise<{ port: number; tlsPort: number | null }>((resolve, reject) => {
      const onMessage = (m: FromBrokerThread) => {
        if (m.t === "ready") resolve(m);
        else if (m.t === "failed") reject(new Error(m.message));
        else early.push(m);
      };
      worker.on("message", onMessage);
      worker.once("error", reject);
      worker.once("exit", (code) => reject(new Error(`the broker thread exited (${code}) before listening`)));
    }).finally(() => {
      worker.removeAllListeners("message");
      worker.removeAllListeners("error");
      worker.removeAllListeners("exit");
    });
    let ready: { port: number; tlsPort: number | null };
    try {
      ready = await listening;
    } catch (err) {
      await worker.terminate();
      throw err;
    }
    const threaded = new ThreadedBroker(worker, log, ready, sliceMs);
    for (const m of early) threaded.#inbox.push(threaded.#job(m));
    worker.on("error", (err) => log.error({ err }, "embedded broker thread failed"));
    worker.on("exit", (code) => threaded.#onExit(code));
    return threaded;
  }

  kick(clientId: string): boolean {
    if (this.#exited) return false;
    this.#worker.postMessage({ t: "kick", clientId } satisfies ToBrokerThread);
    return this.#clients.has(clientId);
  }

  isConnected(clientId: string): boolean {
    return this.#clients.has(clientId);
  }

  /** A backend link: the service has one; a test may open another beside it. */
  async attachBackend(filters: readonly string[], onMessage: (topic: string, payload: Buffer) => void): Promise<BackendLink> {
    if (this.#exited || this.#closing !== undefined) throw new Error("the embedded broker is closed");
    const link = this.#nextId++;
    this.#links.set(link, onMessage);
    await new Promise<void>((resolve) => {
      this.#attaching.set(link, resolve);
      this.#worker.postMessage({ t: "attach", link, filters: [...filters] } satisfies ToBrokerThread);
    });
    const broker = this;
    return {
      get connected() {
        return broker.#links.has(link) && !broker.#exited && broker.#closing === undefined;
      },
      publish: (topic, envelope) => (this.#links.has(link) ? this.#publish(link, topic, envelope) : Promise.reject(new Error("the backend link is closed"))),
      // Ends delivery to `onMessage`; the broker itself stops with close().
      close: async () => {
        if (!this.#links.delete(link) || this.#exited) return;
        this.#worker.postMessage({ t: "detach", link } satisfies ToBrokerThread);
      },
    };
  }

  close(): Promise<void> {
    this.#closing ??= new Promise<void>((resolve) => {
      if (this.#exited) {
        resolve();
        return;
      }
      this.#closed = resolve;
      this.#worker.postMessage({ t: "close" } satisfies ToBrokerThread);
    }).then(async () => {
      await this.#worker.terminate();
      this.#log.info("embedded mqtt broker thread closed");
    });
    return this.#closing;
  }

  #publish(link: number, topic: string, envelope: Envelope): Promise<void> {
    if (this.#exited || this.#closing !== undefined) return Promise.reject(new Error("the embedded broker is closed"));
    const id = this.#nextId++;
    return new Promise<void>((resolve, reject) => {
      this.#published.set(id, { resolve, reject });
      this.#worker.postMessage({ t: "publish", id, link, topic, envelope } satisfies ToBrokerThread);
    });
  }

  /** The inbox's job for one message from the worker: one step per upstream message, else one step. */
  #job(m: FromBrokerThread): SliceJob {
    if (m.t !== "upstream") {
      return {
        step: () => {
          this.#receive(m);
          return true;
        },
      };
    }
    const { topics, lengths, packed } = m;
    let i = 0;
    let at = 0;
    return {
      step: () => {
        // Looked up per message: a link closed meanwhile gets nothing more.
        const onMessage = this.#links.get(m.link);
        const topic = topics[i];
        const length = lengths[i] ?? 0;
        i++;
        if (onMessage !== undefined && topic !== undefined) {
          try {
            onMessage(topic, Buffer.from(packed, at, length));
          } catch (err) {
            this.#log.error({ err, topic: topic.slice(0, 300) }, "upstream message handler failed");
          }
        }
        at += length;
        return i >= topics.length;
      },
    };
  }

  #receive(m: FromBrokerThread): void {
    switch (m.t) {
      case "upstream":
        // Handed on by #job, one message per step.
        return;
      case "published": {
        const waiter = this.#published.get(m.id);
        this.#published.delete(m.id);
        if (m.error === undefined) waiter?.resolve();
        else waiter?.reject(new Error(m.error));
        return;
      }
      case "client":
        if (m.up) this.#clients.add(m.clientId);
        else this.#clients.delete(m.clientId);
        return;
      case "log":
        this.#relog(m.line);
        return;
      case "attached":
        this.#attaching.get(m.link)?.();
        this.#attaching.delete(m.link);
        return;
      case "closed":
        this.#closed?.();
        return;
      case "ready":
      case "failed":
        return;
    }
  }

  /** A worker log line, logged again here at its level (its own time and base fields dropped). */
  #relog(line: string): void {
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const label = this.#log.levels.labels[Number(record["level"])] ?? "info";
    const fields: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(record)) if (!LOG_FIELDS_DROPPED.has(k)) fields[k] = v;
    const msg = typeof record["msg"] === "string" ? record["msg"] : "";
    const write = (this.#log as unknown as Record<string, (obj: object, msg: string) => void>)[label];
    write?.call(this.#log, fields, msg);
  }

  #onExit(code: number): void {
    this.#exited = true;
    this.#clients.clear();
    for (const waiter of this.#published.values()) waiter.reject(new Error("the embedded broker is closed"));
    this.#published.clear();
    for (const attached of this.#attaching.values()) attached();
    this.#attaching.clear();
    this.#closed?.();
    if (this.#closing === undefined) this.#log.error({ code }, "embedded broker thread exited");
  }
}
