/**
 * The store's worker thread (src/store/store-worker.thread.ts; docs/history/decisions-2026.md "the
 * store worker"), on its own connection to the SQLite file (WAL: its reads never block the main
 * thread's writer). Two duties, both taken off the main thread's event loop, which must keep
 * serving MQTT, HTTP and SSE while a 1,000-node mesh is re-rendered:
 * - **Render jobs** for `renderDeferred` (a {@link ChunkSource}): it reads a
 *   job's inputs once and renders its steps while the main thread stores the previous step and
 *   keeps serving MQTT, HTTP and SSE. The main thread keeps every write: a rendering is stored
 *   only if its node is still at the version the worker read (src/services/rendering.service.ts), so a
 *   rendering raced by a write is never stored.
 * - **WAL checkpoints** every {@link CHECKPOINT_INTERVAL_MS}; once one copied every frame of a WAL
 *   file past {@link WAL_TRUNCATE_BYTES} (the writer is idle), it says so (`onIdleWal`): the
 *   store truncates the file between two of its transactions.
 * - **The store's counts** for the system status ({@link StoreWorker.counts}), while it runs.
 *
 * Failure handling: when the worker cannot answer a step (its thread died, or the renderer
 * threw), the job's remaining nodes are read and rendered again in this thread, which throws the
 * renderer's own `AppError` if an input is bad. A worker that dies is started again for the next
 * job, at most {@link MAX_WORKER_STARTS} times per store; after that every job renders in this
 * thread, the main thread's automatic checkpoint does all the checkpointing and the main thread
 * counts.
 */
import { stat } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import type { Worker } from "node:worker_threads";
import PQueue from "p-queue";
import { moduleExtension, startWorker } from "../lib/worker.js";
import type { Logger } from "../logger.js";
import type { Db } from "./connection.js";
import { openRenderJob, type ChunkSource, type RenderedChunk, type RenderJob } from "./render-job.js";
import type { StoreCounts } from "./summary.repository.js";

/**
 * A request to the store worker: start a job over these nodes of this config (no answer), give
 * its next step, checkpoint now, count the store (these three answered by a
 * {@link RenderResponse} of the same `id`), or drop a job (no answer).
 */
export type RenderRequest =
  | { op: "open"; job: number; configId: string; ids: readonly string[] }
  | { op: "next"; id: number; job: number; n: number }
  | { op: "close"; job: number }
  | { op: "checkpoint"; id: number }
  | { op: "counts"; id: number };

/**
 * What `PRAGMA wal_checkpoint(PASSIVE)` answered: WAL frames in the log, and of them copied into
 * the database; `truncatable` when a periodic checkpoint copied every frame of a WAL file past
 * {@link WAL_TRUNCATE_BYTES} (the writer is idle: the store may truncate it).
 */
export interface WalCheckpoint {
  busy: number;
  log: number;
  checkpointed: number;
  truncatable?: boolean;
}

/**
 * The worker's answer to the `next`, `checkpoint` or `counts` request of the same `id`, or (no
 * `id`) the report of a periodic checkpoint that copied frames.
 */
export type RenderResponse =
  | { id: number; ok: true; step: RenderedChunk | null }
  | { id: number; ok: true; checkpoint: WalCheckpoint }
  | { id: number; ok: true; counts: StoreCounts }
  | { id: number; ok: false; message: string }
  | { id: null; checkpoint: WalCheckpoint };

/** What a request is answered with: a render step, a checkpoint or the store's counts. */
type Answer = RenderedChunk | null | WalCheckpoint | StoreCounts;

/**
 * How often the worker checkpoints the WAL (ms): a commit on the main thread then never needs to
 * copy WAL into the database inside an event-loop turn (hundreds of ms at 1,000–5,000 nodes,
 * during which no message, request or SSE frame is served). The main thread's automatic checkpoint stays as the backstop for a worker
 * that is gone or behind: `WAL_AUTOCHECKPOINT_PAGES_WITH_WORKER` pages while a worker runs,
 * `WAL_AUTOCHECKPOINT_PAGES` otherwise (src/store/db.ts). With `synchronous = NORMAL` the WAL
 * is synced at checkpoints, so this also bounds what a power cut can lose to about a second of
 * commits.
 */
export const CHECKPOINT_INTERVAL_MS = 1000;

/**
 * Steps the worker renders ahead of the one the main thread stores: it keeps rendering while the
 * main thread is busy with pushes and heartbeats. A step of a 1,000-node full mesh is ~1.6 MB of
 * text (16 nodes), so this bounds the renderings waiting in memory to ~6.4 MB.
 */
export const RENDER_STEPS_AHEAD = 4;

/**
 * WAL size (bytes) at which the worker starts by itself ({@link StoreWorker.startWhenWalGrows}):
 * 16 MiB, 4,096 pages, a twelfth of the main thread's automatic checkpoint.
 */
export const WAL_START_BYTES = 16 * 1024 * 1024;

/**
 * WAL file size (bytes) above which a periodic checkpoint that copied every frame (the writer is
 * idle) reports the WAL `truncatable` (`opts.onIdleWal`; the store then truncates it on its own
 * connection, src/store/db.ts). The store passes its `journal_size_limit`: below it SQLite's
 * own restart keeps the file bounded.
 */
export const WAL_TRUNCATE_BYTES = 64 * 1024 * 1024;

/** Worker threads a store starts in its life before it renders in the main thread only. */
export const MAX_WORKER_STARTS = 3;

/** Step of the main-thread fallback (ms), as `renderDeferred`'s default. */
const FALLBACK_STEP_MS = 10;

/**
 * Renders jobs on a worker thread, up to {@link RENDER_STEPS_AHEAD} steps ahead of the one the
 * main thread stores.
 * `file` is the store's SQLite file (not ":memory:": a worker cannot share an in-memory database).
 */
export class StoreWorker implements ChunkSource {
  readonly ahead = RENDER_STEPS_AHEAD;
  readonly #file: string;
  readonly #db: Db;
  readonly #log: Logger;
  readonly #checkpointIntervalMs: number;
  readonly #onCheckpoint: ((c: WalCheckpoint) => void) | undefined;
  readonly #onRunning: ((running: boolean) => void) | undefined;
  readonly #onIdleWal: (() => void) | undefined;
  readonly #pending = new Map<number, { resolve: (answer: Answer) => void; reject: (e: Error) => void }>();
  readonly #walStartBytes: number;
  readonly #walTruncateBytes: number;
  #walWatch: NodeJS.Timeout | null = null;
  /** {@link startWhenWalGrows} was asked for: watched again when a worker exits. */
  #watchWal = false;
  #worker: Worker | null = null;
  #starts = 0;
  #answered = 0;
  #nextId = 1;
  #closed = false;

  /**
   * @param file the store's SQLite file
   * @param db the store's own connection: the fallback renders on it
   * @param opts.checkpointIntervalMs how often the worker checkpoints (default {@link CHECKPOINT_INTERVAL_MS})
   * @param opts.onCheckpoint called with each periodic checkpoint that copied frames (tests, metrics)
   * @param opts.walStartBytes WAL size at which {@link startWhenWalGrows} starts the worker
   *   (default {@link WAL_START_BYTES})
   * @param opts.onRunning called with true when a worker thread starts (it checkpoints from then
   *   on) and with false when it exits
   * @param opts.walTruncateBytes WAL size above which an idle WAL, copied entirely, is reported
   *   to `onIdleWal` (default {@link WAL_TRUNCATE_BYTES})
   * @param opts.onIdleWal called when a periodic checkpoint copied every frame of a WAL file past
   *   `walTruncateBytes`
   */
  constructor(
    file: string,
    db: Db,
    log: Logger,
    opts: { checkpointIntervalMs?: number; onCheckpoint?: (c: WalCheckpoint) => void; walStartBytes?: number; walTruncateBytes?: number; onRunning?: (running: boolean) => void; onIdleWal?: () => void } = {},
  ) {
    this.#file = file;
    this.#db = db;
    this.#log = log;
    this.#checkpointIntervalMs = opts.checkpointIntervalMs ?? CHECKPOINT_INTERVAL_MS;
    this.#onCheckpoint = opts.onCheckpoint;
    this.#onRunning = opts.onRunning;
    this.#onIdleWal = opts.onIdleWal;
    this.#walStartBytes = opts.walStartBytes ?? WAL_START_BYTES;
    this.#walTruncateBytes = opts.walTruncateBytes ?? WAL_TRUNCATE_BYTES;
  }

  /** Worker threads started so far (tests). */
  get starts(): number {
    return this.#starts;
  }

  /** Steps the worker answered with renderings (tests, benchmarks). */
  get answered(): number {
    return this.#answered;
  }

  /** Starts the worker thread now if it is not running. */
  start(): void {
    this.#running();
  }

  /**
   * Starts the worker thread once the WAL file reaches `walStartBytes` (checked every
   * `checkpointIntervalMs`, off the event loop: an asynchronous `stat`), or with the first render
   * job, whichever comes first; again after a worker exits. A small deployment never pays for the
   * thread (~0.3–1 s of CPU to load); until it runs, commits checkpoint as before.
   */
  startWhenWalGrows(): void {
    this.#watchWal = true;
    if (this.#walWatch !== null || this.#worker !== null || this.#closed) return;
    this.#walWatch = setInterval(() => {
      stat(`${this.#file}-wal`).then(
        (st) => {
          if (st.size >= this.#walStartBytes) this.#running();
        },
        () => undefined, // no WAL file yet
      );
    }, this.#checkpointIntervalMs);
    this.#walWatch.unref();
  }

  /**
   * A job whose steps the worker renders. When the worker cannot answer a step (its thread
   * died, or the renderer threw), the nodes it has not given yet are rendered by a job in this
   * thread from then on, which throws the renderer's own `AppError` if an input is bad.
   */
  open(configId: string, ids: readonly string[]): RenderJob {
    const worker = this.#running();
    const inThread = (rest: readonly string[]) => openRenderJob(this.#db, configId, rest, { start: performance.now(), stepMs: FALLBACK_STEP_MS });
    if (worker === null) return inThread(ids);
    const job = this.#nextId++;
    worker.postMessage({ op: "open", job, configId, ids } satisfies RenderRequest);
    const given = new Set<string>();
    let fallback: RenderJob | null = null;
    // Steps are asked of the worker at once (it renders them in order, up to `ahead` beyond the
    // one this thread stores) and handed out one at a time, in the order asked: once one fails,
    // the nodes not given yet go to a job in this thread and later answers are dropped.
    const steps = new PQueue({ concurrency: 1 });
    const step = async (n: number, asked: Promise<RenderedChunk | null> | null): Promise<RenderedChunk | null> => {
      if (fallback === null && asked !== null) {
        try {
          const answer = await asked;
          for (const s of [...(answer?.stored ?? []), ...(answer?.rendered ?? [])]) given.add(s.nodeId);
          return answer;
        } catch (err) {
          this.#log.warn({ err, configId }, "the store worker did not render a step; rendering the rest in the main thread");
          fallback = inThread(ids.filter((id) => !given.has(id)));
        }
      }
      fallback ??= inThread(ids.filter((id) => !given.has(id)));
      return fallback.next(n);
    };
    return {
      next: (n) => {
        const asked = fallback === null ? this.#ask(worker, job, n) : null;
        asked?.catch(() => undefined); // handled in its step, or dropped once a fallback runs
        return steps.add(() => step(n, asked));
      },
      close: () => {
        if (this.#worker === worker) worker.postMessage({ op: "close", job } satisfies RenderRequest);
        fallback?.close();
      },
    };
  }

  /** Stops the worker thread; jobs still running continue in this thread. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#stopWalWatch();
    const worker = this.#worker;
    this.#worker = null;
    if (worker !== null) await worker.terminate();
  }

  /**
   * Checkpoints the WAL now, on the worker's connection (PASSIVE: waits for no reader or writer).
   * @throws Error when the worker is not running or exits first
   */
  async checkpoint(): Promise<WalCheckpoint> {
    const worker = this.#running();
    if (worker === null) throw new Error("the store worker is not running");
    return (await this.#request(worker, (id) => ({ op: "checkpoint", id }))) as WalCheckpoint;
  }

  /**
   * The store's counts read on the worker's connection, so that counting half a million pairs
   * never blocks the main thread's event loop (15–30 ms at 1,000 nodes). The read follows every commit
   * made before the call (WAL). Null when no worker thread runs (this does not start one): the
   * caller counts on its own connection.
   * @throws Error when the worker exits or fails before it answers
   */
  async counts(): Promise<StoreCounts | null> {
    const worker = this.#worker;
    if (worker === null || this.#closed) return null;
    return (await this.#request(worker, (id) => ({ op: "counts", id }))) as StoreCounts;
  }

  async #ask(worker: Worker, job: number, n: number): Promise<RenderedChunk | null> {
    return (await this.#request(worker, (id) => ({ op: "next", id, job, n }))) as RenderedChunk | null;
  }

  #request(worker: Worker, build: (id: number) => RenderRequest): Promise<Answer> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      if (this.#worker !== worker) {
        reject(new Error("the store worker is gone"));
        return;
      }
      this.#pending.set(id, { resolve, reject });
      // Held while a request is open (the answer must reach this thread), let go when idle.
      worker.ref();
      worker.postMessage(build(id));
    });
  }

  /** The running worker, started if needed; null once closed or past {@link MAX_WORKER_STARTS}. */
  #running(): Worker | null {
    if (this.#worker !== null || this.#closed || this.#starts >= MAX_WORKER_STARTS) return this.#worker;
    this.#starts++;
    let worker: Worker;
    try {
      worker = startWorker(new URL(`./store-worker.thread${moduleExtension(import.meta.url)}`, import.meta.url), { workerData: { file: this.#file, checkpointIntervalMs: this.#checkpointIntervalMs, walTruncateBytes: this.#walTruncateBytes } });
    } catch (err) {
      this.#log.error({ err }, "the store worker did not start; rendering in the main thread");
      return null;
    }
    this.#stopWalWatch();
    worker.unref();
    worker.on("message", (res: RenderResponse) => this.#onAnswer(res));
    worker.on("error", (err) => this.#log.error({ err }, "the store worker failed"));
    worker.on("exit", (code) => this.#exited(worker, code));
    this.#worker = worker;
    this.#onRunning?.(true);
    return worker;
  }

  #stopWalWatch(): void {
    if (this.#walWatch !== null) clearInterval(this.#walWatch);
    this.#walWatch = null;
  }

  #onAnswer(res: RenderResponse): void {
    if (res.id === null) {
      if (res.checkpoint.truncatable === true) this.#onIdleWal?.();
      this.#onCheckpoint?.(res.checkpoint);
      return;
    }
    const waiting = this.#pending.get(res.id);
    if (waiting === undefined) return;
    this.#pending.delete(res.id);
    if (this.#pending.size === 0) this.#worker?.unref();
    if (!res.ok) waiting.reject(new Error(res.message));
    else if ("checkpoint" in res) waiting.resolve(res.checkpoint);
    else if ("counts" in res) waiting.resolve(res.counts);
    else {
      this.#answered++;
      waiting.resolve(res.step);
    }
  }

  #exited(worker: Worker, code: number): void {
    if (this.#worker === worker) this.#worker = null;
    if (!this.#closed) this.#onRunning?.(false);
    if (!this.#closed) this.#log.warn({ code }, "the store worker exited");
    // Checkpoints resume with a new worker once the WAL is large again (up to MAX_WORKER_STARTS).
    if (this.#watchWal && !this.#closed && this.#starts < MAX_WORKER_STARTS) this.startWhenWalGrows();
    const waiting = [...this.#pending.values()];
    this.#pending.clear();
    for (const w of waiting) w.reject(new Error(`the store worker exited with code ${code}`));
  }
}
