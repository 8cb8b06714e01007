import type { Clock } from "../lib/clock.js";
import { digestsEqual, hashToken, isTokenShaped, mintToken } from "../domain/tokens.js";
import { AppError } from "../errors.js";
import type { Store } from "../store/db.js";
import type { DownloadTokenKind } from "../protocol/download-tokens.js";
import * as tokensRepo from "../store/tokens.repository.js";
import type { AppEvents } from "./app-events.js";

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
  /** Where a recorded config download is announced (`node.config_downloaded`), after its commit. */
  events?: AppEvents;
}

/** What a node's config download last served: the staged version and sha, and when. */
export interface ConfigDownloadRecord {
  config_version: number;
  config_sha256: string;
  /** ms since the epoch */
  downloaded_at: number;
}

/**
 * Short-lived download tokens (spec §2.1, §3.7, §4 rule 1): random, stored hashed, bound to one
 * kind + resource_id, valid for `tokenTtlMs`, usable any number of times until expiry.
 */
export class DownloadsService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #events: AppEvents | undefined;

  constructor(deps: DownloadsServiceDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#ttlMs = deps.tokenTtlMs;
    this.#events = deps.events;
  }

  /**
   * Records that the config download of `nodeId` served its staged `version`/`sha256` now, then
   * announces `node.config_downloaded` after the commit (a static node has no agent to confirm
   * what it runs; this is the console's "changed since last download").
   */
  async recordConfigDownload(configId: string, nodeId: string, staged: { config_version: number; config_sha256: string }): Promise<void> {
    const row = { node_id: nodeId, config_version: staged.config_version, config_sha256: staged.config_sha256, downloaded_at: this.#clock.now() };
    await this.#store.transaction(async (trx) => tokensRepo.upsertNodeConfigDownload(trx, row));
    this.#events?.emit("node.config_downloaded", configId, nodeId);
  }

  /** What the config download of `nodeId` last served, or null when it was never downloaded. */
  async lastConfigDownload(nodeId: string): Promise<ConfigDownloadRecord | null> {
    const row = await tokensRepo.findNodeConfigDownload(this.#store.db, nodeId);
    return row === undefined ? null : { config_version: row.config_version, config_sha256: row.config_sha256, downloaded_at: row.downloaded_at };
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
