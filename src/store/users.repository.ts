import type { Db } from "./connection.js";
import type { UserRow } from "./schema.js";

/** Repository of `users` and of which admin sessions belong to whom (README "Users, roles and tokens"). */

export async function insertUser(db: Db, row: UserRow): Promise<void> {
  await db.insertInto("users").values(row).execute();
}

export async function findUser(db: Db, userId: string): Promise<UserRow | undefined> {
  return db.selectFrom("users").selectAll().where("user_id", "=", userId).executeTakeFirst();
}

/** The user of this name, compared without regard to case (the column's collation). */
export async function findUserByName(db: Db, username: string): Promise<UserRow | undefined> {
  return db.selectFrom("users").selectAll().where("username", "=", username).executeTakeFirst();
}

/** Every user, by name. */
export async function listUsers(db: Db): Promise<UserRow[]> {
  return db.selectFrom("users").selectAll().orderBy("username").execute();
}

export async function updateUser(db: Db, userId: string, patch: Partial<Pick<UserRow, "role" | "password_hash" | "disabled">>, now: number): Promise<void> {
  await db.updateTable("users").set({ ...patch, updated_at: now }).where("user_id", "=", userId).execute();
}

export async function deleteUser(db: Db, userId: string): Promise<void> {
  await db.deleteFrom("users").where("user_id", "=", userId).execute();
}

/** How many enabled owners there are (the last one cannot be removed, demoted or disabled). */
export async function countEnabledOwners(db: Db): Promise<number> {
  const row = await db.selectFrom("users").select((eb) => eb.fn.countAll<number>().as("n")).where("role", "=", "owner").where("disabled", "=", 0).executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The token hashes of a user's admin sessions (to end them and their SSE streams). */
export async function sessionKeysOf(db: Db, userId: string): Promise<string[]> {
  const rows = await db.selectFrom("admin_sessions").select("token_hash").where("user_id", "=", userId).execute();
  return rows.map((r) => r.token_hash);
}

export async function deleteSessionsOf(db: Db, userId: string): Promise<void> {
  await db.deleteFrom("admin_sessions").where("user_id", "=", userId).execute();
}

/** The local user an OpenID provider's issuer and subject are linked to (README "Single sign-on (OIDC)"). */
export async function findUserByOidc(db: Db, issuer: string, subject: string): Promise<UserRow | undefined> {
  return db
    .selectFrom("user_oidc_links as l")
    .innerJoin("users as u", "u.user_id", "l.user_id")
    .selectAll("u")
    .where("l.issuer", "=", issuer)
    .where("l.subject", "=", subject)
    .executeTakeFirst();
}

/** Links a user to the provider's issuer and subject (one link per user, one user per subject). */
export async function insertOidcLink(db: Db, row: { issuer: string; subject: string; user_id: string; created_at: number }): Promise<void> {
  await db.insertInto("user_oidc_links").values(row).execute();
}
