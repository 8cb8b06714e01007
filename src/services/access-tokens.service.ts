import { randomBytes } from "node:crypto";
import { hashToken } from "../domain/tokens.js";
import { AppError } from "../errors.js";
import { isoTime, type Clock } from "../lib/clock.js";
import { newId } from "../protocol/ids.js";
import { roleAtLeast, type Role } from "../protocol/roles.js";
import { ACCESS_TOKEN_PREFIX, type AccessTokenView } from "../protocol/users.schema.js";
import * as accessTokensRepo from "../store/access-tokens.repository.js";
import type { Store } from "../store/db.js";
import type { AccessTokenRow } from "../store/schema.js";
import type { AuthService, Principal } from "./auth.service.js";

const DAY_MS = 24 * 3600 * 1000;

export interface AccessTokensServiceDeps {
  store: Store;
  clock: Clock;
  /** Ends a revoked token's SSE streams at once. */
  auth: Pick<AuthService, "sessionsEnded">;
}

function tokenView(row: AccessTokenRow & { username: string }): AccessTokenView {
  return {
    token_id: row.token_id,
    name: row.name,
    role: row.role,
    user_id: row.user_id,
    username: row.username,
    created_at: isoTime(row.created_at),
    expires_at: isoTime(row.expires_at),
    last_used_at: row.last_used_at === null ? null : isoTime(row.last_used_at),
  };
}

/**
 * Personal access tokens for scripts and CI (README "Users, roles and tokens"): named, expiring
 * (1–365 days), a role no higher than their creator's, the secret shown once with a
 * recognisable prefix and stored as SHA-256. A token acts with the lower of its role and its
 * user's current one; disabling or deleting the user stops it.
 */
export class AccessTokensService {
  readonly #d: AccessTokensServiceDeps;

  constructor(deps: AccessTokensServiceDeps) {
    this.#d = deps;
  }

  /**
   * Creates a token of `actor`'s user.
   * @returns its view and the secret (`svc_pat_…`), which is not stored and not shown again
   * @throws AppError FORBIDDEN when `actor` is itself a token (a leaked token must not mint
   *   longer-lived ones) or `role` is above `actor`'s
   */
  async create(actor: Principal, input: { name: string; role: Role; expires_in_days: number }): Promise<AccessTokenView & { token: string }> {
    if (actor.via === "token") throw new AppError("FORBIDDEN", "an access token cannot create access tokens: sign in to create one");
    if (!roleAtLeast(actor.role, input.role)) throw new AppError("FORBIDDEN", `a token's role cannot be above yours (${actor.role})`, { min_role: input.role, role: actor.role });
    const now = this.#d.clock.now();
    const secret = `${ACCESS_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
    const row: AccessTokenRow = {
      token_id: newId("tok"),
      user_id: actor.user_id,
      name: input.name,
      role: input.role,
      token_hash: hashToken(secret),
      created_at: now,
      expires_at: now + input.expires_in_days * DAY_MS,
      last_used_at: null,
    };
    await this.#d.store.transaction((trx) => accessTokensRepo.insertAccessToken(trx, row));
    return { ...tokenView({ ...row, username: actor.username }), token: secret };
  }

  /** The caller's own tokens; an owner's list holds everyone's. Newest first. */
  async list(actor: Principal): Promise<AccessTokenView[]> {
    const rows = await accessTokensRepo.listAccessTokens(this.#d.store.db, actor.role === "owner" ? undefined : actor.user_id);
    return rows.map(tokenView);
  }

  /**
   * Revokes a token: it answers 401 from the next request, and its SSE streams end at once.
   * @throws AppError NOT_FOUND when there is no such token, or it is another user's and the
   *   caller is not an owner (which tokens exist is not told)
   */
  async revoke(actor: Principal, tokenId: string): Promise<void> {
    const hash = await this.#d.store.transaction(async (trx) => {
      const row = await accessTokensRepo.findAccessToken(trx, tokenId);
      if (row === undefined || (row.user_id !== actor.user_id && actor.role !== "owner")) throw new AppError("NOT_FOUND", `no access token ${tokenId}`);
      await accessTokensRepo.deleteAccessToken(trx, tokenId);
      return row.token_hash;
    });
    this.#d.auth.sessionsEnded([hash]);
  }
}
