import type SQLite from "better-sqlite3";
import { perConnection, sqliteOf, type Connection } from "./connection.js";
import type { AuditRow } from "./schema.js";

/**
 * Repository of `audit_log` and `audit_chain` (migration 0019; README "Audit log"). Raw
 * statements prepared once per connection: the writer appends on the main thread between
 * requests, synchronously, many rows per transaction. Nothing here updates a row; rows are
 * deleted only from the oldest end, together with the boundary that records where the kept
 * chain starts. Each function throws the driver's error (`SqliteError`) on failure.
 */

/** A position in the chain: a row's id and hash. */
export interface AuditLink {
  id: number;
  hash: string;
}

/** Filters of a list or export read; all optional, combined with AND. */
export interface AuditRowFilter {
  /** actor_id or actor_name, exactly. */
  actor?: string;
  /** action, exactly. */
  action?: string;
  /** action starting with this prefix (e.g. `node.`). */
  actionPrefix?: string;
  targetId?: string;
  outcome?: string;
  /** at >= since (ms). */
  since?: number;
  /** at < until (ms). */
  until?: number;
}

const COLUMNS = "audit_id, at, actor_kind, actor_id, actor_name, action, target_type, target_id, target_config_id, outcome, source_ip, request_id, changes, hash";

type Statements = {
  insert: SQLite.Statement;
  head: SQLite.Statement;
  boundary: SQLite.Statement;
  after: SQLite.Statement;
  deleteThrough: SQLite.Statement;
  setBoundary: SQLite.Statement;
  count: SQLite.Statement;
  /** Filtered reads, by SQL text (a handful of filter combinations). */
  lists: Map<string, SQLite.Statement>;
  append: (rows: readonly AuditRow[]) => void;
  prune: (through: AuditLink, at: number) => number;
};

const statements = perConnection((sqlite): Statements => {
  const insert = sqlite.prepare(`INSERT INTO audit_log (${COLUMNS}) VALUES (@audit_id, @at, @actor_kind, @actor_id, @actor_name, @action, @target_type, @target_id, @target_config_id, @outcome, @source_ip, @request_id, @changes, @hash)`);
  const deleteThrough = sqlite.prepare("DELETE FROM audit_log WHERE audit_id <= ?");
  const setBoundary = sqlite.prepare(
    `INSERT INTO audit_chain (id, pruned_through_id, pruned_through_hash, pruned_at) VALUES (1, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET pruned_through_id = excluded.pruned_through_id, pruned_through_hash = excluded.pruned_through_hash, pruned_at = excluded.pruned_at`,
  );
  return {
    insert,
    head: sqlite.prepare("SELECT audit_id AS id, hash FROM audit_log ORDER BY audit_id DESC LIMIT 1"),
    boundary: sqlite.prepare("SELECT pruned_through_id AS id, pruned_through_hash AS hash FROM audit_chain WHERE id = 1"),
    after: sqlite.prepare(`SELECT ${COLUMNS} FROM audit_log WHERE audit_id > ? ORDER BY audit_id LIMIT ?`),
    deleteThrough,
    setBoundary,
    count: sqlite.prepare("SELECT count(*) AS n FROM audit_log"),
    lists: new Map(),
    append: sqlite.transaction((rows: readonly AuditRow[]) => {
      for (const row of rows) insert.run(row);
    }),
    prune: sqlite.transaction((through: AuditLink, at: number) => {
      const deleted = deleteThrough.run(through.id).changes;
      setBoundary.run(through.id, through.hash, at);
      return deleted;
    }),
  };
});

/** Appends rows in one transaction, in the order given (their ids and hashes already chained). */
export function appendAuditRows(conn: Connection, rows: readonly AuditRow[]): void {
  statements(conn).append(rows);
}

/** The newest row's id and hash, or undefined when the table is empty. */
export function auditHead(conn: Connection): AuditLink | undefined {
  return statements(conn).head.get() as AuditLink | undefined;
}

/** Where retention cut the chain (the last removed row's id and hash), or undefined when it never did. */
export function auditBoundary(conn: Connection): AuditLink | undefined {
  return statements(conn).boundary.get() as AuditLink | undefined;
}

/** Up to `limit` rows with an id above `afterId`, oldest first (the chain's order). */
export function auditRowsAfter(conn: Connection, afterId: number, limit: number): AuditRow[] {
  return statements(conn).after.all(afterId, limit) as AuditRow[];
}

/** Rows stored. */
export function countAuditRows(conn: Connection): number {
  return (statements(conn).count.get() as { n: number }).n;
}

/**
 * Deletes every row up to and including `through.id` and records `through` as the chain's
 * boundary, in one transaction (retention: the kept rows stay verifiable from it).
 * @returns rows deleted
 */
export function pruneAuditThrough(conn: Connection, through: AuditLink, at: number): number {
  return statements(conn).prune(through, at);
}

/**
 * One page of rows matching `filter`: newest first below `beforeId` (the list), or oldest first
 * above `afterId` (the export).
 */
export function listAuditRows(conn: Connection, filter: AuditRowFilter, page: { beforeId?: number; afterId?: number; limit: number; newestFirst: boolean }): AuditRow[] {
  const where: string[] = [];
  const params: Array<string | number> = [];
  const add = (clause: string, ...values: Array<string | number>) => {
    where.push(clause);
    params.push(...values);
  };
  if (filter.actor !== undefined) add("(actor_id = ? OR actor_name = ?)", filter.actor, filter.actor);
  if (filter.action !== undefined) add("action = ?", filter.action);
  // A range on the text, not LIKE: the prefix's characters need no escaping.
  if (filter.actionPrefix !== undefined) add("action >= ? AND action < ?", filter.actionPrefix, `${filter.actionPrefix}\uffff`);
  if (filter.targetId !== undefined) add("target_id = ?", filter.targetId);
  if (filter.outcome !== undefined) add("outcome = ?", filter.outcome);
  if (filter.since !== undefined) add("at >= ?", filter.since);
  if (filter.until !== undefined) add("at < ?", filter.until);
  if (page.beforeId !== undefined) add("audit_id < ?", page.beforeId);
  if (page.afterId !== undefined) add("audit_id > ?", page.afterId);
  const text = `SELECT ${COLUMNS} FROM audit_log${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""} ORDER BY audit_id ${page.newestFirst ? "DESC" : "ASC"} LIMIT ?`;
  const s = statements(conn);
  let stmt = s.lists.get(text);
  if (stmt === undefined) {
    stmt = sqliteOf(conn).prepare(text);
    s.lists.set(text, stmt);
  }
  return stmt.all(...params, page.limit) as AuditRow[];
}
