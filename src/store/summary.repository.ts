import { sqliteOf, type Connection } from "./connection.js";

/** Repository of the whole-store counts the system status shows (DESIGN §5 `system.status.updated`). */

/** Tables whose row count the system status shows. */
export type CountedTable = "configs" | "nodes" | "mesh_pairs";

/** The whole-store counts a system status shows (`summary.configs`, `summary.nodes`, `topology.mesh_pairs`). */
export type StoreCounts = Record<CountedTable, number>;

/**
 * The pairs are counted without listing them: the full-mesh policy's (each `auto_pair` node pairs
 * with the nodes of its config created before it: its rank there), less its removals, plus the
 * stored rows the policy does not cover (a row the policy covers stands for a policy pair).
 * O(nodes + exceptions).
 */
const COUNTS = `SELECT (SELECT count(*) FROM configs) AS configs, (SELECT count(*) FROM nodes) AS nodes,
  (SELECT coalesce(sum(rank), 0) FROM (SELECT auto_pair, row_number() OVER (PARTITION BY config_id ORDER BY mesh_seq) - 1 AS rank FROM nodes WHERE mesh_seq IS NOT NULL) WHERE auto_pair = 1)
  - (SELECT count(*) FROM mesh_pair_removals)
  + (SELECT count(*) FROM mesh_pairs p JOIN nodes a ON a.node_id = p.node_a JOIN nodes b ON b.node_id = p.node_b
     WHERE coalesce(CASE WHEN a.mesh_seq < b.mesh_seq THEN b.auto_pair ELSE a.auto_pair END, 0) = 0) AS mesh_pairs`;

/**
 * The three counts in one read of `sqlite` (the main connection, or the store worker's).
 * @throws the driver's `SqliteError`
 */
export function countStore(conn: Connection): StoreCounts {
  const sqlite = sqliteOf(conn);
  const row = sqlite.prepare(COUNTS).get() as StoreCounts;
  return { configs: row.configs, nodes: row.nodes, mesh_pairs: row.mesh_pairs };
}
