import type { Clock } from "../lib/clock.js";
import { digestsEqual, hashPassword, hashToken, isTokenShaped, mintToken, PASSWORD_SCRYPT_N, passwordHashCost, verifyPassword } from "../domain/tokens.js";
import { AppError } from "../errors.js";
import type { Store } from "../store/db.js";
import type { Db } from "../store/connection.js";
import { roleAtLeast, type Role } from "../protocol/roles.js";
import { ACCESS_TOKEN_PREFIX } from "../protocol/users.schema.js";
import * as accessTokensRepo from "../store/access-tokens.repository.js";
import * as tokensRepo from "../store/tokens.repository.js";
import * as usersRepo from "../store/users.repository.js";
import { randomBytes } from "node:crypto";

/** A token's `last_used_at` is written at most this often, ms. */
const LAST_USED_GRANULARITY_MS = 60_000;

/** The first owner, made at first start from `SVC_ADMIN_PASSWORD` or a generated password. */
export const FIRST_OWNER = { user_id: "usr-admin", username: "admin" } as const;


export interface AuthServiceDeps {
  store: Store;
  clock: Clock;
  /** Lifetime of an admin bearer token, ms. */
  sessionTtlMs: number;
  /** scrypt's N for new password hashes (Settings `passwordScryptN`); default OWASP's 2^17. */
  passwordScryptN?: number;
}

/** Who is calling, read from the store on every request (a role change applies at once). */
export interface Principal {
  user_id: string;
  username: string;
  /** The role the caller acts with: the user's, or for a token the lower of the token's and the user's. */
  role: Role;
  /** How the caller authenticated: a login session or a personal access token. */
  via: "session" | "token";
  /** The personal access token used (via `token`). */
  token?: { token_id: string; name: string };
  /** How a session was opened: the user's password, or single sign-on through the OpenID provider. */
  login?: "password" | "oidc";
}

/**
 * A signed-in session, as the SSE stream needs it (a stream lives no longer than its session;
 * docs/history/decisions-2026.md "A stream lives no longer than its admin session").
 */
export interface AdminSession {
  /** Opaque id of the session: the SHA-256 (hex) of its token, never the token itself. */
  key: string;
  /** Expiry, ms since the epoch. */
  expiresAt: number;
  /** Whose session it is. */
  principal: Principal;
}

/**
 * Sign-in (DESIGN §3 Admin auth; README "Users, roles and tokens"): users with passwords hashed
 * with scrypt; bearer access tokens of 32 random bytes stored as SHA-256 and compared in
 * constant time, each session belonging to a user whose role and state are read on every use.
 */
export class AuthService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #scryptN: number;
  readonly #revoked = new Set<(key: string) => void>();
  /**
   * The hash of a random password, made once with the current parameters: verified when the
   * username is unknown, so that a wrong name costs the same time as a wrong password (no user
   * enumeration by timing).
   */
  #noUserHash: Promise<string> | undefined;

  constructor(deps: AuthServiceDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#ttlMs = deps.sessionTtlMs;
    this.#scryptN = deps.passwordScryptN ?? PASSWORD_SCRYPT_N;
  }

  /**
   * Makes sure someone can sign in. With no user at all (first start, or a database from before
   * users), creates `admin` (role `owner`) with `configured` or a generated password. With
   * `configured` set and `admin` present, its hash replaces the stored one when it differs (the
   * environment's password keeps working, as before users existed).
   * @returns the generated password, once (to be shown to the operator), or null
   */
  async ensureAdminPassword(configured: string | undefined): Promise<string | null> {
    const db = this.#store.db;
    const now = this.#clock.now();
    const admin = await usersRepo.findUser(db, FIRST_OWNER.user_id);
    if (admin !== undefined) {
      if (configured !== undefined && (admin.password_hash === null || !(await verifyPassword(configured, admin.password_hash)))) {
        await usersRepo.updateUser(db, admin.user_id, { password_hash: await hashPassword(configured, this.#scryptN) }, now);
      }
      return null;
    }
    if ((await usersRepo.listUsers(db)).length > 0) return null;
    const password = configured ?? randomBytes(18).toString("base64url");
    const row = { ...FIRST_OWNER, password_hash: await hashPassword(password, this.#scryptN), role: "owner" as const, disabled: 0, created_at: now, updated_at: now };
    await usersRepo.insertUser(db, row);
    return configured === undefined ? password : null;
  }

  /**
   * Exchanges a username and password for a bearer token.
   * @returns token, its expiry (ms since the epoch) and its lifetime from now (ms)
   * @throws AppError UNAUTHORIZED on an unknown user, a wrong password or a disabled user
   */
  async login(username: string, password: string): Promise<{ accessToken: string; expiresAt: number; expiresInMs: number }> {
    const user = await usersRepo.findUserByName(this.#store.db, username);
    this.#noUserHash ??= hashPassword(randomBytes(18).toString("base64url"), this.#scryptN);
    const matches = await verifyPassword(password, user?.password_hash ?? (await this.#noUserHash));
    if (user === undefined || user.password_hash === null || !matches) throw new AppError("UNAUTHORIZED", "wrong username or password");
    if (user.disabled === 1) throw new AppError("UNAUTHORIZED", "this user is disabled");
    // A hash made at a lower cost (before OWASP's current parameters) is made again now that the password is known.
    const upgraded = (passwordHashCost(user.password_hash) ?? 0) < this.#scryptN ? await hashPassword(password, this.#scryptN) : undefined;
    const opened = await this.openSession(user.user_id, "password", async (trx, now) => {
      if (upgraded !== undefined) await usersRepo.updateUser(trx, user.user_id, { password_hash: upgraded }, now);
    });
    return { accessToken: opened.accessToken, expiresAt: opened.expiresAt, expiresInMs: opened.expiresInMs };
  }

  /**
   * Opens a session for a user whose identity was established (a password, or single sign-on
   * through the OpenID provider), in one transaction with `also` (what the sign-in changes).
   * @returns the bearer token (shown to its holder only), its expiry (ms since the epoch), its
   *   lifetime from now (ms) and the session's principal
   * @throws AppError UNAUTHORIZED when the user is unknown or disabled by the time of the write
   */
  async openSession(
    userId: string,
    login: "password" | "oidc",
    also?: (trx: Db, now: number) => Promise<void>,
  ): Promise<{ accessToken: string; expiresAt: number; expiresInMs: number; principal: Principal }> {
    const now = this.#clock.now();
    const { token, hash } = mintToken();
    const expiresAt = now + this.#ttlMs;
    const user = await this.#store.transaction(async (trx) => {
      await tokensRepo.deleteExpiredAdminSessions(trx, now);
      const row = await usersRepo.findUser(trx, userId);
      if (row === undefined || row.disabled === 1) throw new AppError("UNAUTHORIZED", "this user is disabled or no longer exists");
      await tokensRepo.insertAdminSession(trx, hash, userId, now, expiresAt, login);
      if (also !== undefined) await also(trx, now);
      return row;
    });
    const principal: Principal = { user_id: user.user_id, username: user.username, role: user.role, via: "session", login };
    return { accessToken: token, expiresAt, expiresInMs: this.#ttlMs, principal };
  }

  /**
   * Checks a presented bearer token.
   * @throws AppError UNAUTHORIZED when missing, unknown or expired
   */
  async verifyAccessToken(token: string | undefined): Promise<Principal> {
    return (await this.session(token)).principal;
  }

  /**
   * The live session of a presented bearer token.
   * @throws AppError UNAUTHORIZED when missing, unknown or expired
   */
  async session(token: string | undefined): Promise<AdminSession> {
    if (token === undefined || !isTokenShaped(token)) throw new AppError("UNAUTHORIZED", "a valid admin bearer token is required");
    if (token.startsWith(ACCESS_TOKEN_PREFIX)) return this.#accessToken(token);
    const hash = hashToken(token);
    const row = await tokensRepo.findAdminSession(this.#store.db, hash);
    if (!row || !digestsEqual(row.token_hash, hash) || row.expires_at <= this.#clock.now() || row.disabled === 1) {
      throw new AppError("UNAUTHORIZED", "a valid admin bearer token is required");
    }
    return { key: hash, expiresAt: row.expires_at, principal: { user_id: row.user_id, username: row.username, role: row.role, via: "session", login: row.login } };
  }

  /**
   * A personal access token's principal: the lower of the token's and its user's role; its last
   * use is written at most once a minute (every API call would otherwise be a write).
   * @throws AppError UNAUTHORIZED when unknown (revoked), expired, or its user is disabled
   */
  async #accessToken(token: string): Promise<AdminSession> {
    const hash = hashToken(token);
    const row = await accessTokensRepo.findAccessTokenByHash(this.#store.db, hash);
    const now = this.#clock.now();
    if (!row || !digestsEqual(row.token_hash, hash) || row.expires_at <= now || row.disabled === 1) {
      throw new AppError("UNAUTHORIZED", "a valid bearer token is required (this access token is unknown, revoked or expired)");
    }
    if (row.last_used_at === null || now - row.last_used_at >= LAST_USED_GRANULARITY_MS) {
      await this.#store.transaction((trx) => accessTokensRepo.touchAccessToken(trx, row.token_id, now));
    }
    const role = roleAtLeast(row.user_role, row.role) ? row.role : row.user_role;
    const principal: Principal = { user_id: row.user_id, username: row.username, role, via: "token", token: { token_id: row.token_id, name: row.name } };
    return { key: hash, expiresAt: row.expires_at, principal };
  }

  /** Whether the session or access token with this {@link AdminSession.key} still exists, has not expired and its user is enabled. */
  async sessionLive(key: string): Promise<boolean> {
    const now = this.#clock.now();
    const row = (await tokensRepo.findAdminSession(this.#store.db, key)) ?? (await accessTokensRepo.findAccessTokenByHash(this.#store.db, key));
    return row !== undefined && row.expires_at > now && row.disabled === 0;
  }

  /**
   * Calls `listener(key)` after a session was ended by logout (its row is gone): the SSE hub ends
   * that session's streams (docs/history/decisions-2026.md "A stream lives no longer than its admin session"). A
   * throwing listener is ignored by the others.
   * @returns a function that removes the listener
   */
  onSessionRevoked(listener: (key: string) => void): () => void {
    this.#revoked.add(listener);
    return () => {
      this.#revoked.delete(listener);
    };
  }

  /** Ends a session (logout), then tells the revocation listeners. Unknown tokens are ignored. */
  async logout(token: string): Promise<void> {
    const key = hashToken(token);
    await tokensRepo.deleteAdminSession(this.#store.db, key);
    this.#tellRevoked([key]);
  }

  /**
   * Tells the revocation listeners that these sessions ended (their rows are gone: a user was
   * disabled or deleted), so open SSE streams close at once.
   */
  sessionsEnded(keys: readonly string[]): void {
    this.#tellRevoked(keys);
  }

  #tellRevoked(keys: readonly string[]): void {
    for (const key of keys) this.#tellOne(key);
  }

  #tellOne(key: string): void {
    for (const listener of [...this.#revoked]) {
      try {
        listener(key);
      } catch {
        // A listener's failure is its own (the hub logs its own errors); the logout stands.
      }
    }
  }
}
