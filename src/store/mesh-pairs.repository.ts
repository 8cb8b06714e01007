import { sql } from "kysely";
import type { Db } from "./connection.js";
import { insertRemoval, isRemoved, parsePolicyPairId, policyCovers, policyNodesByIds, policyNodesBySeq, policyPage, policyPairIdsOf, policyRow } from "./mesh-policy.js";
import type { MeshPairRow, NodeRow } from "./schema.js";

/**
 * Repository of mesh pairs: the stored rows of `mesh_pairs` (`node_a < node_b`) and the pairs of
 * the full-mesh policy (src/store/mesh-policy.ts), answered alike: every read here gives the
 * pairs as they are to the API (a policy pair as a row with its derived id), every write keeps
 * the exceptions the operator made.
 */

/** The stored order of two node ids. */
export function orderPair(x: string, y: string): [string, string] {
  return x < y ? [x, y] : [y, x];
}

/**
 * Stores a pair the operator made (`POST …/mesh-pairs`): a row, which stands for the pair even
 * when the full-mesh policy covers the two (then it replaces their removal, if any).
 */
export async function insertPair(db: Db, row: MeshPairRow): Promise<void> {
  await db.deleteFrom("mesh_pair_removals").where("node_a", "=", row.node_a).where("node_b", "=", row.node_b).execute();
  await db.insertInto("mesh_pairs").values(row).execute();
}

/** Every pair of a config, the policy's included, in `(created_at, pair_id)` order. O(pairs): for the full re-render only. */
export async function listPairs(db: Db, configId: string): Promise<MeshPairRow[]> {
  const out: MeshPairRow[] = [];
  let after: PairPosition | undefined;
  for (;;) {
    const page = await pairPage(db, configId, { after, limit: 10_000 });
    out.push(...page.slice(0, 10_000));
    const last = page[9_999];
    if (page.length <= 10_000 || last === undefined) return out;
    after = { created_at: last.created_at, pair_id: last.pair_id };
  }
}

/** The sort key of the mesh-pair list: creation time (ms), then pair id. */
export interface PairPosition {
  created_at: number;
  pair_id: string;
}

/** a sorts before b in the list's `(created_at, pair_id)` order. */
function before(a: PairPosition, b: PairPosition): boolean {
  return a.created_at < b.created_at || (a.created_at === b.created_at && a.pair_id < b.pair_id);
}

/**
 * One page of a config's pairs in `(created_at, pair_id)` order after `after` (exclusive),
 * `limit + 1` rows at most (the extra row tells the caller another page exists): the stored
 * rows (through `mesh_pairs_config_created`, or, with `nodeId`, the node's rows as in
 * {@link listPairsOfNode}) merged with the policy's pairs ({@link policyPage}).
 */
export async function pairPage(
  db: Db,
  configId: string,
  opts: { nodeId?: string | undefined; after?: PairPosition | undefined; limit: number },
): Promise<MeshPairRow[]> {
  const stored = await storedPairPage(db, configId, opts);
  const derived = await policyPage(db, configId, opts);
  const out: MeshPairRow[] = [];
  let i = 0;
  let j = 0;
  while (out.length < opts.limit + 1) {
    const x = stored[i];
    const y = derived[j];
    if (x === undefined && y === undefined) break;
    if (y === undefined || (x !== undefined && before(x, y))) {
      out.push(x as MeshPairRow);
      i++;
    } else {
      out.push(y);
      j++;
    }
  }
  return out;
}

/** The stored rows of {@link pairPage}. */
async function storedPairPage(db: Db, configId: string, opts: { nodeId?: string | undefined; after?: PairPosition | undefined; limit: number }): Promise<MeshPairRow[]> {
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

/** The pair `pairId` of `configId`: a stored row, or a policy pair no exception took over. */
export async function findPair(db: Db, configId: string, pairId: string): Promise<MeshPairRow | undefined> {
  const row = await db.selectFrom("mesh_pairs").selectAll().where("config_id", "=", configId).where("pair_id", "=", pairId).executeTakeFirst();
  if (row !== undefined) return row;
  const seqs = parsePolicyPairId(pairId);
  if (seqs === null) return undefined;
  const [x, y] = await policyNodesBySeq(db, seqs);
  if (x === undefined || y === undefined || x.config_id !== configId || y.config_id !== configId || !policyCovers(x, y)) return undefined;
  const pair = await findPairByNodes(db, x.node_id, y.node_id);
  return pair?.pair_id === pairId ? pair : undefined;
}

/** The pair of two nodes: their stored row, else their policy pair unless it was deleted. */
export async function findPairByNodes(db: Db, x: string, y: string): Promise<MeshPairRow | undefined> {
  const [a, b] = orderPair(x, y);
  const row = await db.selectFrom("mesh_pairs").selectAll().where("node_a", "=", a).where("node_b", "=", b).executeTakeFirst();
  if (row !== undefined) return row;
  const nodes = await policyNodesByIds(db, [a, b]);
  const [na, nb] = [nodes.get(a), nodes.get(b)];
  if (na === undefined || nb === undefined || na.config_id !== nb.config_id || !policyCovers(na, nb) || (await isRemoved(db, a, b))) return undefined;
  return policyRow(na.config_id, na, nb);
}

/**
 * Enables or disables `pair` (as {@link findPair} answered it): its row is updated, or, for a
 * policy pair, a row of the same id and creation time is stored, which stands for it from then on.
 */
export async function setPairEnabled(db: Db, pair: MeshPairRow, enabled: boolean, now: number): Promise<void> {
  const res = await db.updateTable("mesh_pairs").set({ enabled: enabled ? 1 : 0, updated_at: now }).where("pair_id", "=", pair.pair_id).executeTakeFirst();
  if (Number(res.numUpdatedRows) > 0) return;
  await db.insertInto("mesh_pairs").values({ ...pair, enabled: enabled ? 1 : 0, updated_at: now }).execute();
}

/** Deletes `pair` (as {@link findPair} answered it): its row, and, when the policy pairs the two, a removal is stored. */
export async function deletePair(db: Db, pair: MeshPairRow): Promise<void> {
  await db.deleteFrom("mesh_pairs").where("pair_id", "=", pair.pair_id).execute();
  const nodes = await policyNodesByIds(db, [pair.node_a, pair.node_b]);
  const [a, b] = [nodes.get(pair.node_a), nodes.get(pair.node_b)];
  if (a !== undefined && b !== undefined && policyCovers(a, b)) await insertRemoval(db, pair.config_id, pair.node_a, pair.node_b);
}

/** One mesh pair of a node, seen from that node: the pair's state and the other side's render fields. */
export interface PairOfNode {
  pair_id: string;
  enabled: number;
  /** The other side of the pair. */
  peer: Pick<NodeRow, "node_id" | "name" | "public_key" | "address" | "public_address" | "listen_port" | "mode" | "hub">;
}

/**
 * Every mesh pair a node is a side of, with the other side's fields: its stored rows (those it is
 * `node_a` of through `UNIQUE (node_a, node_b)`, those it is `node_b` of by probing that index
 * with each node of its config sorting before it: no index on `node_b`, migration 0011), then its
 * policy pairs (the nodes before it when it joined with `auto_pair`, the `auto_pair` nodes after
 * it) that no row or removal takes over, in pages of {@link POLICY_PAGE} nodes by `mesh_seq`.
 * O(nodes of the config), never the config's pairs.
 * @param between awaited between two pages (a write's transaction yields a turn of the event
 *   loop there; a read outside a transaction must not, or a write could land between pages)
 */
export async function listPairsOfNode(db: Db, nodeId: string, between?: () => Promise<void>): Promise<PairOfNode[]> {
  const cols = sql`p.pair_id, p.enabled, n.node_id, n.name, n.public_key, n.address, n.public_address, n.listen_port, n.mode, n.hub`;
  type Row = Omit<PairOfNode, "peer"> & PairOfNode["peer"];
  const { rows } = await sql<Row>`
    SELECT ${cols} FROM mesh_pairs p JOIN nodes n ON n.node_id = p.node_b WHERE p.node_a = ${nodeId}
    UNION ALL
    SELECT ${cols} FROM nodes n CROSS JOIN mesh_pairs p ON p.node_a = n.node_id AND p.node_b = ${nodeId}
      WHERE n.config_id = (SELECT config_id FROM nodes WHERE node_id = ${nodeId}) AND n.node_id < ${nodeId}`.execute(db);
  const out = rows.map(({ pair_id, enabled, ...peer }) => ({ pair_id, enabled, peer }));
  const taken = new Set(out.map((p) => p.peer.node_id));
  const { rows: removed } = await sql<{ other: string }>`
    SELECT node_b AS other FROM mesh_pair_removals WHERE node_a = ${nodeId}
    UNION ALL SELECT node_a AS other FROM mesh_pair_removals WHERE node_b = ${nodeId}`.execute(db);
  for (const r of removed) taken.add(r.other);
  type PolicyRow = PairOfNode["peer"] & { seq: number; own: number };
  let pairIdWith: ((other: number) => string) | undefined;
  for (let after = Number.MIN_SAFE_INTEGER; ; ) {
    const { rows: policy } = await sql<PolicyRow>`
      SELECT n.node_id, n.name, n.public_key, n.address, n.public_address, n.listen_port, n.mode, n.hub, n.mesh_seq AS seq, v.mesh_seq AS own
      FROM nodes v JOIN nodes n ON n.config_id = v.config_id
      WHERE v.node_id = ${nodeId} AND n.mesh_seq > ${after} AND ((n.mesh_seq < v.mesh_seq AND v.auto_pair = 1) OR (n.mesh_seq > v.mesh_seq AND n.auto_pair = 1))
      ORDER BY n.mesh_seq LIMIT ${POLICY_PAGE}`.execute(db);
    for (const { seq, own, ...peer } of policy) {
      pairIdWith ??= policyPairIdsOf(own);
      if (!taken.has(peer.node_id)) out.push({ pair_id: pairIdWith(seq), enabled: 1, peer });
    }
    const last = policy[policy.length - 1];
    if (policy.length < POLICY_PAGE || last === undefined) return out;
    after = last.seq;
    await between?.();
  }
}

/** Policy pairs read per statement by {@link listPairsOfNode} (~8 ms of a 2-core VM each). */
const POLICY_PAGE = 1_000;

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
