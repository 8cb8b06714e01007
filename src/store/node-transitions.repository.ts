import type SQLite from "better-sqlite3";
import type { TransitionSource } from "../protocol/machine.schema.js";
import { perConnection } from "./db.js";

/**
 * Repository of `node_transitions`, the flight recorder of issue 13 (docs/decisions.md "Issue 13:
 * flight recorder"): one row per node transition that changed the state value or a field the
 * console shows. Plain functions taking the better-sqlite3 handle (`Store.sqlite`) first, with
 * statements prepared once per handle: the insert runs inside the registry's group commit.
 *
 * None of them opens a transaction. Each throws the driver's error (`SqliteError`) on failure.
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

/** Rows per multi-row INSERT of {@link insertNodeTransitions} (9 parameters each, well under SQLite's limit). */
const CHUNK = 64;

const COLUMNS = "node_id, at, event, source, request_id, route, value_before, value_after, changes";

/**
 * A multi-row insert of `n` transitions. A row whose node was deleted while it waited for the
 * commit has no node to attach to: it is skipped (`WHERE EXISTS`) rather than failing the whole
 * group commit on the foreign key.
 */
function insertStatement(sqlite: SQLite.Database, n: number): SQLite.Statement {
  const values = Array.from({ length: n }, () => "(?, ?, ?, ?, ?, ?, ?, ?, ?)").join(", ");
  return sqlite.prepare(
    `INSERT INTO node_transitions (${COLUMNS})
     SELECT * FROM (VALUES ${values}) AS v WHERE EXISTS (SELECT 1 FROM nodes WHERE nodes.node_id = v.column1)`,
  );
}

const statements = perConnection((sqlite: SQLite.Database) => ({
  /** Multi-row inserts by row count, prepared on first use (at most {@link CHUNK}). */
  inserts: new Map<number, SQLite.Statement>(),
  page: sqlite.prepare<[string, number, number], NodeTransitionRow>(
    `SELECT * FROM node_transitions WHERE node_id = ? AND transition_id < ? ORDER BY transition_id DESC LIMIT ?`,
  ),
  // The newest row of each node of a config (index node_transitions_node: one seek per node).
  latestOfConfig: sqlite.prepare<[string], NodeTransitionRow>(
    `SELECT t.* FROM nodes n
       JOIN node_transitions t ON t.transition_id =
         (SELECT MAX(transition_id) FROM node_transitions WHERE node_id = n.node_id)
     WHERE n.config_id = ?
     ORDER BY n.node_id`,
  ),
  // The keep-th newest row of a node (index node_transitions_node: walks `keep` entries).
  cutoff: sqlite.prepare<[string, number], { transition_id: number }>(
    "SELECT transition_id FROM node_transitions WHERE node_id = ? ORDER BY transition_id DESC LIMIT 1 OFFSET ?",
  ),
  deleteBelow: sqlite.prepare(
    `DELETE FROM node_transitions WHERE transition_id IN
       (SELECT transition_id FROM node_transitions WHERE node_id = ? AND transition_id < ? ORDER BY transition_id LIMIT ?)`,
  ),
}));

/**
 * Inserts transitions in order, {@link CHUNK} rows per statement (the group commit's hot path: a
 * statement per row cost more than the row). Rows of nodes that no longer exist are skipped.
 */
export function insertNodeTransitions(sqlite: SQLite.Database, rows: readonly NewNodeTransition[]): void {
  const s = statements(sqlite);
  for (let from = 0; from < rows.length; from += CHUNK) {
    const n = Math.min(CHUNK, rows.length - from);
    let insert = s.inserts.get(n);
    if (insert === undefined) s.inserts.set(n, (insert = insertStatement(sqlite, n)));
    const params: unknown[] = [];
    for (let i = from; i < from + n; i++) {
      const t = rows[i] as NewNodeTransition;
      params.push(t.node_id, t.at, t.event, t.source, t.request_id, t.route, t.value_before, t.value_after, t.changes);
    }
    insert.run(params);
  }
}

/** Inserts one transition (a no-op when its node no longer exists). */
export function insertNodeTransition(sqlite: SQLite.Database, t: NewNodeTransition): void {
  insertNodeTransitions(sqlite, [t]);
}

/**
 * One page of a node's transitions, newest first: those with `transition_id` below `before`
 * (exclusive; `Number.MAX_SAFE_INTEGER` for the first page), at most `limit`.
 */
export function listNodeTransitions(sqlite: SQLite.Database, nodeId: string, before: number, limit: number): NodeTransitionRow[] {
  return statements(sqlite).page.all(nodeId, before, limit);
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
 * The retention cut-off of one node: the `transition_id` of its `keep`-th newest row. Rows below
 * it are past the cap.
 * @param keep rows kept per node, >= 1
 * @returns the cut-off, or undefined when the node has at most `keep` rows
 */
export function transitionCutoff(sqlite: SQLite.Database, nodeId: string, keep: number): number | undefined {
  return statements(sqlite).cutoff.get(nodeId, keep - 1)?.transition_id;
}

/**
 * Deletes up to `limit` of the oldest rows of one node below `cutoff` (one bounded chunk).
 * @returns the number of rows deleted
 */
export function deleteNodeTransitionsBelow(sqlite: SQLite.Database, nodeId: string, cutoff: number, limit: number): number {
  return statements(sqlite).deleteBelow.run(nodeId, cutoff, limit).changes;
}
