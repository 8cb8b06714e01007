import { performance } from "node:perf_hooks";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import { deleteControlLogsBelow, nodeIdsAfter, retentionCutoff } from "../store/control-logs.repository.js";
import type { Connected, Store } from "../store/db.js";

export interface ControlLogRetentionDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** Rows kept per node (SVC_CONTROL_LOG_RETENTION), >= 1. */
  keep: number;
  /** A full sweep over every node runs at start and then this often, ms. Default 1 h. */
  sweepIntervalMs?: number;
  /**
   * CPU time one chunk of work aims at, ms. Default 2: the chunk size adapts to it, so a chunk
   * stays well under the 10 ms the event loop may be held (docs/history/decisions-2026.md "Retention").
   */
  chunkBudgetMs?: number;
  /**
   * The table pruned: its cut-off lookup and chunked delete. Default: `control_logs`. The nodes'
   * flight recorder prunes `node_transitions` with the same machinery.
   */
  rows?: RetentionRows;
}

/** The two statements retention needs of a per-node table whose newest rows have the highest id. */
export interface RetentionRows {
  /** Names the table in log lines. */
  table: string;
  /** The id of the node's `keep`-th newest row, or undefined when it has at most `keep` rows. */
  cutoff(conn: Connected, nodeId: string, keep: number): number | undefined;
  /** Deletes up to `limit` of the node's oldest rows below `cutoff`; returns how many. */
  deleteBelow(conn: Connected, nodeId: string, cutoff: number, limit: number): number;
}

const CONTROL_LOG_ROWS: RetentionRows = { table: "control_logs", cutoff: retentionCutoff, deleteBelow: deleteControlLogsBelow };

/** What the pruning did so far. */
export interface RetentionStats {
  /** Rows deleted. */
  deleted: number;
  /** Synchronous steps run (cut-off lookups, delete chunks, sweep pages). */
  chunks: number;
  /** The longest step, ms of wall time (includes time the process was not scheduled). */
  longestChunkMs: number;
  /** The longest step, ms of CPU time (user + system) of the process. */
  longestChunkCpuMs: number;
  /** Current delete chunk size, rows. */
  chunkRows: number;
}

const DEFAULT_SWEEP_MS = 3_600_000;
const DEFAULT_BUDGET_MS = 2;
const MIN_CHUNK = 16;
const MAX_CHUNK = 2048;
const SWEEP_PAGE = 256;

/**
 * Control log retention (spec §6.4 rule 9 "the backend ... cleans up events"; docs/history/decisions-2026.md "Retention"):
 * each node keeps its newest `keep` rows (newest = highest `log_id`, the insertion order) and
 * older ones are deleted in the background.
 *
 * Work is cut into synchronous steps, one per turn of the event loop (`setImmediate` between
 * them): a cut-off lookup for one node, one delete of at most `chunkRows` rows, or one page of the
 * sweep's node list. The chunk size adapts to the measured time of each delete (halved above the
 * CPU-time budget, doubled under half of it), so no step holds the event loop for long whatever the
 * table's size. A node is checked after every insert of its rows ({@link noteInsert}), and every
 * node by a full sweep at {@link start} and every `sweepIntervalMs` of the injected clock (rows
 * that arrived by other paths, such as a snapshot restore). No step runs inside a request's open
 * transaction. A failed step is logged and the node is retried at the next sweep.
 */
export class ControlLogRetention {
  readonly #deps: ControlLogRetentionDeps;
  readonly #sweepMs: number;
  readonly #budgetMs: number;
  /** Nodes to check, in arrival order. */
  readonly #queue = new Set<string>();
  /** Cut-offs handed in by {@link noteCutoff}, by node (used instead of the lookup). */
  readonly #known = new Map<string, number>();
  /** The node being pruned and its cut-off. */
  #current: { nodeId: string; cutoff: number } | null = null;
  /** Next page of the running sweep: node ids after this one; null when no sweep runs. */
  #sweepAfter: string | null = null;
  #scheduled = false;
  #timer: { handle: unknown } | null = null;
  #stopped = false;
  #idle: Array<() => void> = [];
  readonly #stats: RetentionStats;
  readonly #rows: RetentionRows;

  constructor(deps: ControlLogRetentionDeps) {
    if (!Number.isInteger(deps.keep) || deps.keep < 1) throw new RangeError("ControlLogRetention: keep must be an integer >= 1");
    this.#deps = deps;
    this.#sweepMs = deps.sweepIntervalMs ?? DEFAULT_SWEEP_MS;
    this.#budgetMs = deps.chunkBudgetMs ?? DEFAULT_BUDGET_MS;
    this.#rows = deps.rows ?? CONTROL_LOG_ROWS;
    this.#stats = { deleted: 0, chunks: 0, longestChunkMs: 0, longestChunkCpuMs: 0, chunkRows: 512 };
  }

  /** Starts the first full sweep now and arms the periodic one. */
  start(): void {
    if (this.#stopped) return;
    this.sweep();
  }

  /** Queues a full sweep over every node (at most one runs at a time). */
  sweep(): void {
    if (this.#stopped) return;
    if (this.#sweepAfter === null) this.#sweepAfter = "";
    this.#armSweepTimer();
    this.#schedule();
  }

  /** A row of `nodeId` was inserted: check that node soon. */
  noteInsert(nodeId: string): void {
    if (this.#stopped) return;
    this.#queue.add(nodeId);
    this.#schedule();
  }

  /**
   * The writer knows where to cut `nodeId`: delete its rows below `cutoff` soon, without looking
   * the cut-off up (the registry knows it when it appends a node's flight-recorder rows). A later call for the
   * same node before the work runs replaces the earlier cut-off.
   */
  noteCutoff(nodeId: string, cutoff: number): void {
    if (this.#stopped) return;
    this.#known.set(nodeId, cutoff);
    this.#queue.add(nodeId);
    this.#schedule();
  }

  /** Resolves once no work is queued (tests, shutdown). */
  idle(): Promise<void> {
    if (!this.#busy()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** A copy of the counters. */
  stats(): RetentionStats {
    return { ...this.#stats };
  }

  /** Stops the sweep timer and drops queued work (the next start sweeps again). */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) this.#deps.clock.clearTimeout(this.#timer.handle);
    this.#timer = null;
    this.#queue.clear();
    this.#known.clear();
    this.#current = null;
    this.#sweepAfter = null;
    this.#settle();
  }

  #busy(): boolean {
    return this.#current !== null || this.#queue.size > 0 || this.#sweepAfter !== null;
  }

  #armSweepTimer(): void {
    if (this.#timer !== null) this.#deps.clock.clearTimeout(this.#timer.handle);
    const box: { handle: unknown } = { handle: undefined };
    this.#timer = box;
    box.handle = this.#deps.clock.setTimeout(() => {
      if (this.#timer !== box) return;
      this.#timer = null;
      this.sweep();
    }, this.#sweepMs);
  }

  #schedule(): void {
    if (this.#scheduled || this.#stopped) return;
    this.#scheduled = true;
    // Never inside a request's transaction: the store runs the step once none is open.
    this.#deps.store
      .whenIdle(() => {
        this.#scheduled = false;
        if (this.#stopped) return;
        this.#step();
        if (this.#busy()) this.#schedule();
        else this.#settle();
      })
      .catch((err: unknown) => this.#deps.log.error({ err, table: this.#rows.table }, "retention stopped"));
  }

  #settle(): void {
    const waiters = this.#idle;
    this.#idle = [];
    for (const w of waiters) w();
  }

  /** One synchronous step, timed. */
  #step(): void {
    const store = this.#deps.store;
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    let deletedRows: number | null = null;
    const node = this.#current?.nodeId ?? this.#queue.values().next().value;
    try {
      if (this.#current !== null) {
        const { nodeId, cutoff } = this.#current;
        deletedRows = this.#rows.deleteBelow(store, nodeId, cutoff, this.#stats.chunkRows);
        this.#stats.deleted += deletedRows;
        if (deletedRows < this.#stats.chunkRows) this.#current = null;
      } else if (this.#queue.size > 0) {
        const nodeId = this.#queue.values().next().value as string;
        this.#queue.delete(nodeId);
        const known = this.#known.get(nodeId);
        this.#known.delete(nodeId);
        const cutoff = known ?? this.#rows.cutoff(store, nodeId, this.#deps.keep);
        if (cutoff !== undefined) this.#current = { nodeId, cutoff };
      } else if (this.#sweepAfter !== null) {
        const ids = nodeIdsAfter(store, this.#sweepAfter, SWEEP_PAGE);
        for (const id of ids) this.#queue.add(id);
        this.#sweepAfter = ids.length < SWEEP_PAGE ? null : (ids[ids.length - 1] ?? null);
      }
    } catch (err) {
      this.#deps.log.error({ err, node_id: node, table: this.#rows.table }, "retention step failed; the node is retried at the next sweep");
      this.#current = null;
    }
    const ms = performance.now() - started;
    const cpu = process.cpuUsage(cpuStarted);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    this.#stats.chunks++;
    if (ms > this.#stats.longestChunkMs) this.#stats.longestChunkMs = ms;
    if (cpuMs > this.#stats.longestChunkCpuMs) this.#stats.longestChunkCpuMs = cpuMs;
    // Sized by CPU time, the cost this code controls: on a loaded host the wall time of a step
    // also holds the time the process was not scheduled, which a smaller chunk would not remove.
    if (deletedRows !== null) this.#adapt(cpuMs, deletedRows);
  }

  /** Halves the chunk above the budget, doubles it well under (only after full chunks). */
  #adapt(ms: number, rows: number): void {
    const size = this.#stats.chunkRows;
    if (ms > this.#budgetMs) this.#stats.chunkRows = Math.max(MIN_CHUNK, Math.floor(size / 2));
    else if (rows === size && ms < this.#budgetMs / 2) this.#stats.chunkRows = Math.min(MAX_CHUNK, size * 2);
  }
}
