/**
 * The render worker as a {@link ChunkSource} for `renderDeferred` (issue 14 items 2–3;
 * docs/decisions.md "Issue 14: rendering on a worker thread"). One worker thread
 * (src/store/render-worker.ts) reads and renders chunks on its own SQLite connection while the
 * main thread stores the previous chunk and keeps serving MQTT, HTTP and SSE. The main thread
 * keeps every write: a rendering is stored only if its node is still at the version the worker
 * read (src/store/staging.ts), so a rendering raced by a write is never stored.
 *
 * Failure handling: a chunk the worker cannot answer (its thread died, or the renderer threw) is
 * read and rendered again in this thread, which throws the renderer's own `AppError` if the
 * input is bad. A worker that dies is started again on the next chunk, at most
 * {@link MAX_WORKER_STARTS} times per pool; after that every chunk renders in this thread.
 */
import { performance } from "node:perf_hooks";
import type { Worker } from "node:worker_threads";
import { moduleExtension, startWorker } from "../lib/worker.js";
import type { Logger } from "../logger.js";
import type { Db } from "./db.js";
import { readAndRenderChunk, type ChunkSource, type RenderedChunk } from "./staging.js";

/** A request to the render worker: read and render these nodes of this config. */
export interface RenderRequest {
  id: number;
  configId: string;
  ids: readonly string[];
}

/** The render worker's answer to the {@link RenderRequest} of the same `id`. */
export type RenderResponse = { id: number; ok: true; chunk: RenderedChunk } | { id: number; ok: false; message: string };

/** Worker threads a pool starts in its life before it renders in the main thread only. */
export const MAX_WORKER_STARTS = 3;

/** Step of the main-thread fallback (ms), as `renderDeferred`'s default. */
const FALLBACK_STEP_MS = 10;

/**
 * Reads and renders chunks on a worker thread, one chunk ahead of the one the main thread stores.
 * `file` is the store's SQLite file (not ":memory:": a worker cannot share an in-memory database).
 */
export class RenderPool implements ChunkSource {
  readonly ahead = 1;
  readonly #file: string;
  readonly #db: Db;
  readonly #log: Logger;
  readonly #pending = new Map<number, { resolve: (c: RenderedChunk) => void; reject: (e: Error) => void }>();
  #worker: Worker | null = null;
  #starts = 0;
  #answered = 0;
  #nextId = 1;
  #closed = false;

  /**
   * @param file the store's SQLite file
   * @param db the store's own connection: the fallback renders on it
   */
  constructor(file: string, db: Db, log: Logger) {
    this.#file = file;
    this.#db = db;
    this.#log = log;
  }

  /** Worker threads started so far (tests). */
  get starts(): number {
    return this.#starts;
  }

  /** Chunks the worker answered with renderings (tests, benchmarks). */
  get answered(): number {
    return this.#answered;
  }

  /** Starts the worker thread now if it is not running (it loads while the service starts). */
  start(): void {
    this.#running();
  }

  /**
   * One chunk read and rendered by the worker, or in this thread when the worker cannot answer.
   * @throws AppError `VALIDATION_FAILED` from the renderer on bad stored input
   */
  async renderChunk(configId: string, ids: readonly string[]): Promise<RenderedChunk> {
    const worker = this.#running();
    if (worker !== null) {
      try {
        return await this.#ask(worker, configId, ids);
      } catch (err) {
        this.#log.warn({ err, configId }, "the render worker did not render a chunk; rendering it in the main thread");
      }
    }
    return readAndRenderChunk(this.#db, configId, ids, { start: performance.now(), stepMs: FALLBACK_STEP_MS });
  }

  /** Stops the worker thread; chunks still asked are rendered in this thread. */
  async close(): Promise<void> {
    this.#closed = true;
    const worker = this.#worker;
    this.#worker = null;
    if (worker !== null) await worker.terminate();
  }

  #ask(worker: Worker, configId: string, ids: readonly string[]): Promise<RenderedChunk> {
    const id = this.#nextId++;
    return new Promise<RenderedChunk>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      // Held while a request is open (the answer must reach this thread), let go when idle.
      worker.ref();
      worker.postMessage({ id, configId, ids } satisfies RenderRequest);
    });
  }

  /** The running worker, started if needed; null once closed or past {@link MAX_WORKER_STARTS}. */
  #running(): Worker | null {
    if (this.#worker !== null || this.#closed || this.#starts >= MAX_WORKER_STARTS) return this.#worker;
    this.#starts++;
    let worker: Worker;
    try {
      worker = startWorker(new URL(`./render-worker${moduleExtension(import.meta.url)}`, import.meta.url), { workerData: { file: this.#file } });
    } catch (err) {
      this.#log.error({ err }, "the render worker did not start; rendering in the main thread");
      return null;
    }
    worker.unref();
    worker.on("message", (res: RenderResponse) => this.#onAnswer(res));
    worker.on("error", (err) => this.#log.error({ err }, "the render worker failed"));
    worker.on("exit", (code) => this.#exited(worker, code));
    this.#worker = worker;
    return worker;
  }

  #onAnswer(res: RenderResponse): void {
    const waiting = this.#pending.get(res.id);
    if (waiting === undefined) return;
    this.#pending.delete(res.id);
    if (this.#pending.size === 0) this.#worker?.unref();
    if (res.ok) {
      this.#answered++;
      waiting.resolve(res.chunk);
    }
    else waiting.reject(new Error(res.message));
  }

  #exited(worker: Worker, code: number): void {
    if (this.#worker === worker) this.#worker = null;
    if (!this.#closed) this.#log.warn({ code }, "the render worker exited");
    const waiting = [...this.#pending.values()];
    this.#pending.clear();
    for (const w of waiting) w.reject(new Error(`the render worker exited with code ${code}`));
  }
}
