import type { Worker } from "node:worker_threads";
import { moduleExtension, startWorker } from "../lib/worker.js";
import { TurnSlicer, type SliceJob } from "../lib/turn-slicer.js";
import type { Logger } from "../logger.js";
import type { Envelope } from "../protocol/envelope.schema.js";
import type { BackendLink, EmbeddedBrokerHandle, EmbeddedBrokerOptions } from "./embedded-broker.js";

/**
 * The embedded broker in a worker thread (docs/history/decisions-2026.md
 * "the embedded broker in a worker thread"). The worker (`broker-thread.worker.ts`) runs the same
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
 * - A worker that dies (not closed) is started again on the same ports, and every backend link
 *   is attached again before its listeners open (an agent that reconnects first and publishes at
 *   once is still heard): agents reconnect as after any broker restart. Meanwhile the links show
 *   disconnected and publishes are refused. At most {@link ThreadedBrokerOptions.maxRestarts}
 *   restarts in {@link RESTART_WINDOW_MS}; past that, or when a restart fails, the broker stays
 *   down, logged at fatal (docs/history/decisions-2026.md "The embedded broker thread is restarted when it
 *   dies").
 */

/**
 * What the worker is started with (structured-cloned within the process): with TLS on it holds
 * the listener's private key, as the in-process broker's options do; never logged.
 */
export interface BrokerThreadInit {
  broker: Omit<EmbeddedBrokerOptions, "users" | "log" | "backends">;
  /** Backend links the worker subscribes before its listeners open (the start's, or every open one at a restart). */
  links: Array<{ link: number; filters: string[] }>;
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

export interface ThreadedBrokerOptions extends Omit<EmbeddedBrokerOptions, "users" | "backends"> {
  /** Backend links subscribed before the listeners open ({@link EmbeddedBrokerOptions.backends}). */
  backends?: ReadonlyArray<{ filters: readonly string[]; onMessage: (topic: string, payload: Buffer) => void }>;
  dbFile: string;
  backendUsername: string;
  backendPasswordHash: string;
  /** Longest slice of a main-thread turn spent handing on upstream messages, ms (default 5). */
  sliceMs?: number;
  /** Restarts of a dead worker allowed within {@link RESTART_WINDOW_MS} (default 5). */
  maxRestarts?: number;
  /** The backend links went down (the worker died) or came back (it was restarted). */
  onLinksChanged?: () => void;
}

/** The window {@link ThreadedBrokerOptions.maxRestarts} counts restarts in, ms. */
export const RESTART_WINDOW_MS = 60_000;

/** A worker whose broker listens, with the messages it sent before `ready`. */
interface Booted {
  worker: Worker;
  ready: { port: number; tlsPort: number | null };
  early: FromBrokerThread[];
}

const LOG_FIELDS_DROPPED = new Set(["level", "time", "msg", "pid", "hostname", "service"]);

export class ThreadedBroker implements EmbeddedBrokerHandle {
  readonly port: number;
  readonly tlsPort: number | null;
  readonly backendLinks: readonly BackendLink[];
  #worker: Worker;
  readonly #log: Logger;
  /** What a restarted worker is started with: the first one's, on the ports it got. */
  readonly #init: BrokerThreadInit;
  readonly #maxRestarts: number;
  readonly #onLinksChanged: () => void;
  /** When each restart within the window happened (`performance.now()`, ms). */
  #restarts: number[] = [];
  /** Registered client ids, as the worker last reported. */
  readonly #clients = new Set<string>();
  readonly #published = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  #nextId = 1;
  /** Open backend links: where their upstream messages go, and their filters (for a restart). */
  readonly #links = new Map<number, { onMessage: (topic: string, payload: Buffer) => void; filters: string[] }>();
  readonly #attaching = new Map<number, () => void>();
  #closed: (() => void) | undefined;
  #closing: Promise<void> | undefined;
  #exited = false;
  /** Every message from the worker, in order, handed on in slices of a turn. */
  readonly #inbox: TurnSlicer;

  private constructor(
    booted: Booted,
    log: Logger,
    init: BrokerThreadInit,
    opts: { sliceMs: number | undefined; maxRestarts: number | undefined; onLinksChanged: (() => void) | undefined },
    early: ReadonlyArray<{ filters: readonly string[]; onMessage: (topic: string, payload: Buffer) => void }>,
  ) {
    const { worker, ready } = booted;
    this.#worker = worker;
    this.#log = log;
    this.port = ready.port;
    this.tlsPort = ready.tlsPort;
    const { tls } = init.broker;
    this.#init = { ...init, broker: { ...init.broker, port: ready.port, ...(tls === undefined || ready.tlsPort === null ? {} : { tls: { ...tls, port: ready.tlsPort } }) } };
    this.#maxRestarts = opts.maxRestarts ?? 5;
    this.#onLinksChanged = opts.onLinksChanged ?? (() => undefined);
    this.#inbox = new TurnSlicer({ ...(opts.sliceMs === undefined ? {} : { sliceMs: opts.sliceMs }), onError: (err) => log.error({ err }, "broker thread message handling failed") });
    // The worker subscribed these as links 1..n before it listened (start()).
    this.backendLinks = early.map(({ filters, onMessage }) => {
      const link = this.#nextId++;
      this.#links.set(link, { onMessage, filters: [...filters] });
      return this.#handle(link);
    });
    this.#adopt(booted);
  }

  /**
   * Starts the worker and waits until its broker listens.
   * @throws Error with the worker's reason when the broker cannot start (e.g. the port is taken)
   */
  static async start(opts: ThreadedBrokerOptions): Promise<ThreadedBroker> {
    const { log, dbFile, backendUsername, backendPasswordHash, sliceMs, maxRestarts, onLinksChanged, backends = [], ...broker } = opts;
    const init: BrokerThreadInit = { broker, links: [], dbFile, backendUsername, backendPasswordHash, logLevel: log.level };
    const links = backends.map((b, k) => ({ link: k + 1, filters: [...b.filters] }));
    return new ThreadedBroker(await boot({ ...init, links }), log, init, { sliceMs, maxRestarts, onLinksChanged }, backends);
  }

  /** Takes `booted` as the current worker: its messages (those before `ready` first) go to the inbox. */
  #adopt({ worker, early }: Booted): void {
    this.#worker = worker;
    worker.on("message", (m: FromBrokerThread) => this.#inbox.push(this.#job(m, worker)));
    for (const m of early) this.#inbox.push(this.#job(m, worker));
    worker.on("error", (err) => this.#log.error({ err }, "embedded broker thread failed"));
    worker.on("exit", (code) => this.#onExit(worker, code));
  }

  /**
   * Ends the worker as a crash would, without closing the broker (chaos tests: the supervision in
   * the class doc). Resolves when the worker has stopped.
   */
  async terminateWorker(): Promise<void> {
    await this.#worker.terminate();
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
    this.#links.set(link, { onMessage, filters: [...filters] });
    await new Promise<void>((resolve) => {
      this.#attaching.set(link, resolve);
      this.#worker.postMessage({ t: "attach", link, filters: [...filters] } satisfies ToBrokerThread);
    });
    return this.#handle(link);
  }

  /** The {@link BackendLink} of link number `link`. */
  #handle(link: number): BackendLink {
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

  /**
   * The inbox's job for one message from `source`: one step per upstream message, else one step.
   * A client report still queued when its worker died is dropped: the mirror starts empty with
   * the next worker, which never knew that client.
   */
  #job(m: FromBrokerThread, source: Worker): SliceJob {
    if (m.t !== "upstream") {
      return {
        step: () => {
          if (m.t !== "client" || (source === this.#worker && !this.#exited)) this.#receive(m);
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
        const onMessage = this.#links.get(m.link)?.onMessage;
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

  #onExit(worker: Worker, code: number): void {
    // A worker replaced meanwhile (its exit reported late) changes nothing.
    if (worker !== this.#worker) return;
    this.#exited = true;
    this.#clients.clear();
    for (const waiter of this.#published.values()) waiter.reject(new Error("the embedded broker is closed"));
    this.#published.clear();
    for (const attached of this.#attaching.values()) attached();
    this.#attaching.clear();
    this.#closed?.();
    if (this.#closing !== undefined) return;
    this.#log.error({ code }, "embedded broker thread exited");
    this.#onLinksChanged();
    void this.#restart();
  }

  /** Starts a new worker after one died (class doc, supervision); never rejects. */
  async #restart(): Promise<void> {
    const now = performance.now();
    this.#restarts = this.#restarts.filter((at) => now - at < RESTART_WINDOW_MS);
    if (this.#restarts.length >= this.#maxRestarts) {
      this.#log.fatal({ restarts: this.#restarts.length, windowMs: RESTART_WINDOW_MS }, "embedded broker thread keeps dying: the broker stays down");
      return;
    }
    this.#restarts.push(now);
    let booted: Booted;
    try {
      // Every open link is subscribed by the new worker before it listens.
      const links = [...this.#links].map(([link, { filters }]) => ({ link, filters }));
      booted = await boot({ ...this.#init, links });
    } catch (err) {
      this.#log.fatal({ err }, "embedded broker thread could not be restarted: the broker stays down");
      return;
    }
    if (this.#closing !== undefined) {
      await booted.worker.terminate();
      return;
    }
    this.#exited = false;
    this.#adopt(booted);
    this.#log.warn({ port: this.port, tlsPort: this.tlsPort }, "embedded broker thread restarted");
    this.#onLinksChanged();
  }
}

/**
 * Starts a broker worker and waits until its broker listens.
 * @throws Error with the worker's reason when the broker cannot start (the worker is ended)
 */
async function boot(init: BrokerThreadInit): Promise<Booted> {
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
  try {
    return { worker, ready: await listening, early };
  } catch (err) {
    await worker.terminate();
    throw err;
  }
}
