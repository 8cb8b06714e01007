import type { Clock } from "../lib/clock.js";
import { digestsEqual, hashPassword, hashToken, isTokenShaped, mintToken, verifyPassword } from "../domain/tokens.js";
import { AppError } from "../errors.js";
import type { Store } from "../store/db.js";
import { getSetting, putSetting } from "../store/settings.repository.js";
import * as tokensRepo from "../store/tokens.repository.js";
import { randomBytes } from "node:crypto";

const ADMIN_PASSWORD_KEY = "admin_password_hash";

export interface AuthServiceDeps {
  store: Store;
  clock: Clock;
  /** Lifetime of an admin bearer token, ms. */
  sessionTtlMs: number;
}

/**
 * An admin session, as the SSE stream needs it (a stream lives no longer than its session;
 * docs/history/decisions-2026.md "A stream lives no longer than its admin session").
 */
export interface AdminSession {
  /** Opaque id of the session: the SHA-256 (hex) of its token, never the token itself. */
  key: string;
  /** Expiry, ms since the epoch. */
  expiresAt: number;
}

/**
 * Admin authentication (DESIGN §3 Admin auth): one admin account, password hashed with scrypt;
 * bearer access tokens of 32 random bytes stored as SHA-256 and compared in constant time.
 */
export class AuthService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #revoked = new Set<(key: string) => void>();

  constructor(deps: AuthServiceDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#ttlMs = deps.sessionTtlMs;
  }

  /**
   * Makes sure an admin password exists. With `configured` set, its hash replaces the stored
   * one when it differs. Without it, a password is generated at first start only.
   * @returns the generated password, once (to be shown to the operator), or null
   */
  async ensureAdminPassword(configured: string | undefined): Promise<string | null> {
    const db = this.#store.db;
    const stored = await getSetting(db, ADMIN_PASSWORD_KEY);
    const now = this.#clock.now();
    if (configured !== undefined) {
      if (stored === undefined || !(await verifyPassword(configured, stored))) {
        await putSetting(db, ADMIN_PASSWORD_KEY, await hashPassword(configured), now);
      }
      return null;
    }
    if (stored !== undefined) return null;
    const generated = randomBytes(18).toString("base64url");
    await putSetting(db, ADMIN_PASSWORD_KEY, await hashPassword(generated), now);
    return generated;
  }

  /**
   * Exchanges the admin password for a bearer token.
   * @returns token, its expiry (ms since the epoch) and its lifetime from now (ms)
   * @throws AppError UNAUTHORIZED on a wrong password
   */
  async login(password: string): Promise<{ accessToken: string; expiresAt: number; expiresInMs: number }> {
    const stored = await getSetting(this.#store.db, ADMIN_PASSWORD_KEY);
    if (stored === undefined || !(await verifyPassword(password, stored))) {
      throw new AppError("UNAUTHORIZED", "wrong password");
    }
    const now = this.#clock.now();
    const { token, hash } = mintToken();
    const expiresAt = now + this.#ttlMs;
    await this.#store.transaction(async (trx) => {
      await tokensRepo.deleteExpiredAdminSessions(trx, now);
      await tokensRepo.insertAdminSession(trx, hash, now, expiresAt);
    });
    return { accessToken: token, expiresAt, expiresInMs: this.#ttlMs };
  }

  /**
   * Checks a presented bearer token.
   * @throws AppError UNAUTHORIZED when missing, unknown or expired
   */
  async verifyAccessToken(token: string | undefined): Promise<void> {
    await this.session(token);
  }

  /**
   * The live session of a presented bearer token.
   * @throws AppError UNAUTHORIZED when missing, unknown or expired
   */
  async session(token: string | undefined): Promise<AdminSession> {
    if (token === undefined || !isTokenShaped(token)) throw new AppError("UNAUTHORIZED", "a valid admin bearer token is required");
    const hash = hashToken(token);
    const row = await tokensRepo.findAdminSession(this.#store.db, hash);
    if (!row || !digestsEqual(row.token_hash, hash) || row.expires_at <= this.#clock.now()) {
      throw new AppError("UNAUTHORIZED", "a valid admin bearer token is required");
    }
    return { key: hash, expiresAt: row.expires_at };
  }

  /** Whether the session with this {@link AdminSession.key} still exists and has not expired. */
  async sessionLive(key: string): Promise<boolean> {
    const row = await tokensRepo.findAdminSession(this.#store.db, key);
    return row !== undefined && row.expires_at > this.#clock.now();
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
    for (const listener of [...this.#revoked]) {
      try {
        listener(key);
      } catch {
        // A listener's failure is its own (the hub logs its own errors); the logout stands.
      }
    }
  }
}
