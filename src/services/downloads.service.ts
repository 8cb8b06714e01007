import type { Clock } from "../lib/clock.js";
import { digestsEqual, hashToken, isTokenShaped, mintToken } from "../domain/tokens.js";
import { AppError } from "../errors.js";
import type { Store } from "../store/db.js";
import type { DownloadTokenKind } from "../protocol/download-tokens.js";
import * as tokensRepo from "../store/tokens.repository.js";

export interface IssuedDownloadToken {
  token: string;
  /** ms since the epoch */
  expiresAt: number;
}

export interface DownloadsServiceDeps {
  store: Store;
  clock: Clock;
  /** Token lifetime, ms (spec §8: 5 minutes). */
  tokenTtlMs: number;
}

/**
 * Short-lived download tokens (spec §2.1, §3.7, §4 rule 1): random, stored hashed, bound to one
 * kind + resource_id, valid for `tokenTtlMs`, usable any number of times until expiry.
 */
export class DownloadsService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #ttlMs: number;

  constructor(deps: DownloadsServiceDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#ttlMs = deps.tokenTtlMs;
  }

  /** Issues a token for `kind` + `resourceId`; expired tokens are pruned on the way. */
  async issue(kind: DownloadTokenKind, resourceId: string): Promise<IssuedDownloadToken> {
    const now = this.#clock.now();
    const { token, hash } = mintToken();
    const expiresAt = now + this.#ttlMs;
    await this.#store.transaction(async (trx) => {
      await tokensRepo.deleteExpiredDownloadTokens(trx, now);
      await tokensRepo.insertDownloadToken(trx, {
        token_hash: hash,
        kind,
        resource_id: resourceId,
        created_at: now,
        expires_at: expiresAt,
      });
    });
    return { token, expiresAt };
  }

  /**
   * Checks a presented token against the resource it is used for (spec §3.7).
   * @throws AppError INVALID_DOWNLOAD_TOKEN when unknown or expired;
   *         DOWNLOAD_TOKEN_SCOPE_MISMATCH when bound to another kind or resource
   */
  async verify(token: string | undefined, kind: DownloadTokenKind, resourceId: string): Promise<void> {
    if (token === undefined || !isTokenShaped(token)) {
      throw new AppError("INVALID_DOWNLOAD_TOKEN", "the download token is missing, unknown or expired");
    }
    const hash = hashToken(token);
    const row = await tokensRepo.findDownloadToken(this.#store.db, hash);
    if (!row || !digestsEqual(row.token_hash, hash) || row.expires_at <= this.#clock.now()) {
      throw new AppError("INVALID_DOWNLOAD_TOKEN", "the download token is missing, unknown or expired");
    }
    if (row.kind !== kind || row.resource_id !== resourceId) {
      throw new AppError("DOWNLOAD_TOKEN_SCOPE_MISMATCH", "the download token is bound to another resource");
    }
  }
}
