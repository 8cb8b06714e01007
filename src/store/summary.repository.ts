import { sqliteOf, type Connection } from "./connection.js";

/** Repository of the whole-store counts the system status shows (DESIGN §5 `system.status.updated`). */

/** Tables whose row count the system status shows. */
export type CountedTable = "configs" | "nodes" | "mesh_pairs";

/** The whole-store counts a system status shows (`summary.configs`, `summary.nodes`, `topology.mesh_pairs`). */
export type StoreCounts = Record<CountedTable, number>;

/**
 * The three counts in one read of `sqlite` (the main connection, or the store worker's: counting
 * the pairs of a 1,000-node full mesh, 499,500 rows, takes 15–30 ms, too long for the main thread's event loop).
 * @throws the driver's `SqliteError`
 */
export function countStore(conn: Connection): StoreCounts {
  const sqlite = sqliteOf(conn);
  const row = sqlite
    .prepare("SELECT (SELECT count(*) FROM configs) AS configs, (SELECT count(*) FROM nodes) AS nodes, (SELECT count(*) FROM mesh_pairs) AS mesh_pairs")
    .get() as StoreCounts;
  return { configs: row.configs, nodes: row.nodes, mesh_pairs: row.mesh_pairs };
}
