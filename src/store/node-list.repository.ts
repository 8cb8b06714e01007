import type SQLite from "better-sqlite3";
import { likePattern } from "./configs.repository.js";
import { perConnection, sqliteOf, type Connection } from "./connection.js";
import { NODE_VIEW_COLUMNS } from "./nodes.repository.js";
import type { NodeClientStateRow, NodeRow } from "./schema.js";

/**
 * Pages, filters and state counts of a config's nodes, for configs of thousands of nodes.
 * Keyset pagination on `(created_at, node_id)` within a config, served by the index
 * `nodes_config_created` (migration 0008): a page costs the rows it reads, not an OFFSET walk,
 * and rows inserted between two pages never shift the next page.
 *
 * Presence and sync state are the derivations of `clientView` (src/services/views.ts; spec
 * §3.1, §3.5) written in SQL ({@link PRESENCE_SQL}, {@link SYNC_SQL}) so that they can be
 * filtered and counted in the store; test/http/pagination.test.ts checks both against
 * `clientView` for every combination of the inputs.
 *
 * Plain functions taking the better-sqlite3 handle (`Store.sqlite`) first, synchronous, with
 * statements prepared once per handle and SQL shape. Each throws the driver's `SqliteError`.
 */

/** The derived sync state of a node: spec §3.5's `latest`/`pending`, or `static` (no agent). */
export type NodeSyncState = "latest" | "pending" | "static";

/** Filters of a node list; an absent field does not filter. */
export interface NodeListFilter {
  /** Derived presence (spec §3.1), as the node view shows it. */
  presence?: "online" | "dropped" | "offline" | undefined;
  /** The stored mode (what the node was created as), not the effective one. */
  mode?: "static" | "dynamic" | undefined;
  sync?: NodeSyncState | undefined;
  /** Case-insensitive (ASCII) substring of name, tunnel address, public address or a tag. */
  q?: string | undefined;
}

/** A position in a node list: the sort key of the last row of the previous page. */
export interface NodeListPosition {
  created_at: number;
  node_id: string;
}

/** The columns of a node that its view shows: never its private key (its config text is not in the row). */
export type NodeListRow = Omit<NodeRow, "private_key" | "mesh_seq" | "auto_pair">;

/** One node row of a page with its client state (absent when the node has no client row). */
export interface NodePageRow {
  node: NodeListRow;
  client: NodeClientStateRow | undefined;
}

/** The columns of a node's client state that its view shows (`nodeView`, src/services/views.ts). */
export type NodeClientViewRow = Pick<NodeClientStateRow, "client_initialized" | "client_presence_state" | "runtime_state" | "last_reachable_at" | "client_version">;

/** How many nodes of a config are in each state, and how many match the filter. */
export interface NodeStateCounts {
  total: number;
  matching: number;
  presence: { online: number; dropped: number; offline: number };
  mode: { static: number; dynamic: number };
  sync: { latest: number; pending: number; static: number };
}

// `@mqtt` is 1 when MQTT services are enabled: dynamic nodes count as static otherwise (spec §1.7).
const DYNAMIC_SQL = "(n.mode = 'dynamic' AND @mqtt = 1)";
/** clientView's presence: the stored presence of an initialized dynamic node, else offline (spec §3.1). */
export const PRESENCE_SQL = `(CASE WHEN ${DYNAMIC_SQL} AND cs.client_initialized = 1 THEN cs.client_presence_state ELSE 'offline' END)`;
/** clientView's sync state: static without an agent; latest iff the confirmed sha is the staged one (spec §3.5). */
export const SYNC_SQL = `(CASE WHEN NOT ${DYNAMIC_SQL} THEN 'static'
  WHEN n.staged_config_sha256 IS NOT NULL AND n.confirmed_config_sha256 = n.staged_config_sha256 THEN 'latest'
  ELSE 'pending' END)`;
const TEXT_SQL = `(n.name LIKE @q ESCAPE '\\' OR n.address LIKE @q ESCAPE '\\' OR n.public_address LIKE @q ESCAPE '\\'
  OR EXISTS (SELECT 1 FROM node_tags t WHERE t.node_id = n.node_id AND t.tag LIKE @q ESCAPE '\\'))`;

/** The WHERE conditions of a filter (named parameters `@presence`, `@mode`, `@sync`, `@q`). */
function filterSql(filter: NodeListFilter): string[] {
  const where: string[] = [];
  if (filter.presence !== undefined) where.push(`${PRESENCE_SQL} = @presence`);
  if (filter.mode !== undefined) where.push("n.mode = @mode");
  if (filter.sync !== undefined) where.push(`${SYNC_SQL} = @sync`);
  if (filter.q !== undefined && filter.q !== "") where.push(TEXT_SQL);
  return where;
}

function filterParams(filter: NodeListFilter, mqttEnabled: boolean): Record<string, unknown> {
  const params: Record<string, unknown> = { mqtt: mqttEnabled ? 1 : 0 };
  if (filter.presence !== undefined) params.presence = filter.presence;
  if (filter.mode !== undefined) params.mode = filter.mode;
  if (filter.sync !== undefined) params.sync = filter.sync;
  if (filter.q !== undefined && filter.q !== "") params.q = likePattern(filter.q);
  return params;
}

// Statements by SQL text, per connection: a handful of filter shapes, each prepared once.
const prepared = perConnection(() => new Map<string, SQLite.Statement>());
function statement(sqlite: SQLite.Database, text: string): SQLite.Statement {
  const cache = prepared(sqlite);
  let s = cache.get(text);
  if (s === undefined) {
    s = sqlite.prepare(text);
    cache.set(text, s);
  }
  return s;
}

const CLIENT_COLUMNS = [
  "client_initialized",
  "client_presence_state",
  "runtime_state",
  "last_reachable_at",
  "last_signal_at",
  "client_version",
  "platform",
  "hostname",
  "mqtt_username",
  "mqtt_password_hash",
  "boot_id",
  "session_id",
  "machine_snapshot",
  "machine_version",
  "updated_at",
] as const;

/**
 * The sort key of the `n`-th node of a config after `after` (exclusive) in list order, or
 * undefined when fewer follow: the end of a bounded scan. Reads only the index
 * `nodes_config_created` (covering), about `n` entries.
 */
export function nodeScanBoundary(conn: Connection, configId: string, after: NodeListPosition | undefined, n: number): NodeListPosition | undefined {
  const sqlite = sqliteOf(conn);
  const text = `SELECT created_at, node_id FROM nodes INDEXED BY nodes_config_created WHERE config_id = @config_id
    ${after === undefined ? "" : "AND (created_at, node_id) > (@after_at, @after_id)"} ORDER BY created_at, node_id LIMIT 1 OFFSET @skip`;
  const params = { config_id: configId, skip: n - 1, ...(after === undefined ? {} : { after_at: after.created_at, after_id: after.node_id }) };
  return statement(sqlite, text).get(params) as NodeListPosition | undefined;
}

/**
 * One page of a config's nodes in `(created_at, node_id)` order, after `after` (exclusive;
 * undefined for the first page) and up to `until` (inclusive; undefined: to the end), matching
 * `filter`.
 * @param limit rows wanted, >= 1; up to `limit + 1` are returned so that the caller knows
 *   whether another page follows
 * @returns the rows with their client state, in order
 */
export function nodePage(
  conn: Connection,
  configId: string,
  filter: NodeListFilter,
  after: NodeListPosition | undefined,
  limit: number,
  mqttEnabled: boolean,
  until?: NodeListPosition,
): NodePageRow[] {
  const sqlite = sqliteOf(conn);
  const where = ["n.config_id = @config_id", ...filterSql(filter)];
  if (after !== undefined) where.push("(n.created_at, n.node_id) > (@after_at, @after_id)");
  if (until !== undefined) where.push("(n.created_at, n.node_id) <= (@until_at, @until_id)");
  const text = `SELECT ${NODE_VIEW_COLUMNS.map((c) => `n.${c}`).join(", ")}, ${CLIENT_COLUMNS.map((c) => `cs.${c} AS cs_${c}`).join(", ")}, cs.node_id AS cs_node_id
    FROM nodes n INDEXED BY nodes_config_created LEFT JOIN node_client_state cs ON cs.node_id = n.node_id
    WHERE ${where.join(" AND ")} ORDER BY n.created_at, n.node_id LIMIT @limit`;
  const params = { ...filterParams(filter, mqttEnabled), config_id: configId, limit: limit + 1 };
  if (after !== undefined) Object.assign(params, { after_at: after.created_at, after_id: after.node_id });
  if (until !== undefined) Object.assign(params, { until_at: until.created_at, until_id: until.node_id });
  const rows = statement(sqlite, text).all(params) as Array<Record<string, unknown>>;
  return rows.map(splitRow);
}

/** Splits a joined row into the node row and its client-state row. */
function splitRow(row: Record<string, unknown>): NodePageRow {
  const node: Record<string, unknown> = {};
  const client: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    if (key.startsWith("cs_")) client[key.slice(3)] = value;
    else node[key] = value;
  }
  return {
    node: node as unknown as NodeListRow,
    client: client.node_id === null ? undefined : (client as unknown as NodeClientStateRow),
  };
}

/**
 * Tags of the given nodes: node_id → tags sorted by name (one query for a page's nodes).
 * @param nodeIds at most a page (<= 1000: one prepared statement per length is kept)
 */
export function tagsOfNodes(conn: Connection, nodeIds: readonly string[]): Map<string, string[]> {
  const sqlite = sqliteOf(conn);
  const out = new Map<string, string[]>();
  if (nodeIds.length === 0) return out;
  const text = `SELECT node_id, tag FROM node_tags WHERE node_id IN (${nodeIds.map(() => "?").join(", ")}) ORDER BY tag`;
  const rows = statement(sqlite, text).all(...nodeIds) as Array<{ node_id: string; tag: string }>;
  for (const r of rows) {
    const list = out.get(r.node_id) ?? [];
    list.push(r.tag);
    out.set(r.node_id, list);
  }
  return out;
}

/**
 * Every node of a config in list order with the client-state columns its view shows, each
 * passed to `f` as it is read: the mesh page's workspace (`GET /api/v1/configs/{id}`, read
 * for every node of a config of up to 5,000 nodes). One statement over the covering index
 * `nodes_views` (migration 0012) and the client-state rows by key; never a node's private key or config text, nor a client's machine
 * snapshot or credentials. Read in raw mode (arrays, not objects keyed by column name): at 5,000
 * nodes better-sqlite3's per-column object building was the largest part of the read
 * (docs/history/decisions-2026.md "the workspace read"); each row object lives only while `f` runs.
 * @returns what `f` returned for each node, in list order
 */
export function mapConfigNodes<T>(conn: Connection, configId: string, f: (node: NodeListRow, client: NodeClientViewRow | undefined) => T): T[] {
  const sqlite = sqliteOf(conn);
  // config_id is the parameter's (one string fewer per row).
  const text = `SELECT n.node_id, n.name, n.mode, n.interface_name, n.address, n.public_address, n.listen_port, n.public_key,
      n.staged_config_version, n.staged_config_sha256, n.confirmed_config_version, n.confirmed_config_sha256, n.created_at, n.updated_at,
      cs.node_id IS NOT NULL, cs.client_initialized, cs.client_presence_state, cs.runtime_state, cs.last_reachable_at, cs.client_version, n.hub
    FROM nodes n INDEXED BY nodes_views LEFT JOIN node_client_state cs ON cs.node_id = n.node_id
    WHERE n.config_id = ? ORDER BY n.created_at, n.node_id`;
  const rows = statement(sqlite, text).raw(true).all(configId) as ConfigNodeTuple[];
  return rows.map((r) => {
    const node: NodeListRow = {
      node_id: r[0],
      config_id: configId,
      name: r[1],
      mode: r[2],
      interface_name: r[3],
      address: r[4],
      public_address: r[5],
      listen_port: r[6],
      public_key: r[7],
      staged_config_version: r[8],
      staged_config_sha256: r[9],
      confirmed_config_version: r[10],
      confirmed_config_sha256: r[11],
      created_at: r[12],
      updated_at: r[13],
      hub: r[20],
    };
    const client: NodeClientViewRow | undefined =
      r[14] === 0
        ? undefined
        : { client_initialized: r[15], client_presence_state: r[16], runtime_state: r[17], last_reachable_at: r[18], client_version: r[19] };
    return f(node, client);
  });
}

/** A row of {@link mapConfigNodes}' statement in raw mode, its columns in SELECT order. */
type ConfigNodeTuple = [
  node_id: string,
  name: string,
  mode: NodeListRow["mode"],
  interface_name: string,
  address: string,
  public_address: string | null,
  listen_port: number | null,
  public_key: string,
  staged_config_version: number,
  staged_config_sha256: string | null,
  confirmed_config_version: number | null,
  confirmed_config_sha256: string | null,
  created_at: number,
  updated_at: number,
  /** 1 when the node has a client-state row, else 0 (the LEFT JOIN found none). */
  has_client: 0 | 1,
  client_initialized: NodeClientViewRow["client_initialized"],
  client_presence_state: NodeClientViewRow["client_presence_state"],
  runtime_state: NodeClientViewRow["runtime_state"],
  last_reachable_at: number | null,
  client_version: string | null,
  hub: 0 | 1,
];

/** Tags of every node of a config: node_id → tags sorted by name (raw mode, as {@link mapConfigNodes}). */
export function configTagsByNode(conn: Connection, configId: string): Map<string, string[]> {
  const sqlite = sqliteOf(conn);
  const text = `SELECT t.node_id, t.tag FROM node_tags t JOIN nodes n ON n.node_id = t.node_id WHERE n.config_id = ? ORDER BY t.tag`;
  const rows = statement(sqlite, text).raw(true).all(configId) as Array<[string, string]>;
  const out = new Map<string, string[]>();
  for (const [nodeId, tag] of rows) {
    const list = out.get(nodeId);
    if (list === undefined) out.set(nodeId, [tag]);
    else list.push(tag);
  }
  return out;
}

/** Counts with every figure 0: the start of a sum of {@link nodeStateCounts} over ranges. */
export function emptyNodeStateCounts(): NodeStateCounts {
  return {
    total: 0,
    matching: 0,
    presence: { online: 0, dropped: 0, offline: 0 },
    mode: { static: 0, dynamic: 0 },
    sync: { latest: 0, pending: 0, static: 0 },
  };
}

/**
 * Adds to `into` the counts of a config's nodes in the list range (`after`, `until`] (either
 * end open when undefined) by derived presence, stored mode and derived sync state, and how many
 * of them match `filter`: one pass over the range. Callers count a large config range by range
 * (`nodeScanBoundary`), so that no statement holds the event loop for long.
 */
export function nodeStateCounts(
  conn: Connection,
  configId: string,
  filter: NodeListFilter,
  mqttEnabled: boolean,
  range: { after?: NodeListPosition | undefined; until?: NodeListPosition | undefined } = {},
  into: NodeStateCounts = emptyNodeStateCounts(),
): NodeStateCounts {
  const sqlite = sqliteOf(conn);
  const conditions = filterSql(filter);
  const matching = conditions.length === 0 ? "1" : conditions.join(" AND ");
  const where = ["n.config_id = @config_id"];
  const params: Record<string, unknown> = { ...filterParams(filter, mqttEnabled), config_id: configId };
  if (range.after !== undefined) {
    where.push("(n.created_at, n.node_id) > (@after_at, @after_id)");
    Object.assign(params, { after_at: range.after.created_at, after_id: range.after.node_id });
  }
  if (range.until !== undefined) {
    where.push("(n.created_at, n.node_id) <= (@until_at, @until_id)");
    Object.assign(params, { until_at: range.until.created_at, until_id: range.until.node_id });
  }
  // Sums rather than GROUP BY: one pass, no sorter.
  const text = `SELECT count(*) AS total, coalesce(sum(${matching}), 0) AS matching,
      coalesce(sum(${PRESENCE_SQL} = 'online'), 0) AS online, coalesce(sum(${PRESENCE_SQL} = 'dropped'), 0) AS dropped,
      coalesce(sum(n.mode = 'dynamic'), 0) AS dynamic,
      coalesce(sum(${SYNC_SQL} = 'latest'), 0) AS latest, coalesce(sum(${SYNC_SQL} = 'static'), 0) AS static
    FROM nodes n INDEXED BY nodes_config_created LEFT JOIN node_client_state cs ON cs.node_id = n.node_id
    WHERE ${where.join(" AND ")}`;
  const r = statement(sqlite, text).get(params) as Record<"total" | "matching" | "online" | "dropped" | "dynamic" | "latest" | "static", number>;
  into.total += r.total;
  into.matching += r.matching;
  into.presence.online += r.online;
  into.presence.dropped += r.dropped;
  into.presence.offline += r.total - r.online - r.dropped;
  into.mode.dynamic += r.dynamic;
  into.mode.static += r.total - r.dynamic;
  into.sync.latest += r.latest;
  into.sync.static += r.static;
  into.sync.pending += r.total - r.latest - r.static;
  return into;
}
