import type SQLite from "better-sqlite3";
import type { TransitionSource } from "../protocol/machine.schema.js";
import { perConnection } from "./db.js";

/**
 * Repository of `node_transitions`, the flight recorder of issue 13 (docs/decisions.md "Issue 13:
 * flight recorder"): one row per node transition that changed the state value or a field the
 * console shows. Plain functions taking the better-sqlite3 handle (`Store.sqlite`) first, with
 * statements prepared once per handle: the insert runs inside the registry's group commit.
 *
 * Only {@link deleteNodeTransitionsBelow} opens a transaction (a savepoint inside an open one):
 * the insert runs inside the caller's. Each throws the driver's error (`SqliteError`) on failure.
 */

export type { TransitionSource };

/** A transition to store. */
export interface NewNodeTransition {
  node_id: string;
  /** When the event happened (the event's `at`), ms since the epoch. */
  at: number;
  /** The machine event type (`mqtt.signal`, `xstate.after.detectTimeout.node.probe.waiting`, ...). */
  event: string;
  source: TransitionSource;
  /** The ACK's `request_id` (source `ack`), else null. */
  request_id: string | null;
  /** `METHOD /route/:pattern` (source `rest`), else null. */
  route: string | null;
  /** State value before, JSON; null for a node's first state. */
  value_before: string | null;
  /** State value after, JSON. */
  value_after: string;
  /** The shown context fields that changed, JSON `{field: [before, after]}`. */
  changes: string;
}

/** A stored transition. */
export interface NodeTransitionRow extends NewNodeTransition {
  transition_id: number;
}

const COLUMNS = "transition_id, node_id, at, event, source, request_id, route, value_before, value_after, changes";

/** Rows per multi-row INSERT of {@link insertNodeTransitions} (11 parameters each, well under SQLite's limit). */
const CHUNK = 64;

/** A multi-row insert of `n` transitions with their ids and `prev_id`s. */
function insertStatement(sqlite: SQLite.Database, n: number): SQLite.Statement {
  const values = Array.from({ length: n }, () => "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ");
  return sqlite.prepare(`INSERT INTO node_transitions (${COLUMNS}, prev_id) VALUES ${values}`);
}

/** A stored row with its link to the node's previous row (null for the oldest kept). */
type ChainRow = NodeTransitionRow & { prev_id: number | null };

/**
 * Storage (migration 0006, docs/decisions.md "Issue 13: recorder cost"): rows are appended in
 * `transition_id` order with no per-node index (an index entry per node per group commit dirtied
 * one page per node and cost +25–35 % CPU per state change). Each row names its node's previous
 * row (`prev_id`); `node_transition_heads` names each node's newest row and counts its rows. A
 * node's rows are read by walking the chain from its head (one primary-key lookup per row).
 */
const statements = perConnection((sqlite: SQLite.Database) => ({
  /** Multi-row inserts with explicit ids by row count, prepared on first use (at most {@link CHUNK}). */
  inserts: new Map<number, SQLite.Statement>(),
  // The id the next row gets (AUTOINCREMENT's counter: ids are never reused, even after deletes).
  lastId: sqlite.prepare<[], number | null>("SELECT seq FROM sqlite_sequence WHERE name = 'node_transitions'").pluck(),
  // Of the nodes named (a JSON array), those that still exist, with their newest row if any.
  heads: sqlite.prepare<[string], { node_id: string; head_id: number | null }>(
    `SELECT n.node_id, h.head_id FROM json_each(?) j
       JOIN nodes n ON n.node_id = j.value
       LEFT JOIN node_transition_heads h ON h.node_id = n.node_id`,
  ),
  moveHead: sqlite.prepare<[string, number, number]>(
    `INSERT INTO node_transition_heads (node_id, head_id, rows) VALUES (?, ?, ?)
     ON CONFLICT (node_id) DO UPDATE SET head_id = excluded.head_id, rows = rows + excluded.rows`,
  ),
  head: sqlite.prepare<[string], { head_id: number; rows: number }>("SELECT head_id, rows FROM node_transition_heads WHERE node_id = ?"),
  row: sqlite.prepare<[number], ChainRow>(`SELECT ${COLUMNS}, prev_id FROM node_transitions WHERE transition_id = ?`),
  // The newest row of each node of a config: its head (one primary-key lookup per node).
  latestOfConfig: sqlite.prepare<[string], NodeTransitionRow>(
    `SELECT ${COLUMNS.split(", ").map((c) => `t.${c}`).join(", ")} FROM nodes n
       JOIN node_transition_heads h ON h.node_id = n.node_id
       JOIN node_transitions t ON t.transition_id = h.head_id
     WHERE n.config_id = ?
     ORDER BY n.node_id`,
  ),
  relink: sqlite.prepare<[number | null, number]>("UPDATE node_transitions SET prev_id = ? WHERE transition_id = ?"),
  deleteRow: sqlite.prepare<[number]>("DELETE FROM node_transitions WHERE transition_id = ?"),
  uncount: sqlite.prepare<[number, string]>("UPDATE node_transition_heads SET rows = rows - ? WHERE node_id = ?"),
}));

/**
 * Inserts transitions in order, each linked to its node's previous row, then moves each node's
 * head once (the group commit's hot path: one lookup of the batch's nodes, appends of {@link CHUNK}
 * rows per statement with ids given in order, one small head row per node; no per-node index).
 * Rows of nodes that no longer exist are skipped.
 */
export function insertNodeTransitions(sqlite: SQLite.Database, rows: readonly NewNodeTransition[]): void {
  if (rows.length === 0) return;
  const s = statements(sqlite);
  const heads = new Map<string, { id: number | null; rows: number }>();
  for (const t of rows) if (!heads.has(t.node_id)) heads.set(t.node_id, { id: null, rows: -1 });
  for (const h of s.heads.all(JSON.stringify([...heads.keys()]))) heads.set(h.node_id, { id: h.head_id, rows: 0 });
  let id = s.lastId.get() ?? 0;
  const params: unknown[] = [];
  const flush = () => {
    const n = params.length / 11;
    let insert = s.inserts.get(n);
    if (insert === undefined) s.inserts.set(n, (insert = insertStatement(sqlite, n)));
    insert.run(params);
    params.length = 0;
  };
  for (const t of rows) {
    const head = heads.get(t.node_id);
    if (head === undefined || head.rows < 0) continue;
    id++;
    params.push(id, t.node_id, t.at, t.event, t.source, t.request_id, t.route, t.value_before, t.value_after, t.changes, head.id);
    head.id = id;
    head.rows++;
    if (params.length === CHUNK * 11) flush();
  }
  if (params.length > 0) flush();
  for (const [nodeId, head] of heads) if (head.rows > 0 && head.id !== null) s.moveHead.run(nodeId, head.id, head.rows);
}

/** Inserts one transition (a no-op when its node no longer exists). */
export function insertNodeTransition(sqlite: SQLite.Database, t: NewNodeTransition): void {
  insertNodeTransitions(sqlite, [t]);
}

/** A stored row without its chain link (the shape callers see). */
function publicRow({ prev_id: _, ...row }: ChainRow): NodeTransitionRow {
  return row;
}

/**
 * One page of a node's transitions, newest first: those with `transition_id` below `before`
 * (exclusive; `Number.MAX_SAFE_INTEGER` for the first page), at most `limit`, among the node's
 * `keep` newest (the cap: rows past it and not yet pruned are not answered). Walks the node's
 * chain from its head: one primary-key lookup per row up to the page's end (at most `keep`).
 */
export function listNodeTransitions(
  sqlite: SQLite.Database,
  nodeId: string,
  before: number,
  limit: number,
  keep = Number.POSITIVE_INFINITY,
): NodeTransitionRow[] {
  const s = statements(sqlite);
  let id: number | null | undefined = s.head.get(nodeId)?.head_id;
  const out: NodeTransitionRow[] = [];
  for (let walked = 0; id !== null && id !== undefined && out.length < limit && walked < keep; walked++) {
    const row = s.row.get(id);
    if (row === undefined || row.node_id !== nodeId) break;
    if (row.transition_id < before) out.push(publicRow(row));
    id = row.prev_id;
  }
  return out;
}

/**
 * The newest transition of each node of a config (issue 13 item 5, the mesh page's "last
 * transition"), ordered by `node_id`. A node without any recorded transition has no row; a
 * config that does not exist answers none (the caller checks it exists).
 */
export function latestNodeTransitionsOfConfig(sqlite: SQLite.Database, configId: string): NodeTransitionRow[] {
  return statements(sqlite).latestOfConfig.all(configId);
}

/**
 * Rows a node may hold above `keep` before retention cuts it back to `keep` (an eighth of it,
 * rounded down: 0 for a cap under 8). Finding the cut-off walks `keep` rows of the chain, so it
 * runs once per `keep / 8` new rows of a node rather than after every commit.
 */
export function timelineSlack(keep: number): number {
  return Math.floor(keep / 8);
}

/**
 * The retention cut-off of one node: the `transition_id` of its `keep`-th newest row, once it holds
 * more than `keep` + {@link timelineSlack} rows. Rows below it are past the cap.
 * @param keep rows kept per node, >= 1
 * @returns the cut-off, or undefined when the node is within the cap (plus slack)
 */
export function transitionCutoff(sqlite: SQLite.Database, nodeId: string, keep: number): number | undefined {
  const s = statements(sqlite);
  const head = s.head.get(nodeId);
  if (head === undefined || head.rows <= keep + timelineSlack(keep)) return undefined;
  let id: number | null = head.head_id;
  for (let n = 1; n < keep && id !== null; n++) id = s.row.get(id)?.prev_id ?? null;
  return id ?? undefined;
}

/**
 * Deletes up to `limit` of the node's rows below `cutoff` (one bounded chunk): the ones right
 * below it on the chain, then links `cutoff` to the first row left, so the chain stays whole
 * between chunks. The head's row count goes down by as many.
 * @returns the number of rows deleted (0 when `cutoff` is no longer one of the node's rows)
 */
export function deleteNodeTransitionsBelow(sqlite: SQLite.Database, nodeId: string, cutoff: number, limit: number): number {
  const s = statements(sqlite);
  return sqlite.transaction(() => {
    const top = s.row.get(cutoff);
    if (top === undefined || top.node_id !== nodeId) return 0;
    const ids: number[] = [];
    let id = top.prev_id;
    while (id !== null && ids.length < limit) {
      const row = s.row.get(id);
      if (row === undefined) {
        id = null;
        break;
      }
      ids.push(id);
      id = row.prev_id;
    }
    for (const del of ids) s.deleteRow.run(del);
    s.relink.run(id, cutoff);
    if (ids.length > 0) s.uncount.run(ids.length, nodeId);
    return ids.length;
  })();
}
