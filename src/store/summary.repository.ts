import type { Db } from "./db.js";

/** Repository of the whole-store counts the system status shows (DESIGN §5 `system.status.updated`). */

/** Tables whose row count the system status shows. */
export type CountedTable = "configs" | "nodes" | "mesh_pairs";

/** Number of rows of one table (every config, every node, every mesh pair). */
export async function countRows(db: Db, table: CountedTable): Promise<number> {
  return Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow()).n);
}
