import { isoTime, type Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import type { EventHub } from "../events/hub.js";
import { auditCursorSchema, type AuditEntry, type AuditFilter, type AuditVerifyAnswer } from "../protocol/audit.schema.js";
import { auditBoundary, auditRowsAfter, listAuditRows, pruneAuditThrough, type AuditRowFilter } from "../store/audit.repository.js";
import type { Store } from "../store/db.js";
import type { AuditRow } from "../store/schema.js";
import { checkAuditRows, GENESIS_HASH } from "./audit-chain.js";
import type { AppEvents } from "./app-events.js";
import { AuditWriter, type PendingAuditRow } from "./audit-writer.js";
import { decodeCursor, encodeCursor } from "./list-cursor.js";

/** Rows read per step of a verification, an export or a prune. */
const PAGE_ROWS = 1_000;
const DAY_MS = 86_400_000;
/** Retention runs at start and then this often, ms of the injected clock. */
const DEFAULT_PRUNE_INTERVAL_MS = 3_600_000;

export interface AuditServiceDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  /** `audit.appended` goes out on it (id and action only: streams reach viewers too). */
  hub: Pick<EventHub, "publish">;
  /** Entries older than this many days are pruned (SVC_AUDIT_RETENTION_DAYS). */
  retentionDays: number;
  /** How often retention runs, ms; default 1 h. */
  pruneIntervalMs?: number;
  /** What the service does on its own that the log records (an alert channel the delivery worker disabled). */
  events?: Pick<AppEvents, "on">;
}

/** An entry as recorders hand it in: `at` defaults to the clock's now. */
export type AuditRecord = Omit<PendingAuditRow, "at"> & { at?: number };

/**
 * The audit log (README "Audit log"; DESIGN §3 "an append-only, hash-chained audit log"): records
 * entries through its one writer ({@link AuditWriter}), answers pages newest first and an export
 * in chain order, verifies the chain, and prunes entries older than the retention from the oldest
 * end, recording the boundary so the kept chain stays verifiable. Verification and pruning never
 * overlap (a prune under a running walk would look like missing rows).
 */
export class AuditService {
  readonly #d: AuditServiceDeps;
  readonly #writer: AuditWriter;
  #timer: { handle: unknown } | null = null;
  #exclusive: Promise<unknown> = Promise.resolve();
  #stopped = false;

  constructor(deps: AuditServiceDeps) {
    this.#d = deps;
    this.#writer = new AuditWriter({
      store: deps.store,
      clock: deps.clock,
      log: deps.log,
      onAppended: (rows) => {
        for (const row of rows) deps.hub.publish("audit.appended", { audit_id: row.audit_id, action: row.action });
      },
    });
    // The service itself disabled a channel (410 Gone, or failing too long): who stopped the alerts is on record.
    deps.events?.on("alert.channel_disabled", (channelId, reason) => {
      this.record({ ...SYSTEM_ACTOR, target_type: "alert_channel", target_id: channelId, action: "alert.channel_disabled", outcome: "ok", changes: JSON.stringify({ reason }) });
    });
  }

  /** Queues an entry; it is stored at the next turn without an open transaction. Never throws. */
  record(entry: AuditRecord): void {
    const { at, ...rest } = entry;
    this.#writer.record({ ...rest, at: at ?? this.#d.clock.now() });
  }

  /** Resolves once every entry recorded before the call is stored. */
  flushed(): Promise<void> {
    return this.#writer.flushed();
  }

  /** Rows written by this process (metrics, tests). */
  get written(): number {
    return this.#writer.written;
  }

  /** The longest group commit of the writer so far, ms. */
  get longestCommitMs(): number {
    return this.#writer.longestCommitMs;
  }

  /**
   * One page, newest first (`GET /api/v1/audit`), after every entry recorded before the call is stored.
   * @throws AppError INVALID_CURSOR for a cursor this list did not issue
   */
  async list(filter: AuditFilter, page: { limit: number; cursor?: string | undefined }): Promise<{ items: AuditEntry[]; next_cursor: string | null }> {
    await this.flushed();
    const before = decodeCursor(auditCursorSchema, page.cursor)?.before;
    const rows = await this.#d.store.read((c) => listAuditRows(c, rowFilter(filter), { ...(before === undefined ? {} : { beforeId: before }), limit: page.limit + 1, newestFirst: true }));
    const items = rows.slice(0, page.limit).map(auditEntryView);
    const last = items[items.length - 1];
    return { items, next_cursor: rows.length > page.limit && last !== undefined ? encodeCursor({ list: "audit", before: last.audit_id }) : null };
  }

  /** Every matching entry in chain order (oldest first), as NDJSON lines, read a page at a time. */
  async *exportLines(filter: AuditFilter): AsyncGenerator<string> {
    await this.flushed();
    const f = rowFilter(filter);
    let after = 0;
    for (;;) {
      const rows = await this.#d.store.read((c) => listAuditRows(c, f, { afterId: after, limit: PAGE_ROWS, newestFirst: false }));
      if (rows.length > 0) yield rows.map((r) => `${JSON.stringify(auditEntryView(r))}\n`).join("");
      const last = rows[rows.length - 1];
      if (last === undefined || rows.length < PAGE_ROWS) return;
      after = last.audit_id;
    }
  }

  /**
   * Walks the whole kept chain from the retention boundary (or the start) and answers the first
   * row whose position, link or hash does not match; rows missing after the newest one this
   * process committed count as broken too (`GET /api/v1/audit/verify`).
   */
  async verify(): Promise<AuditVerifyAnswer> {
    await this.flushed();
    return this.#exclusively(async () => {
      const store = this.#d.store;
      const boundary = await store.read((c) => auditBoundary(c));
      const committed = this.#writer.head;
      let from = boundary ?? { id: 0, hash: GENESIS_HASH };
      let checked = 0;
      const answer = (broken: number | null): AuditVerifyAnswer => ({ ok: broken === null, rows_checked: checked, first_broken_audit_id: broken, pruned_through_audit_id: boundary?.id ?? null });
      for (;;) {
        const rows = await store.read((c) => auditRowsAfter(c, from.id, PAGE_ROWS));
        const check = checkAuditRows(from, rows);
        checked += check.checked;
        if (check.brokenAt !== undefined) return answer(check.brokenAt);
        from = check.last;
        if (rows.length < PAGE_ROWS) break;
      }
      return answer(committed !== null && from.id < committed.id ? from.id + 1 : null);
    });
  }

  /**
   * Removes entries older than the retention, oldest first and never past a newer one (a clock
   * that went back leaves the chain whole), a page per turn; records the last removed row as the
   * chain's boundary in the same transaction, and the prune itself as a `system` entry.
   * @returns entries removed
   */
  async prune(): Promise<number> {
    await this.flushed();
    const removed = await this.#exclusively(async () => {
      const cutoff = this.#d.clock.now() - this.#d.retentionDays * DAY_MS;
      let total = 0;
      for (;;) {
        const step = await this.#d.store.whenIdle(() => this.#pruneStep(cutoff));
        total += step.removed;
        if (!step.more) return total;
      }
    });
    if (removed > 0) {
      this.#d.log.info({ removed, retention_days: this.#d.retentionDays }, "audit entries past retention removed");
      this.record({ ...SYSTEM_ACTOR, action: "audit.prune", outcome: "ok", changes: JSON.stringify({ removed, retention_days: this.#d.retentionDays }) });
    }
    return removed;
  }

  #pruneStep(cutoff: number): { removed: number; more: boolean } {
    const store = this.#d.store;
    const from = auditBoundary(store)?.id ?? 0;
    const rows = auditRowsAfter(store, from, PAGE_ROWS);
    let last: AuditRow | undefined;
    for (const row of rows) {
      if (row.at >= cutoff) break;
      last = row;
    }
    if (last === undefined) return { removed: 0, more: false };
    const removed = pruneAuditThrough(store, { id: last.audit_id, hash: last.hash }, this.#d.clock.now());
    return { removed, more: last === rows[rows.length - 1] && rows.length === PAGE_ROWS };
  }

  /** Prunes now and then every interval of the injected clock until {@link close}. */
  start(): void {
    if (this.#stopped) return;
    void this.prune().catch((err: unknown) => this.#d.log.error({ err }, "audit retention failed; retried at the next interval"));
    const box: { handle: unknown } = { handle: undefined };
    this.#timer = box;
    box.handle = this.#d.clock.setTimeout(() => {
      if (this.#timer === box) this.start();
    }, this.#d.pruneIntervalMs ?? DEFAULT_PRUNE_INTERVAL_MS);
  }

  /** Stops retention and writes the entries still queued. */
  async close(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) this.#d.clock.clearTimeout(this.#timer.handle);
    this.#timer = null;
    await this.#writer.close();
  }

  #exclusively<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#exclusive.then(fn, fn);
    this.#exclusive = run.catch(() => undefined);
    return run;
  }
}

/** The service itself as an actor (retention, a channel it disabled). */
const SYSTEM_ACTOR = {
  actor_kind: "system",
  actor_id: null,
  actor_name: "service",
  target_type: "audit_log",
  target_id: null,
  target_config_id: null,
  source_ip: null,
  request_id: null,
} as const;

function rowFilter(f: AuditFilter): AuditRowFilter {
  const out: AuditRowFilter = {};
  if (f.actor !== undefined) out.actor = f.actor;
  if (f.action !== undefined) {
    if (f.action.endsWith(".")) out.actionPrefix = f.action;
    else out.action = f.action;
  }
  if (f.target_id !== undefined) out.targetId = f.target_id;
  if (f.outcome !== undefined) out.outcome = f.outcome;
  if (f.since !== undefined) out.since = Date.parse(f.since);
  if (f.until !== undefined) out.until = Date.parse(f.until);
  return out;
}

/** The wire view of a stored row. */
export function auditEntryView(row: AuditRow): AuditEntry {
  return {
    audit_id: row.audit_id,
    at: isoTime(row.at),
    actor: { kind: row.actor_kind, id: row.actor_id, name: row.actor_name },
    action: row.action,
    target: { type: row.target_type, id: row.target_id, config_id: row.target_config_id },
    outcome: row.outcome,
    source_ip: row.source_ip,
    request_id: row.request_id,
    changes: row.changes === null ? null : (JSON.parse(row.changes) as Record<string, unknown>),
    hash: row.hash,
  };
}
