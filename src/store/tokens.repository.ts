import type { Db } from "./connection.js";
import type { DownloadTokenKind } from "../protocol/download-tokens.js";
import type { DownloadTokenRow, NodeConfigDownloadsTable } from "./schema.js";

/** Repository of `admin_sessions` and `download_tokens`. Only token hashes are stored. */

/** @param login how the session was opened: the user's password (default) or single sign-on */
export async function insertAdminSession(db: Db, tokenHash: string, userId: string, now: number, expiresAt: number, login: "password" | "oidc" = "password"): Promise<void> {
  await db.insertInto("admin_sessions").values({ token_hash: tokenHash, user_id: userId, created_at: now, expires_at: expiresAt, login }).execute();
}

/** A session with its user's name, role and whether the user is disabled (read fresh on every request). */
export interface SessionWithUser {
  token_hash: string;
  expires_at: number;
  user_id: string;
  username: string;
  role: "viewer" | "operator" | "admin" | "owner";
  disabled: number;
  login: "password" | "oidc";
}

export async function findAdminSession(db: Db, tokenHash: string): Promise<SessionWithUser | undefined> {
  return db
    .selectFrom("admin_sessions as s")
    .innerJoin("users as u", "u.user_id", "s.user_id")
    .select(["s.token_hash", "s.expires_at", "s.login", "u.user_id", "u.username", "u.role", "u.disabled"])
    .where("s.token_hash", "=", tokenHash)
    .executeTakeFirst();
}

export async function deleteExpiredAdminSessions(db: Db, now: number): Promise<void> {
  await db.deleteFrom("admin_sessions").where("expires_at", "<=", now).execute();
}

export async function deleteAdminSession(db: Db, tokenHash: string): Promise<void> {
  await db.deleteFrom("admin_sessions").where("token_hash", "=", tokenHash).execute();
}

export async function insertDownloadToken(
  db: Db,
  row: { token_hash: string; kind: DownloadTokenKind; resource_id: string; created_at: number; expires_at: number },
): Promise<void> {
  await db.insertInto("download_tokens").values(row).execute();
}

export async function findDownloadToken(db: Db, tokenHash: string): Promise<DownloadTokenRow | undefined> {
  return db.selectFrom("download_tokens").selectAll().where("token_hash", "=", tokenHash).executeTakeFirst();
}

export async function deleteExpiredDownloadTokens(db: Db, now: number): Promise<void> {
  await db.deleteFrom("download_tokens").where("expires_at", "<=", now).execute();
}

/** Removes every token bound to one resource (the resource is gone or replaced). */
export async function deleteDownloadTokensOf(db: Db, kind: DownloadTokenKind, resourceId: string): Promise<void> {
  await db.deleteFrom("download_tokens").where("kind", "=", kind).where("resource_id", "=", resourceId).execute();
}

/** Records that a node's config download served `row`'s staged version (replaces the previous record). */
export async function upsertNodeConfigDownload(db: Db, row: NodeConfigDownloadsTable): Promise<void> {
  await db
    .insertInto("node_config_downloads")
    .values(row)
    .onConflict((oc) =>
      oc.column("node_id").doUpdateSet({
        config_version: (eb) => eb.ref("excluded.config_version"),
        config_sha256: (eb) => eb.ref("excluded.config_sha256"),
        downloaded_at: (eb) => eb.ref("excluded.downloaded_at"),
      }),
    )
    .execute();
}

/** What a node's config download last served, or undefined when it was never downloaded. */
export async function findNodeConfigDownload(db: Db, nodeId: string): Promise<NodeConfigDownloadsTable | undefined> {
  return db.selectFrom("node_config_downloads").selectAll().where("node_id", "=", nodeId).executeTakeFirst();
}
