/**
 * Migration 0016 (frozen once released, like every migration): the full mesh becomes a policy
 * with explicit exceptions. A node joining a full mesh used to get one `mesh_pairs` row per node
 * of its config (n²/2 rows for an n-node mesh, ~335 bytes each with their indexes: 167 MB at
 * 1,000 nodes, ~4.2 GB at 5,000). From here on a node carries `mesh_seq` (its place in the order
 * nodes were created, unique) and `auto_pair` (it joined every node that existed when it was
 * created); its pairs with those nodes are derived, not stored. Stored are only what the operator
 * changed: a policy pair disabled or re-created (a `mesh_pairs` row for the two, which stands for
 * the pair), a policy pair deleted (a `mesh_pair_removals` row), and pairs outside the policy
 * (`mesh_pairs` rows, as before).
 *
 * Converting an existing database keeps every pair, its enabled flag, creation time and
 * integrity: `mesh_seq` follows creation (`created_at`, then insertion order); a node is
 * `auto_pair` when most of the nodes created before it have a pair with it made in its own
 * creation write (same `created_at`); its enabled pairs of that write are dropped (they are the
 * policy's, under the derived id `pair-{seq}-{seq}`: their old ids are not kept), its disabled
 * ones and pairs made later stay rows (ids kept), and an earlier node without a pair with it gets
 * a removal. Snapshots of older versions are migrated the same way when imported.
 */
import { sql, type Kysely } from "kysely";

/** Schema of the policy: the node columns, their indexes, the removals table. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function createPolicySchema(db: Kysely<any>): Promise<void> {
  const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
  await t`ALTER TABLE nodes ADD COLUMN mesh_seq INTEGER`;
  await t`ALTER TABLE nodes ADD COLUMN auto_pair INTEGER NOT NULL DEFAULT 0 CHECK (auto_pair IN (0, 1))`;
  await t`UPDATE nodes SET mesh_seq = (SELECT s FROM (SELECT node_id, row_number() OVER (ORDER BY created_at, rowid) AS s FROM nodes) r WHERE r.node_id = nodes.node_id)`;
  await t`CREATE UNIQUE INDEX nodes_mesh_seq ON nodes (mesh_seq)`;
  await t`CREATE INDEX nodes_config_mesh_seq ON nodes (config_id, mesh_seq, auto_pair)`;
  await t`CREATE TABLE mesh_pair_removals (
    node_a TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
    node_b TEXT NOT NULL REFERENCES nodes(node_id) ON DELETE CASCADE,
    config_id TEXT NOT NULL REFERENCES configs(config_id) ON DELETE CASCADE,
    CHECK (node_a < node_b),
    PRIMARY KEY (node_a, node_b)
  ) STRICT`;
  await t`CREATE INDEX mesh_pair_removals_node_b ON mesh_pair_removals (node_b)`;
  await t`CREATE INDEX mesh_pair_removals_config ON mesh_pair_removals (config_id)`;
}

interface SeqNode {
  node_id: string;
  mesh_seq: number;
  created_at: number;
}

/** Converts one config's pair rows: marks its `auto_pair` nodes, drops their policy rows, records removals. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function convertConfig(db: Kysely<any>, configId: string): Promise<void> {
  const { rows: nodes } = await sql<SeqNode>`SELECT node_id, mesh_seq, created_at FROM nodes WHERE config_id = ${configId} ORDER BY mesh_seq`.execute(db);
  const pos = new Map(nodes.map((n, i) => [n.node_id, i]));
  const fromWrite = new Int32Array(nodes.length);
  const partners = new Int32Array(nodes.length);
  const { rows: pairs } = await sql<{ node_a: string; node_b: string; created_at: number }>`SELECT node_a, node_b, created_at FROM mesh_pairs WHERE config_id = ${configId}`.execute(db);
  for (const p of pairs) {
    const later = Math.max(pos.get(p.node_a) ?? -1, pos.get(p.node_b) ?? -1);
    const node = nodes[later];
    if (node === undefined) continue;
    partners[later] = (partners[later] ?? 0) + 1;
    if (p.created_at === node.created_at) fromWrite[later] = (fromWrite[later] ?? 0) + 1;
  }
  const auto = nodes.filter((_, i) => i > 0 && (fromWrite[i] ?? 0) * 2 > i);
  for (let i = 0; i < auto.length; i += 500) {
    await sql`UPDATE nodes SET auto_pair = 1 WHERE node_id IN (${sql.join(auto.slice(i, i + 500).map((n) => n.node_id))})`.execute(db);
  }
  // An earlier node without any pair with an auto_pair node: the operator had deleted that pair.
  for (const y of auto) {
    const i = pos.get(y.node_id) ?? 0;
    if ((partners[i] ?? 0) >= i) continue;
    await sql`INSERT INTO mesh_pair_removals (node_a, node_b, config_id)
      SELECT min(x.node_id, ${y.node_id}), max(x.node_id, ${y.node_id}), ${configId} FROM nodes x
      WHERE x.config_id = ${configId} AND x.mesh_seq < ${y.mesh_seq}
        AND NOT EXISTS (SELECT 1 FROM mesh_pairs p WHERE p.node_a = min(x.node_id, ${y.node_id}) AND p.node_b = max(x.node_id, ${y.node_id}))`.execute(db);
  }
  // Then the policy's own rows go: enabled, made by the later node's creation write.
  await sql`DELETE FROM mesh_pairs WHERE rowid IN (
    SELECT p.rowid FROM mesh_pairs p JOIN nodes a ON a.node_id = p.node_a JOIN nodes b ON b.node_id = p.node_b
    WHERE p.config_id = ${configId} AND p.enabled = 1
      AND p.created_at = (CASE WHEN a.mesh_seq < b.mesh_seq THEN b.created_at ELSE a.created_at END)
      AND (CASE WHEN a.mesh_seq < b.mesh_seq THEN b.auto_pair ELSE a.auto_pair END) = 1)`.execute(db);
}

/** The migration: the policy's schema, then every config's rows converted. */
export const meshPairPolicy = {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async up(db: Kysely<any>): Promise<void> {
    await createPolicySchema(db);
    const { rows } = await sql<{ config_id: string }>`SELECT config_id FROM configs ORDER BY config_id`.execute(db);
    for (const { config_id } of rows) await convertConfig(db, config_id);
  },
};
