import type { Db } from "./db.js";
import type { ConfigRow, ConfigUpdate, NewConfigRow } from "./schema.js";

/** Repository of `configs`: plain functions, one query each, `db` or a transaction first. */

export async function insertConfig(db: Db, row: NewConfigRow): Promise<void> {
  await db.insertInto("configs").values(row).execute();
}

export async function findConfig(db: Db, configId: string): Promise<ConfigRow | undefined> {
  return db.selectFrom("configs").selectAll().where("config_id", "=", configId).executeTakeFirst();
}

export async function findConfigByName(db: Db, name: string): Promise<ConfigRow | undefined> {
  // The column is COLLATE NOCASE, so this lookup is case-insensitive like the UNIQUE constraint.
  return db.selectFrom("configs").selectAll().where("name", "=", name).executeTakeFirst();
}

export async function listConfigs(db: Db): Promise<ConfigRow[]> {
  return db.selectFrom("configs").selectAll().orderBy("created_at").orderBy("config_id").execute();
}

export async function updateConfig(db: Db, configId: string, patch: ConfigUpdate): Promise<void> {
  await db.updateTable("configs").set(patch).where("config_id", "=", configId).execute();
}

export async function deleteConfig(db: Db, configId: string): Promise<void> {
  await db.deleteFrom("configs").where("config_id", "=", configId).execute();
}

/**
 * The tunnel protocol of a config (what commands to its nodes carry, spec §6.3).
 * @throws NoResultError (Kysely) when the config does not exist
 */
export async function getConfigTunnelProtocol(db: Db, configId: string): Promise<ConfigRow["tunnel_protocol"]> {
  const row = await db.selectFrom("configs").select("tunnel_protocol").where("config_id", "=", configId).executeTakeFirstOrThrow();
  return row.tunnel_protocol;
}
