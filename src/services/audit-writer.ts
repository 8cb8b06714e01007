import { performance } from "node:perf_hooks";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import { appendAuditRows, auditBoundary, auditHead, type AuditLink } from "../store/audit.repository.js";
import type { Store } from "../store/db.js";
import type { AuditRow } from "../store/schema.js";
import { auditRowHash, GENESIS_HASH } from "./audit-chain.js";

/** An entry to append: a row without its place in the chain (id and hash are given at the commit). */
export type PendingAuditRow = Omit<AuditRow, "audit_id" | "hash">;

/** Turns of the event loop {@link AuditWriter.close} waits for an open transaction to end. */
const CLOSE_TURNS = 100;
/**
 * Most entries chained and written in one turn: ~16 µs of CPU each (scripts/bench/audit.ts), so a
 * burst (a bulk change, a storm of refusals) holds the event loop ~5 ms per turn, not for the whole
 * burst; the rest follows at the next turns, in order.
 */
const MAX_BATCH = 256;
/** After a failed commit the batch is tried again this much later, ms of the injected clock. */
const RETRY_MS = 1_000;

export interface AuditWriterDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** Called once per commit with its rows, in chain order (SSE `audit.appended`). Must not throw (a throw is logged). */
  onAppended(rows: readonly AuditRow[]): void;
}

/**
 * The audit log's one writer (README "Audit log"). Group commit, like the client-event log and
 * the actors' state: entries recorded in one turn of the event loop are chained and written in
 * one transaction at the next turn at which no request's transaction is open
 * (`Store.whenIdle`), so recording costs a request an array push and the chain keeps the order
 * entries were recorded in. The chain's head (id and hash of the newest row) is read once from the
 * store and then kept here; it advances only when a commit succeeded. A failed commit keeps its
 * entries queued and is tried again a second later; nothing throws into the request path.
 */
export class AuditWriter {
  readonly #deps: AuditWriterDeps;
  #queue: PendingAuditRow[] = [];
  #scheduled = false;
  #retry: { handle: unknown } | null = null;
  #head: AuditLink | null = null;
  #waiters: Array<() => void> = [];
  /** Rows written since start (metrics, tests). */
  written = 0;
  /** The longest group commit so far, ms of wall time holding the event loop (scripts/bench/audit.ts). */
  longestCommitMs = 0;

  constructor(deps: AuditWriterDeps) {
    this.#deps = deps;
  }

  /** Queues one entry for the next group commit. */
  record(row: PendingAuditRow): void {
    this.#queue.push(row);
    this.#schedule();
  }

  /** Entries waiting for their commit. */
  get pending(): number {
    return this.#queue.length;
  }

  /** The newest committed row's id and hash; null before the first commit of this process reads it. */
  get head(): AuditLink | null {
    return this.#head;
  }

  /** Resolves once every entry recorded before the call is stored (or immediately when none waits). */
  flushed(): Promise<void> {
    if (this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Writes what is queued (shutdown); what still cannot be written is logged as lost. */
  async close(): Promise<void> {
    if (this.#retry !== null) this.#deps.clock.clearTimeout(this.#retry.handle);
    this.#retry = null;
    if (this.#queue.length === 0) return;
    try {
      for (let left = this.#queue.length; left > 0; ) {
        await this.#deps.store.whenIdle(() => this.#flush(), { turns: CLOSE_TURNS });
        if (this.#queue.length >= left) break; // the commit failed: no retry at shutdown
        left = this.#queue.length;
      }
    } catch {
      this.#deps.log.error({ entries: this.#queue.length }, "audit entries not stored at shutdown: the database stayed busy");
    }
    if (this.#queue.length > 0) this.#deps.log.error({ entries: this.#queue.length }, "audit entries lost at shutdown");
    this.#queue = [];
    this.#settle();
  }

  #schedule(): void {
    if (this.#scheduled || this.#retry !== null) return;
    this.#scheduled = true;
    this.#deps.store
      .whenIdle(() => {
        this.#scheduled = false;
        this.#flush();
      })
      .catch((err: unknown) => {
        this.#scheduled = false;
        this.#deps.log.error({ err }, "appending to the audit log failed");
      });
  }

  /** Chains and writes the whole queue in one transaction (synchronous: runs between transactions). */
  #flush(): void {
    const batch = this.#queue.slice(0, MAX_BATCH);
    if (batch.length === 0) return;
    const started = performance.now();
    const store = this.#deps.store;
    let rows: AuditRow[];
    try {
      let head = this.#head ?? auditHead(store) ?? auditBoundary(store) ?? { id: 0, hash: GENESIS_HASH };
      rows = batch.map((entry) => {
        const row = { audit_id: head.id + 1, ...entry };
        const hash = auditRowHash(head.hash, row);
        head = { id: row.audit_id, hash };
        return { ...row, hash };
      });
      appendAuditRows(store, rows);
      this.#head = head;
    } catch (err) {
      // The head is read again from the store at the next try; the entries stay queued, in order.
      this.#head = null;
      this.#deps.log.error({ err, entries: batch.length }, "appending to the audit log failed; retrying");
      this.#retryLater();
      return;
    }
    this.#queue = this.#queue.slice(batch.length);
    this.written += rows.length;
    this.longestCommitMs = Math.max(this.longestCommitMs, performance.now() - started);
    try {
      this.#deps.onAppended(rows);
    } catch (err) {
      this.#deps.log.error({ err }, "after appending to the audit log");
    }
    if (this.#queue.length === 0) this.#settle();
    else this.#schedule();
  }

  #retryLater(): void {
    if (this.#retry !== null) return;
    const box: { handle: unknown } = { handle: undefined };
    this.#retry = box;
    box.handle = this.#deps.clock.setTimeout(() => {
      if (this.#retry !== box) return;
      this.#retry = null;
      this.#schedule();
    }, RETRY_MS);
  }

  #settle(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}
