import type { Db } from "./db.js";
import type { MeshPairRow } from "./schema.js";

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
