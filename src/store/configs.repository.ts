import { sql } from "kysely";
import type { Db } from "./connection.js";
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

/**
 * How a config's pushes are applied on a running host (migration 0024).
 * @throws NoResultError (Kysely) when the config does not exist
 */
export async function getConfigApplyMode(db: Db, configId: string): Promise<ConfigRow["apply_mode"]> {
  const row = await db.selectFrom("configs").select("apply_mode").where("config_id", "=", configId).executeTakeFirstOrThrow();
  return row.apply_mode;
}

/**
 * One page of configs in `(created_at, config_id)` order (index `configs_created`, migration
 * 0008), after `after` (exclusive; undefined for the first page), whose name contains `q`
 * (case-insensitive; absent or "" for all): a page costs the rows it reads, not an OFFSET walk.
 * @param limit rows wanted; up to `limit + 1` are returned so the caller knows whether more follow
 */
export async function configPage(
  db: Db,
  q: string | undefined,
  after: { created_at: number; config_id: string } | undefined,
  limit: number,
): Promise<ConfigRow[]> {
  let query = db.selectFrom("configs").selectAll();
  if (q !== undefined && q !== "") query = query.where(sql<boolean>`name LIKE ${likePattern(q)} ESCAPE '\\'`);
  if (after !== undefined) query = query.where(sql<boolean>`(created_at, config_id) > (${after.created_at}, ${after.config_id})`);
  return query.orderBy("created_at").orderBy("config_id").limit(limit + 1).execute();
}

/** How many configs there are, and how many have a name containing `q`. */
export async function countConfigs(db: Db, q: string | undefined): Promise<{ total: number; matching: number }> {
  const matching = q === undefined || q === "" ? sql<number>`count(*)` : sql<number>`coalesce(sum(name LIKE ${likePattern(q)} ESCAPE '\\'), 0)`;
  const row = await db
    .selectFrom("configs")
    .select([sql<number>`count(*)`.as("total"), matching.as("matching")])
    .executeTakeFirstOrThrow();
  return { total: Number(row.total), matching: Number(row.matching) };
}

/** `%q%` for LIKE … ESCAPE '\', with the pattern characters of `q` escaped. */
export function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
