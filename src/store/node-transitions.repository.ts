import type SQLite from "better-sqlite3";
import type { TransitionSource } from "../protocol/machine.schema.js";
import { perConnection, sqliteOf, type Connection } from "./connection.js";

/**
 * Repository of `node_transitions`, the nodes' flight recorder (docs/history/decisions-2026.md
 * "flight recorder", "recorder cost, compact rows"): one row per node transition that changed the
 * state value or a field the console shows. Plain functions taking the better-sqlite3
 * handle (`Store.sqlite`) first, with statements prepared once per handle: the append runs inside
 * the registry's group commit.
 *
 * Storage (migration 0010): a row holds the `count` transitions one node made in one group commit,
 * `(transition_id, node_id, prev_id, count, entries)`, appended in id order with no per-node
 * index. The row's k-th transition (from 0) has id `transition_id + k`, so ids stay unique and
 * increasing per node (the next row starts after them). `prev_id` names the node's previous row;
 * the node's newest row is `node_client_state.transition_head`, which the caller (the registry's
 * group commit) writes with the node's state. `entries` is a JSON array of `[at, event, source,
 * request_id, route, before, after, changes]` where `before`/`after` are ids of
 * `node_state_values` (each distinct state value JSON stored once; `before` null for a node's
 * first state) and `changes` the JSON object of shown fields.
 *
 * Only {@link deleteNodeTransitionsBelow} opens a transaction (a savepoint inside an open one):
 * the append runs inside the caller's. Each throws the driver's error (`SqliteError`) on failure.
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

/** A stored row as the table holds it. */
interface StoredRow {
  transition_id: number;
  node_id: string;
  prev_id: number | null;
  count: number;
  entries: string;
}

/** One decoded transition of the `entries` column. */
type Entry = [at: number, event: string, source: TransitionSource, requestId: string | null, route: string | null, before: number | null, after: number, changes: unknown];

/** Rows per multi-row INSERT of {@link appendNodeTransitions} (5 parameters each). */
const CHUNK = 64;
const PARAMS = 5;
/** Transitions one row holds at most (a node's transitions of one commit past it take more rows). */
const PER_ROW = 64;

/** A multi-row insert of `n` rows with their ids and `prev_id`s. */
function insertStatement(sqlite: SQLite.Database, n: number): SQLite.Statement {
  const values = Array.from({ length: n }, () => "(?, ?, ?, ?, ?)").join(", ");
  return sqlite.prepare(`INSERT INTO node_transitions (transition_id, node_id, prev_id, count, entries) VALUES ${values}`);
}

const statements = perConnection((sqlite: SQLite.Database) => ({
  /** Multi-row inserts by row count, prepared on first use (at most {@link CHUNK}). */
  inserts: new Map<number, SQLite.Statement>(),
  /**
   * Interned state values, JSON → id, as this connection has read or written them. A write that
   * rolls back may leave an id here that the database no longer has: {@link forgetNodeStateValues}.
   */
  valueIds: new Map<string, number>(),
  /** The same, id → JSON (the reads). */
  values: new Map<number, string>(),
  /** Event types as JSON strings ({@link eventJson}). */
  eventTexts: new Map<string, string>(),
  // The last transition id given (AUTOINCREMENT's counter, moved past each row's last transition:
  // ids are never given again, even after deletes).
  lastId: sqlite.prepare<[], number | null>("SELECT seq FROM sqlite_sequence WHERE name = 'node_transitions'").pluck(),
  setLastId: sqlite.prepare<[number]>("UPDATE sqlite_sequence SET seq = ? WHERE name = 'node_transitions'"),
  valueId: sqlite.prepare<[string], number>("SELECT value_id FROM node_state_values WHERE value = ?").pluck(),
  addValue: sqlite.prepare<[string], number>("INSERT INTO node_state_values (value) VALUES (?) RETURNING value_id").pluck(),
  valueOf: sqlite.prepare<[number], string>("SELECT value FROM node_state_values WHERE value_id = ?").pluck(),
  head: sqlite.prepare<[string], number | null>("SELECT transition_head FROM node_client_state WHERE node_id = ?").pluck(),
  row: sqlite.prepare<[number], StoredRow>("SELECT transition_id, node_id, prev_id, count, entries FROM node_transitions WHERE transition_id = ?"),
  // The newest row of each node of a config: its head (one primary-key lookup per node).
  latestOfConfig: sqlite.prepare<[string], StoredRow>(
    `SELECT t.transition_id, t.node_id, t.prev_id, t.count, t.entries FROM nodes n
       JOIN node_client_state s ON s.node_id = n.node_id
       JOIN node_transitions t ON t.transition_id = s.transition_head
     WHERE n.config_id = ?
     ORDER BY n.node_id`,
  ),
  // The newest row at which the node's chain holds `keep` transitions (counted from the head),
  // and the row below it, if any (walks rows until the count reaches keep).
  cutoff: sqlite.prepare<[{ node: string; keep: number }], { id: number; prev: number | null }>(
    `WITH RECURSIVE chain(id, total, prev) AS (
       SELECT t.transition_id, t.count, t.prev_id FROM node_client_state s
         JOIN node_transitions t ON t.transition_id = s.transition_head
        WHERE s.node_id = @node
       UNION ALL
       SELECT t.transition_id, chain.total + t.count, t.prev_id FROM chain
         JOIN node_transitions t ON t.transition_id = chain.prev
        WHERE chain.total < @keep AND t.node_id = @node
     )
     SELECT id, prev FROM chain WHERE total >= @keep LIMIT 1`,
  ),
  // Up to `limit` + 1 rows of the node's chain right below `cutoff` (the last one is kept).
  below: sqlite.prepare<[{ cutoff: number; node: string; limit: number }], number>(
    `WITH RECURSIVE chain(id, n) AS (
       SELECT prev_id, 1 FROM node_transitions WHERE transition_id = @cutoff AND node_id = @node AND prev_id IS NOT NULL
       UNION ALL
       SELECT t.prev_id, chain.n + 1 FROM chain JOIN node_transitions t ON t.transition_id = chain.id
        WHERE t.prev_id IS NOT NULL AND t.node_id = @node AND chain.n <= @limit
     )
     SELECT id FROM chain ORDER BY n`,
  ).pluck(),
  isOwn: sqlite.prepare<[number, string], number>("SELECT 1 FROM node_transitions WHERE transition_id = ? AND node_id = ?").pluck(),
  relink: sqlite.prepare<[number | null, number]>("UPDATE node_transitions SET prev_id = ? WHERE transition_id = ?"),
  deleteIds: sqlite.prepare<[string]>("DELETE FROM node_transitions WHERE transition_id IN (SELECT value FROM json_each(?))"),
}));

/** The id of a state value's JSON, stored on first sight (inside the caller's transaction). */
function valueIdOf(sqlite: SQLite.Database, json: string): number {
  const s = statements(sqlite);
  let id = s.valueIds.get(json);
  if (id === undefined) {
    id = s.valueId.get(json) ?? s.addValue.get(json);
    if (id === undefined) throw new Error("node_state_values: no id for a state value");
    s.valueIds.set(json, id);
    s.values.set(id, json);
  }
  return id;
}

/** A state value's JSON by id ("null" when the id is unknown: the row reads as having no value). */
function valueJsonOf(sqlite: SQLite.Database, id: number): string {
  const s = statements(sqlite);
  let json = s.values.get(id);
  if (json === undefined) {
    json = s.valueOf.get(id) ?? "null";
    s.values.set(id, json);
  }
  return json;
}

/**
 * Forgets the interned state values this connection cached (call after a transaction that ran
 * {@link appendNodeTransitions} rolled back: a value it stored first is gone with it).
 */
export function forgetNodeStateValues(conn: Connection): void {
  const sqlite = sqliteOf(conn);
  const s = statements(sqlite);
  s.valueIds.clear();
  s.values.clear();
}

/** One transition as stored in a row's `entries`. */
function entryText(sqlite: SQLite.Database, t: NewNodeTransition): string {
  const before = t.value_before === null ? "null" : String(valueIdOf(sqlite, t.value_before));
  const after = valueIdOf(sqlite, t.value_after);
  const requestId = t.request_id === null ? "null" : JSON.stringify(t.request_id);
  const route = t.route === null ? "null" : JSON.stringify(t.route);
  return `[${t.at},${eventJson(sqlite, t.event)},"${t.source}",${requestId},${route},${before},${after},${t.changes}]`;
}

/** `JSON.stringify(event)`, remembered per event type (a machine has few). */
function eventJson(sqlite: SQLite.Database, event: string): string {
  const cache = statements(sqlite).eventTexts;
  let text = cache.get(event);
  if (text === undefined) {
    text = JSON.stringify(event);
    if (cache.size < 1024) cache.set(event, text);
  }
  return text;
}

/**
 * Appends transitions inside the caller's transaction (the registry's group commit): each node's
 * transitions of the batch, in their order, go into one row (more past {@link PER_ROW}) linked to
 * its node's previous row (`headOf(first)` with the node's first transition of the batch: the
 * caller's copy of `node_client_state.transition_head`; null for none). Ids are given in AUTOINCREMENT order,
 * {@link CHUNK} rows per statement. The caller must store the returned heads in
 * `node_client_state.transition_head` in the same transaction.
 * @param headOf the node's newest stored row, asked with the node's first transition of the batch
 * @returns each node's newest row id after the append, keyed by the node's first transition of
 *   the batch, and the row id of each input transition (`rowIds[i]` holds `rows[i]`)
 */
export function appendNodeTransitions<T extends NewNodeTransition>(
  conn: Connection,
  rows: readonly T[],
  headOf: (first: T) => number | null,
): { heads: Map<T, number>; rowIds: number[] } {
  const sqlite = sqliteOf(conn);
  const heads = new Map<T, number>();
  const rowIds = new Array<number>(rows.length);
  if (rows.length === 0) return { heads, rowIds };
  const s = statements(sqlite);
  // Each node's transitions, in order (a node's rows of one commit are adjacent in id): the
  // node's first transition of the batch, and from each the node's next (-1: none). No array per
  // node: a commit of a large fleet touches hundreds of nodes once each.
  const firsts: number[] = [];
  const nextOf = new Int32Array(rows.length).fill(-1);
  const lastOf = new Map<string, number>();
  for (let i = 0; i < rows.length; i++) {
    const nodeId = (rows[i] as NewNodeTransition).node_id;
    const last = lastOf.get(nodeId);
    if (last === undefined) firsts.push(i);
    else nextOf[last] = i;
    lastOf.set(nodeId, i);
  }
  let next = (s.lastId.get() ?? 0) + 1;
  const params: unknown[] = [];
  const flush = () => {
    const n = params.length / PARAMS;
    let insert = s.inserts.get(n);
    if (insert === undefined) s.inserts.set(n, (insert = insertStatement(sqlite, n)));
    insert.run(params);
    params.length = 0;
  };
  for (const firstIndex of firsts) {
    const first = rows[firstIndex] as T;
    let prev = headOf(first);
    for (let i = firstIndex; i !== -1; ) {
      const id = next;
      let entries = "[";
      let count = 0;
      for (; i !== -1 && count < PER_ROW; i = nextOf[i] as number, count++) {
        entries += (count === 0 ? "" : ",") + entryText(sqlite, rows[i] as NewNodeTransition);
        rowIds[i] = id;
      }
      params.push(id, first.node_id, prev, count, `${entries}]`);
      next += count;
      prev = id;
      if (params.length === CHUNK * PARAMS) flush();
    }
    heads.set(first, prev as number);
  }
  if (params.length > 0) flush();
  // The counter moves past the last row's last transition (SQLite moved it to that row's id only).
  s.setLastId.run(next - 1);
  return { heads, rowIds };
}

/** A row's transitions as callers see them, oldest first (state values as JSON). */
function publicRows(sqlite: SQLite.Database, r: StoredRow): NodeTransitionRow[] {
  return (JSON.parse(r.entries) as Entry[]).map((e, k) => publicTransition(sqlite, r, k, e));
}

/** The row's k-th transition as callers see it. */
function publicTransition(sqlite: SQLite.Database, r: StoredRow, k: number, e: Entry): NodeTransitionRow {
  const [at, event, source, requestId, route, before, after, changes] = e;
  return {
    transition_id: r.transition_id + k,
    node_id: r.node_id,
    at,
    event,
    source,
    request_id: requestId,
    route,
    value_before: before === null ? null : valueJsonOf(sqlite, before),
    value_after: valueJsonOf(sqlite, after),
    changes: JSON.stringify(changes),
  };
}

/**
 * One page of a node's transitions, newest first: those with `transition_id` below `before`
 * (exclusive; `Number.MAX_SAFE_INTEGER` for the first page), at most `limit`, among the node's
 * `keep` newest (the cap: rows past it and not yet pruned are not answered). Walks the node's
 * chain from its head: one primary-key lookup per row up to the page's end (at most `keep`).
 */
export function listNodeTransitions(
  conn: Connection,
  nodeId: string,
  before: number,
  limit: number,
  keep = Number.POSITIVE_INFINITY,
): NodeTransitionRow[] {
  const sqlite = sqliteOf(conn);
  const s = statements(sqlite);
  let id: number | null | undefined = s.head.get(nodeId);
  const out: NodeTransitionRow[] = [];
  let walked = 0;
  while (id !== null && id !== undefined && out.length < limit && walked < keep) {
    const row = s.row.get(id);
    if (row === undefined || row.node_id !== nodeId) break;
    // Rows wholly at or above `before` are skipped unparsed.
    if (row.transition_id >= before) walked += row.count;
    else {
      const entries = JSON.parse(row.entries) as Entry[];
      for (let k = entries.length - 1; k >= 0 && out.length < limit && walked < keep; k--, walked++) {
        if (row.transition_id + k < before) out.push(publicTransition(sqlite, row, k, entries[k] as Entry));
      }
    }
    id = row.prev_id;
  }
  return out;
}

/**
 * The newest transition of each node of a config (the mesh page's "last transition" column), ordered by `node_id`. A node without any recorded transition has no row; a
 * config that does not exist answers none (the caller checks it exists).
 */
export function latestNodeTransitionsOfConfig(conn: Connection, configId: string): NodeTransitionRow[] {
  const sqlite = sqliteOf(conn);
  return statements(sqlite)
    .latestOfConfig.all(configId)
    .map((r) => publicRows(sqlite, r).at(-1))
    .filter((r): r is NodeTransitionRow => r !== undefined);
}

/**
 * Rows a node may gain above `keep` before the registry asks retention to cut it back (a quarter
 * of it, rounded down, at least 1): finding the cut-off walks `keep` rows of the chain, so it
 * runs once per that many new rows of a node rather than after every commit.
 */
export function timelineSlack(keep: number): number {
  return Math.max(1, Math.floor(keep / 4));
}

/**
 * The retention cut-off of one node: the id of the newest row at which its chain, counted from
 * the head, holds `keep` transitions, when rows lie below it (one statement walking the rows down
 * to it). Rows below it are past the cap.
 * @param keep transitions kept per node, >= 1
 * @returns the cut-off row's id, or undefined when the node is within the cap
 */
export function transitionCutoff(conn: Connection, nodeId: string, keep: number): number | undefined {
  const sqlite = sqliteOf(conn);
  const r = statements(sqlite).cutoff.get({ node: nodeId, keep });
  return r === undefined || r.prev === null ? undefined : r.id;
}

/**
 * Deletes up to `limit` of the node's rows below `cutoff` (one bounded chunk): the ones right
 * below it on the chain, then links `cutoff` to the first row left, so the chain stays whole
 * between chunks.
 * @returns the number of rows deleted (0 when `cutoff` is no longer one of the node's rows)
 */
export function deleteNodeTransitionsBelow(conn: Connection, nodeId: string, cutoff: number, limit: number): number {
  const sqlite = sqliteOf(conn);
  const s = statements(sqlite);
  return sqlite.transaction(() => {
    if (s.isOwn.get(cutoff, nodeId) === undefined) return 0;
    const ids = s.below.all({ cutoff, node: nodeId, limit });
    const kept = ids.length > limit ? (ids[limit] ?? null) : null;
    const doomed = ids.slice(0, limit);
    if (doomed.length > 0) s.deleteIds.run(JSON.stringify(doomed));
    s.relink.run(kept, cutoff);
    return doomed.length;
  })();
}
