import type { Db } from "./connection.js";
import type { AccessTokenRow } from "./schema.js";

/** Repository of `access_tokens` (README "Users, roles and tokens"). Only token hashes are stored. */

export async function insertAccessToken(db: Db, row: AccessTokenRow): Promise<void> {
  await db.insertInto("access_tokens").values(row).execute();
}

/** A token with its user's name, role and state (read on every use: a change applies at once). */
export interface AccessTokenWithUser extends AccessTokenRow {
  username: string;
  user_role: AccessTokenRow["role"];
  disabled: number;
}

export async function findAccessTokenByHash(db: Db, tokenHash: string): Promise<AccessTokenWithUser | undefined> {
  return db
    .selectFrom("access_tokens as t")
    .innerJoin("users as u", "u.user_id", "t.user_id")
    .selectAll("t")
    .select(["u.username", "u.role as user_role", "u.disabled"])
    .where("t.token_hash", "=", tokenHash)
    .executeTakeFirst();
}

/** A user's tokens (or everyone's when `userId` is undefined), newest first, with their user's name. */
export async function listAccessTokens(db: Db, userId: string | undefined): Promise<Array<AccessTokenRow & { username: string }>> {
  let q = db.selectFrom("access_tokens as t").innerJoin("users as u", "u.user_id", "t.user_id").selectAll("t").select("u.username");
  if (userId !== undefined) q = q.where("t.user_id", "=", userId);
  return q.orderBy("t.created_at", "desc").orderBy("t.token_id").execute();
}

export async function findAccessToken(db: Db, tokenId: string): Promise<AccessTokenRow | undefined> {
  return db.selectFrom("access_tokens").selectAll().where("token_id", "=", tokenId).executeTakeFirst();
}

export async function deleteAccessToken(db: Db, tokenId: string): Promise<void> {
  await db.deleteFrom("access_tokens").where("token_id", "=", tokenId).execute();
}

export async function touchAccessToken(db: Db, tokenId: string, at: number): Promise<void> {
  await db.updateTable("access_tokens").set({ last_used_at: at }).where("token_id", "=", tokenId).execute();
}

/** The hashes of a user's tokens (their SSE streams end when the user is disabled or deleted). */
export async function tokenKeysOf(db: Db, userId: string): Promise<string[]> {
  return (await db.selectFrom("access_tokens").select("token_hash").where("user_id", "=", userId).execute()).map((r) => r.token_hash);
}
