/**
 * The full-mesh policy (migration 0016, src/store/migration-0016.ts): a node created with
 * `auto_pair` joined every node of its config that existed then, so the pair of two nodes x, y
 * of a config with `x.mesh_seq < y.mesh_seq` exists by policy when `y.auto_pair = 1`. Such a pair
 * is not stored. It is enabled, was created (and last updated) at `y.created_at`, and its id is
 * {@link policyPairId} of the two `mesh_seq`s. What the operator changed of it is stored: a
 * `mesh_pairs` row for the two stands for the pair (disabled, or re-created under another id),
 * a `mesh_pair_removals` row says it was deleted. Storage grows with what the operator wrote
 * (nodes, exceptions), not with n².
 */
import { sql } from "kysely";
import type { Db } from "./connection.js";
import type { MeshPairRow } from "./schema.js";

/** A node as the policy sees it. */
export interface PolicyNode {
  node_id: string;
  mesh_seq: number;
  auto_pair: number;
  created_at: number;
}

/** Digits of each `mesh_seq` in a policy pair's id: zero-padded, so ids sort as the numbers do. */
const SEQ_DIGITS = 10;
const POLICY_ID = /^pair-(\d{10})-(\d{10})$/;

/**
 * The id of the policy pair of the nodes with `mesh_seq` `earlier` < `later`:
 * `pair-{earlier}-{later}`, each zero-padded to 10 digits (within the id syntax, DESIGN §3 Ids;
 * never produced by `newId`, which has no second dash).
 */
export function policyPairId(earlier: number, later: number): string {
  return `pair-${String(earlier).padStart(SEQ_DIGITS, "0")}-${String(later).padStart(SEQ_DIGITS, "0")}`;
}

/**
 * {@link policyPairId} of `own` with each other node, `own`'s digits padded once: a node's
 * pair list names a pair with every node of its config.
 */
export function policyPairIdsOf(own: number): (other: number) => string {
  const mine = String(own).padStart(SEQ_DIGITS, "0");
  return (other) => (other < own ? `pair-${String(other).padStart(SEQ_DIGITS, "0")}-${mine}` : `pair-${mine}-${String(other).padStart(SEQ_DIGITS, "0")}`);
}

/** The two `mesh_seq`s of a policy pair id, or null for any other id. */
export function parsePolicyPairId(pairId: string): [earlier: number, later: number] | null {
  const m = POLICY_ID.exec(pairId);
  if (m === null) return null;
  const [x, y] = [Number(m[1]), Number(m[2])];
  return x < y ? [x, y] : null;
}

/** The policy pair of two nodes as a row (the two in stored order, `node_a < node_b`). */
export function policyRow(configId: string, x: PolicyNode, y: PolicyNode): MeshPairRow {
  const [earlier, later] = x.mesh_seq < y.mesh_seq ? [x, y] : [y, x];
  const [a, b] = x.node_id < y.node_id ? [x.node_id, y.node_id] : [y.node_id, x.node_id];
  return { pair_id: policyPairId(earlier.mesh_seq, later.mesh_seq), config_id: configId, node_a: a, node_b: b, enabled: 1, created_at: later.created_at, updated_at: later.created_at };
}

/** True when the policy pairs the two nodes (same config assumed): the later one joined with `auto_pair`. */
export function policyCovers(x: PolicyNode, y: PolicyNode): boolean {
  return (x.mesh_seq < y.mesh_seq ? y : x).auto_pair === 1;
}

/** A config's nodes in `mesh_seq` order. O(nodes of the config). */
export async function policyNodes(db: Db, configId: string): Promise<PolicyNode[]> {
  const { rows } = await sql<PolicyNode>`SELECT node_id, mesh_seq, auto_pair, created_at FROM nodes WHERE config_id = ${configId} AND mesh_seq IS NOT NULL ORDER BY mesh_seq`.execute(db);
  return rows;
}

/** The nodes among `nodeIds` (any config), by node_id. */
export async function policyNodesByIds(db: Db, nodeIds: readonly string[]): Promise<Map<string, PolicyNode & { config_id: string }>> {
  if (nodeIds.length === 0) return new Map();
  const { rows } = await sql<PolicyNode & { config_id: string }>`SELECT node_id, config_id, mesh_seq, auto_pair, created_at FROM nodes WHERE node_id IN (${sql.join([...nodeIds])}) AND mesh_seq IS NOT NULL`.execute(db);
  return new Map(rows.map((r) => [r.node_id, r]));
}

/** The nodes with these `mesh_seq`s. */
export async function policyNodesBySeq(db: Db, seqs: readonly number[]): Promise<Array<PolicyNode & { config_id: string }>> {
  const { rows } = await sql<PolicyNode & { config_id: string }>`SELECT node_id, config_id, mesh_seq, auto_pair, created_at FROM nodes WHERE mesh_seq IN (${sql.join([...seqs])})`.execute(db);
  return rows;
}

/** The next node's `mesh_seq`: one past the largest in the store (through `nodes_mesh_seq`). */
export async function nextMeshSeq(db: Db): Promise<number> {
  const { rows } = await sql<{ s: number | null }>`SELECT max(mesh_seq) AS s FROM nodes`.execute(db);
  return (rows[0]?.s ?? 0) + 1;
}

/**
 * The pairs of a config the operator changed: node_id → the other sides of its stored rows and
 * removals (they stand for, or take away, the policy pair of the two). O(exceptions of the config).
 */
export async function readExceptions(db: Db, configId: string): Promise<Map<string, Set<string>>> {
  const { rows } = await sql<{ node_a: string; node_b: string }>`
    SELECT node_a, node_b FROM mesh_pairs WHERE config_id = ${configId}
    UNION ALL SELECT node_a, node_b FROM mesh_pair_removals WHERE config_id = ${configId}`.execute(db);
  const out = new Map<string, Set<string>>();
  const add = (x: string, y: string) => {
    const set = out.get(x) ?? new Set<string>();
    set.add(y);
    out.set(x, set);
  };
  for (const r of rows) {
    add(r.node_a, r.node_b);
    add(r.node_b, r.node_a);
  }
  return out;
}

/** True when a removal of the pair of `a` < `b` is stored. */
export async function isRemoved(db: Db, a: string, b: string): Promise<boolean> {
  const row = await db.selectFrom("mesh_pair_removals").select("node_a").where("node_a", "=", a).where("node_b", "=", b).executeTakeFirst();
  return row !== undefined;
}

/** Stores the removal of the policy pair of `a` < `b` (the operator deleted it). */
export async function insertRemoval(db: Db, configId: string, a: string, b: string): Promise<void> {
  await db.insertInto("mesh_pair_removals").values({ node_a: a, node_b: b, config_id: configId }).onConflict((oc) => oc.doNothing()).execute();
}

/**
 * The policy pairs of a config not taken over by an exception, in the list's `(created_at,
 * pair_id)` order after `after`, at most `limit + 1`; with `nodeId` only that node's. The nodes
 * are read once (O(nodes of the config)) and the pairs of the nodes created at the page's
 * times are generated: O(nodes + page), plus a sort of one node's n − 1 pairs with `nodeId`.
 */
export async function policyPage(
  db: Db,
  configId: string,
  opts: { nodeId?: string | undefined; after?: { created_at: number; pair_id: string } | undefined; limit: number },
): Promise<MeshPairRow[]> {
  const nodes = await policyNodes(db, configId);
  if (!nodes.some((n) => n.auto_pair === 1)) return [];
  const exceptions = await readExceptions(db, configId);
  const { after, limit } = opts;
  const keep = (r: MeshPairRow) =>
    (after === undefined || r.created_at > after.created_at || (r.created_at === after.created_at && r.pair_id > after.pair_id)) && !(exceptions.get(r.node_a)?.has(r.node_b) ?? false);
  const byOrder = (x: MeshPairRow, y: MeshPairRow) => x.created_at - y.created_at || (x.pair_id < y.pair_id ? -1 : x.pair_id > y.pair_id ? 1 : 0);
  if (opts.nodeId !== undefined) {
    const i = nodes.findIndex((n) => n.node_id === opts.nodeId);
    const v = nodes[i];
    if (v === undefined) return [];
    const rows: MeshPairRow[] = [];
    nodes.forEach((n, k) => {
      if (k !== i && policyCovers(v, n)) rows.push(policyRow(configId, v, n));
    });
    return rows.filter(keep).sort(byOrder).slice(0, limit + 1);
  }
  // Nodes by creation time: each auto_pair node's pairs share its created_at.
  const joined = nodes.map((n, k) => [n, k] as const).filter(([n]) => n.auto_pair === 1 && (after === undefined || n.created_at >= after.created_at));
  joined.sort(([x, i], [y, j]) => x.created_at - y.created_at || i - j);
  const out: MeshPairRow[] = [];
  for (let g = 0; g < joined.length && out.length < limit + 1; ) {
    const at = joined[g]?.[0].created_at;
    const group: MeshPairRow[] = [];
    for (; g < joined.length && joined[g]?.[0].created_at === at; g++) {
      const [y, k] = joined[g] ?? [];
      if (y === undefined || k === undefined) continue;
      for (let x = 0; x < k; x++) {
        const earlier = nodes[x];
        if (earlier !== undefined) group.push(policyRow(configId, earlier, y));
      }
    }
    out.push(...group.filter(keep).sort(byOrder).slice(0, limit + 1 - out.length));
  }
  return out;
}

/**
 * Calls `visit` with every pair of a config, stored or by policy, once, as
 * `(node_a, node_b, enabled)` (either order for policy pairs); `step` is awaited between nodes
 * (a render job yields to the event loop there). O(pairs) calls, O(nodes + exceptions) reads.
 */
export async function forEachConfigPair(db: Db, configId: string, visit: (a: string, b: string, enabled: number) => void, step: () => Promise<void> = async () => undefined): Promise<void> {
  const { rows } = await sql<{ node_a: string; node_b: string; enabled: number }>`SELECT node_a, node_b, enabled FROM mesh_pairs WHERE config_id = ${configId}`.execute(db);
  for (const r of rows) visit(r.node_a, r.node_b, r.enabled);
  const nodes = await policyNodes(db, configId);
  if (!nodes.some((n) => n.auto_pair === 1)) return;
  const exceptions = await readExceptions(db, configId);
  for (let k = 1; k < nodes.length; k++) {
    const y = nodes[k];
    if (y === undefined || y.auto_pair !== 1) continue;
    if (k % 8 === 0) await step();
    const taken = exceptions.get(y.node_id);
    for (let x = 0; x < k; x++) {
      const earlier = nodes[x];
      if (earlier !== undefined && !(taken?.has(earlier.node_id) ?? false)) visit(earlier.node_id, y.node_id, 1);
    }
  }
}
