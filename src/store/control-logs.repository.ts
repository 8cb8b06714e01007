import { sql } from "kysely";
import type SQLite from "better-sqlite3";
import { perConnection, sqliteOf, type Connection, type Db } from "./connection.js";
import type { ControlLogRow } from "./schema.js";

/**
 * Repository of `control_logs` for client events and retention (spec §2.8, §6.4 rule 9;
 * docs/history/decisions-2026.md "Every client event is stored", "Retention"). Plain functions taking the
 * better-sqlite3 handle (`Store.sqlite`) first: they run on the MQTT and retention hot paths,
 * synchronously, with statements prepared once per handle.
 *
 * None of them opens a transaction; callers that batch wrap them in `sqlite.transaction()`.
 * Each throws the driver's error (`SqliteError`) on failure.
 */

/** A client event to store: an `event` message of spec §6.3, with the node it came from. */
export interface NewClientEventLog {
  config_id: string;
  node_id: string;
  /** `output` for `command_output`, `event` for every other event name. */
  kind: "output" | "event";
  /** The event's `request_id` (command output), or the envelope's when not empty; else null. */
  request_id: string | null;
  level: string;
  event: string;
  message: string;
  action: string | null;
  stream: string | null;
  output: string | null;
  /** ms since the epoch; also `updated_at`. */
  created_at: number;
}

type Statements = {
  insert: SQLite.Statement;
  select: SQLite.Statement;
  cutoff: SQLite.Statement;
  deleteBelow: SQLite.Statement;
  nodesAfter: SQLite.Statement;
};

const statements = perConnection(
  (sqlite): Statements => ({
    insert: sqlite.prepare(
      `INSERT INTO control_logs
         (node_id, config_id, request_id, kind, action, status, message, stream, output, level, event, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    select: sqlite.prepare("SELECT * FROM control_logs WHERE log_id = ?"),
    // The keep-th newest row of a node (index control_logs_node_log: walks `keep` entries).
    cutoff: sqlite.prepare("SELECT log_id FROM control_logs WHERE node_id = ? ORDER BY log_id DESC LIMIT 1 OFFSET ?"),
    deleteBelow: sqlite.prepare(
      `DELETE FROM control_logs WHERE log_id IN
         (SELECT log_id FROM control_logs WHERE node_id = ? AND log_id < ? ORDER BY log_id LIMIT ?)`,
    ),
    nodesAfter: sqlite.prepare("SELECT node_id FROM nodes WHERE node_id > ? ORDER BY node_id LIMIT ?"),
  }),
);

/**
 * Inserts one client event as a control log row (status null: events need no ACK, spec §6.4
 * rule 9).
 * @returns the stored row
 */
export function insertClientEventLog(conn: Connection, row: NewClientEventLog): ControlLogRow {
  const sqlite = sqliteOf(conn);
  const s = statements(sqlite);
  const info = s.insert.run(
    row.node_id,
    row.config_id,
    row.request_id,
    row.kind,
    row.action,
    row.message,
    row.stream,
    row.output,
    row.level,
    row.event,
    row.created_at,
    row.created_at,
  );
  return s.select.get(Number(info.lastInsertRowid)) as ControlLogRow;
}

/**
 * Inserts a batch of client events in one transaction ({@link insertClientEventLog} each): all
 * are stored or, when one fails, none (the transaction rolls back and the error is thrown).
 * @returns the stored rows, in the order given
 */
export function insertClientEventLogs(conn: Connection, rows: readonly NewClientEventLog[]): ControlLogRow[] {
  const sqlite = sqliteOf(conn);
  return sqlite.transaction(() => rows.map((row) => insertClientEventLog(sqlite, row)))();
}

/**
 * The retention cut-off of one node: the `log_id` of its `keep`-th newest row (newest = highest
 * `log_id`, the insertion order). Rows below it are past retention.
 * @param keep rows kept per node, >= 1
 * @returns the cut-off, or undefined when the node has at most `keep` rows
 */
export function retentionCutoff(conn: Connection, nodeId: string, keep: number): number | undefined {
  const sqlite = sqliteOf(conn);
  const row = statements(sqlite).cutoff.get(nodeId, keep - 1) as { log_id: number } | undefined;
  return row?.log_id;
}

/**
 * Deletes up to `limit` of the oldest rows of one node whose `log_id` is below `cutoff`: one
 * bounded chunk of retention work (one autocommit statement unless a transaction is open).
 * @returns the number of rows deleted (less than `limit`: nothing below the cut-off is left)
 */
export function deleteControlLogsBelow(conn: Connection, nodeId: string, cutoff: number, limit: number): number {
  const sqlite = sqliteOf(conn);
  return statements(sqlite).deleteBelow.run(nodeId, cutoff, limit).changes;
}

/**
 * One page of node ids in id order, after `after` (exclusive; "" for the first page): the
 * retention sweep walks every node with it.
 */
export function nodeIdsAfter(conn: Connection, after: string, limit: number): string[] {
  const sqlite = sqliteOf(conn);
  return (statements(sqlite).nodesAfter.all(after, limit) as Array<{ node_id: string }>).map((r) => r.node_id);
}

/**
 * A node's control log rows of every kind (commands, command output, client events), newest
 * first, at most `limit` (DESIGN §5 control-logs). Newest is insertion order (`log_id`), not
 * `created_at`: after the wall clock was set back, rows written later carry earlier times and
 * would sink below older ones (docs/history/decisions-2026.md "chaos and resource faults");
 * retention keeps the newest rows by `log_id` alike.
 */
export async function listControlLogs(db: Db, nodeId: string, limit: number): Promise<ControlLogRow[]> {
  return db
    .selectFrom("control_logs")
    .selectAll()
    .where("node_id", "=", nodeId)
    .orderBy("log_id", "desc")
    .limit(limit)
    .execute();
}

/** A position in a node's control-log list (newest first): the sort key of the previous page's last row. */
export interface ControlLogPosition {
  log_id: number;
}

/** Filters of a control-log list; an absent field does not filter. */
export interface ControlLogFilter {
  kind?: "command" | "output" | "event" | undefined;
  /** A command's status (spec §3.4); only command rows have one. */
  status?: "pending" | "accepted" | "applied" | "failed" | "timed_out" | undefined;
}

/**
 * One page of a node's control logs, newest first by insertion order (`log_id` desc, as
 * {@link listControlLogs}; index `control_logs_node_log`, migration 0004), strictly after `after`
 * in that order (undefined for the first page): a node with a long history is read a page at a
 * time, never with an OFFSET walk.
 * @param limit rows wanted; up to `limit + 1` are returned so the caller knows whether more follow
 */
export async function controlLogPage(
  db: Db,
  nodeId: string,
  filter: ControlLogFilter,
  after: ControlLogPosition | undefined,
  limit: number,
): Promise<ControlLogRow[]> {
  let query = db.selectFrom("control_logs").selectAll().where("node_id", "=", nodeId);
  if (filter.kind !== undefined) query = query.where("kind", "=", filter.kind);
  if (filter.status !== undefined) query = query.where("status", "=", filter.status);
  if (after !== undefined) query = query.where("log_id", "<", after.log_id);
  return query.orderBy("log_id", "desc").limit(limit + 1).execute();
}

/** A node's control logs counted by kind (`command`, `output`, `event`). */
export async function countControlLogsByKind(db: Db, nodeId: string): Promise<Record<ControlLogRow["kind"], number>> {
  const rows = await db
    .selectFrom("control_logs")
    .select(["kind", sql<number>`count(*)`.as("n")])
    .where("node_id", "=", nodeId)
    .groupBy("kind")
    .execute();
  const out = { command: 0, output: 0, event: 0 };
  for (const r of rows) out[r.kind] = Number(r.n);
  return out;
}
