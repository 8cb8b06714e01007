import type { Selectable } from "kysely";
import type { Db } from "./connection.js";
import type { BindTokensTable } from "./schema.js";

/**
 * Repository of `bind_tokens` (spec §3.6, §4 rules 10–12): one-time bind tokens of dynamic
 * nodes, stored by SHA-256 hash only (DESIGN §3 Admin auth; `src/domain/tokens.ts`). Plain
 * functions, one query each, `db` or the caller's transaction first: the control service runs
 * a bind-command and a redemption each inside one transaction (spec §3.3, §6.2), and none of
 * these functions opens one. Each throws the driver's error on failure.
 */

/** A stored bind token: `state` `valid` until used or invalidated; times in ms since the epoch. */
export type BindTokenRow = Selectable<BindTokensTable>;

/**
 * Invalidates every still-valid token of a node (a new bind-command supersedes them, spec
 * §3.6; reset and dynamic → static revoke them, spec §4 rule 12, §3.1). Used and expired-but-
 * valid rows keep their state apart from that: only `state = 'valid'` rows change.
 */
export async function invalidateBindTokensOf(db: Db, nodeId: string): Promise<void> {
  await db.updateTable("bind_tokens").set({ state: "invalidated" }).where("node_id", "=", nodeId).where("state", "=", "valid").execute();
}

/**
 * Stores a new valid bind token of a node.
 * @param token.token_hash SHA-256 of the token (`hashToken`), never the token itself
 * @param token.created_at, token.expires_at ms since the epoch
 */
export async function insertBindToken(db: Db, token: { token_hash: string; node_id: string; created_at: number; expires_at: number }): Promise<void> {
  await db
    .insertInto("bind_tokens")
    .values({ token_hash: token.token_hash, node_id: token.node_id, state: "valid", created_at: token.created_at, expires_at: token.expires_at, used_at: null })
    .execute();
}

/** The token stored under this hash, whatever its state; undefined when none. */
export async function findBindToken(db: Db, tokenHash: string): Promise<BindTokenRow | undefined> {
  return db.selectFrom("bind_tokens").selectAll().where("token_hash", "=", tokenHash).executeTakeFirst();
}

/**
 * Marks the token used at `now` (ms) if, and only if, it is still valid and unexpired at `now`:
 * one guarded UPDATE, so of concurrent redemptions of one token exactly one claims it (spec §4
 * rule 11).
 * @returns true when this call claimed the token (one row updated), false otherwise
 */
export async function claimBindToken(db: Db, tokenHash: string, now: number): Promise<boolean> {
  const claimed = await db
    .updateTable("bind_tokens")
    .set({ state: "used", used_at: now })
    .where("token_hash", "=", tokenHash)
    .where("state", "=", "valid")
    .where("expires_at", ">", now)
    .executeTakeFirst();
  return Number(claimed.numUpdatedRows) === 1;
}
