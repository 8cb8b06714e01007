import { sql } from "kysely";
import type { Db } from "./connection.js";
import type { MeshPairRow, NodeRow } from "./schema.js";

/** Repository of `mesh_pairs`. Pairs are stored with `node_a < node_b`. */

/** The stored order of two node ids. */
export function orderPair(x: string, y: string): [string, string] {
  return x < y ? [x, y] : [y, x];
}

export async function insertPair(db: Db, row: MeshPairRow): Promise<void> {
  await db.insertInto("mesh_pairs").values(row).execute();
}

export async function listPairs(db: Db, configId: string): Promise<MeshPairRow[]> {
  return db.selectFrom("mesh_pairs").selectAll().where("config_id", "=", configId).orderBy("created_at").orderBy("pair_id").execute();
}

/** The sort key of the mesh-pair list: creation time (ms), then pair id. */
export interface PairPosition {
  created_at: number;
  pair_id: string;
}

/**
 * One page of a config's pairs in `(created_at, pair_id)` order after `after` (exclusive),
 * `limit + 1` rows at most (the extra row tells the caller another page exists). With `nodeId`
 * only that node's pairs: those it is `node_a` of through `UNIQUE (node_a, node_b)`, those it is
 * `node_b` of by probing that index with each node of the config sorting before it (there is
 * no index on `node_b`, migration 0011): O(nodes of the config), then a sort of the node's
 * n − 1 pairs. Without it through `mesh_pairs_config_created` (O(page)), never a sort of the
 * config's n²/2 rows.
 */
export async function pairPage(
  db: Db,
  configId: string,
  opts: { nodeId?: string | undefined; after?: PairPosition | undefined; limit: number },
): Promise<MeshPairRow[]> {
  const { nodeId, after, limit } = opts;
  const keyset = after === undefined ? sql`` : sql`AND (p.created_at, p.pair_id) > (${after.created_at}, ${after.pair_id})`;
  if (nodeId !== undefined) {
    const { rows } = await sql<MeshPairRow>`
      SELECT p.* FROM mesh_pairs p WHERE p.node_a = ${nodeId} AND +p.config_id = ${configId} ${keyset}
      UNION ALL
      SELECT p.* FROM nodes o CROSS JOIN mesh_pairs p ON p.node_a = o.node_id AND p.node_b = ${nodeId}
        WHERE o.config_id = ${configId} AND o.node_id < ${nodeId} AND +p.config_id = ${configId} ${keyset}
      ORDER BY created_at, pair_id LIMIT ${limit + 1}`.execute(db);
    return rows;
  }
  const { rows } = await sql<MeshPairRow>`
    SELECT p.* FROM mesh_pairs p WHERE p.config_id = ${configId} ${keyset}
    ORDER BY p.created_at, p.pair_id LIMIT ${limit + 1}`.execute(db);
  return rows;
}

/** What the connection-integrity check (spec §6.5) reads of a pair's side. */
export type PairSideRow = Pick<NodeRow, "node_id" | "public_address" | "listen_port">;

/** The integrity fields of the given nodes (not their keys or config texts), 500 ids per statement. */
export async function pairSides(db: Db, nodeIds: readonly string[]): Promise<Map<string, PairSideRow>> {
  const out = new Map<string, PairSideRow>();
  const ids = [...new Set(nodeIds)];
  for (let i = 0; i < ids.length; i += 500) {
    const rows = await db.selectFrom("nodes").select(["node_id", "public_address", "listen_port"]).where("node_id", "in", ids.slice(i, i + 500)).execute();
    for (const r of rows) out.set(r.node_id, r);
  }
  return out;
}

export async function findPair(db: Db, configId: string, pairId: string): Promise<MeshPairRow | undefined> {
  return db.selectFrom("mesh_pairs").selectAll().where("config_id", "=", configId).where("pair_id", "=", pairId).executeTakeFirst();
}

export async function findPairByNodes(db: Db, x: string, y: string): Promise<MeshPairRow | undefined> {
  const [a, b] = orderPair(x, y);
  return db.selectFrom("mesh_pairs").selectAll().where("node_a", "=", a).where("node_b", "=", b).executeTakeFirst();
}

export async function setPairEnabled(db: Db, pairId: string, enabled: boolean, now: number): Promise<void> {
  await db.updateTable("mesh_pairs").set({ enabled: enabled ? 1 : 0, updated_at: now }).where("pair_id", "=", pairId).execute();
}

export async function deletePair(db: Db, pairId: string): Promise<void> {
  await db.deleteFrom("mesh_pairs").where("pair_id", "=", pairId).execute();
}

/** One mesh pair of a node, seen from that node: the pair's state and the other side's render fields. */
export interface PairOfNode {
  pair_id: string;
  enabled: number;
  /** The other side of the pair. */
  peer: Pick<NodeRow, "node_id" | "name" | "public_key" | "address" | "public_address" | "listen_port" | "mode" | "hub">;
}

/**
 * Every mesh pair a node is a side of, with the other side's fields: the pairs it is `node_a`
 * of through `UNIQUE (node_a, node_b)`, those it is `node_b` of by probing that index with each
 * node of its config sorting before it (no index on `node_b`, migration 0011). O(nodes of the
 * config), never the config's pairs.
 */
export async function listPairsOfNode(db: Db, nodeId: string): Promise<PairOfNode[]> {
  const cols = sql`p.pair_id, p.enabled, n.node_id, n.name, n.public_key, n.address, n.public_address, n.listen_port, n.mode, n.hub`;
  type Row = Omit<PairOfNode, "peer"> & PairOfNode["peer"];
  const { rows } = await sql<Row>`
    SELECT ${cols} FROM mesh_pairs p JOIN nodes n ON n.node_id = p.node_b WHERE p.node_a = ${nodeId}
    UNION ALL
    SELECT ${cols} FROM nodes n CROSS JOIN mesh_pairs p ON p.node_a = n.node_id AND p.node_b = ${nodeId}
      WHERE n.config_id = (SELECT config_id FROM nodes WHERE node_id = ${nodeId}) AND n.node_id < ${nodeId}`.execute(db);
  return rows.map(({ pair_id, enabled, ...peer }) => ({ pair_id, enabled, peer }));
}

/** The base32 alphabet of ids (`newId`): position i is the digit of value i. */
const ID_BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/**
 * Pairs a node just inserted with every other node of its config in one `INSERT … SELECT`
 * (a node joining a full mesh: n − 1 rows without building, binding or compiling them in
 * JavaScript). Rows have `node_a < node_b`, `enabled = 1` and `created_at = updated_at = now`.
 * Their ids are `idPrefix` + 5 base32 digits of the row's number within this write (0-based,
 * big-endian): `idPrefix` must be unique per write (see `autoPairIdPrefix` in the mesh
 * service) and leave room for the 5 digits within the id syntax (DESIGN §3 Ids,
 * `^[a-z0-9][a-z0-9_-]{0,63}$`).
 * @param nodeId the new node (already inserted into `nodes`)
 * @returns the number of pairs inserted (the config's other nodes)
 * @throws SqliteError `SQLITE_CONSTRAINT_PRIMARYKEY`/`_UNIQUE` if a pair with the node exists
 *   already, or if the config had more than 32^5 other nodes (the 5 digits would repeat; no
 *   address pool holds that many)
 */
export async function insertPairsWithAll(db: Db, configId: string, nodeId: string, idPrefix: string, now: number): Promise<number> {
  const digit = (shift: number) => sql`substr(${ID_BASE32}, ((seq >> ${shift}) & 31) + 1, 1)`;
  const res = await sql`
    INSERT INTO mesh_pairs (pair_id, config_id, node_a, node_b, enabled, created_at, updated_at)
    SELECT ${idPrefix} || ${digit(20)} || ${digit(15)} || ${digit(10)} || ${digit(5)} || ${digit(0)},
           ${configId}, min(node_id, ${nodeId}), max(node_id, ${nodeId}), 1, ${now}, ${now}
    FROM (SELECT node_id, row_number() OVER () - 1 AS seq FROM nodes WHERE config_id = ${configId} AND node_id <> ${nodeId})`.execute(db);
  return Number(res.numAffectedRows ?? 0n);
}

/**
 * The hubs of a config, each with the node_ids of the nodes it has an enabled pair with (README
 * "Hubs: meshes behind NAT"): the hubs through the partial index `nodes_hubs` (migration 0015,
 * O(hubs): nothing is read for a config without one), then each hub's pairs
 * ({@link listPairsOfNode}, O(nodes of the config) per hub).
 */
export async function hubPartners(db: Db, configId: string): Promise<Array<[hubId: string, partners: string[]]>> {
  const { rows } = await sql<{ node_id: string }>`SELECT node_id FROM nodes WHERE config_id = ${configId} AND hub = 1 ORDER BY node_id`.execute(db);
  const out: Array<[string, string[]]> = [];
  for (const { node_id } of rows) {
    out.push([node_id, (await listPairsOfNode(db, node_id)).filter((p) => p.enabled === 1).map((p) => p.peer.node_id)]);
  }
  return out;
}
