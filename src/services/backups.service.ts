import { mkdir, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import PQueue from "p-queue";
import type { NodeActorRegistry } from "../actors/registry.js";
import { isoTime, type Clock } from "../lib/clock.js";
import type { Settings } from "../config.js";
import { AppError } from "../errors.js";
import type { EventHub } from "../events/hub.js";
import { isAtomicWriteTemp } from "../lib/atomic-write.js";
import type { Logger } from "../logger.js";
import { newId } from "../protocol/ids.js";
import type { Store } from "../store/db.js";
import { copyDatabaseTo, countSnapshotContents, replaceDataFromSnapshot, type SnapshotContents } from "../store/snapshots.repository.js";
import * as tokensRepo from "../store/tokens.repository.js";
import { VERSION } from "../lib/version.js";
import {
  collectPackageConfigs,
  packageEntries,
  packageRecordPath,
  packageZipPath,
  readPackageRecords,
  writePackageZip,
  type PackageRecord,
} from "./bulk-package.js";
import type { DownloadsService } from "./downloads.service.js";
import type { MeshService } from "./mesh.service.js";
import type { SystemStatus } from "./notifier.js";
import {
  DATA_TABLES,
  DB_ENTRY,
  SNAPSHOT_FORMAT,
  extractSnapshotZip,
  hashFile,
  invalidSnapshot,
  prepareSnapshotDatabase,
  readSnapshotRecord,
  readSnapshotRecords,
  removePath,
  scrubDatabaseCopy,
  snapshotRecordPath,
  snapshotZipPath,
  tableDefinitions,
  writeJsonAtomic,
  writeSnapshotZip,
  type SnapshotManifest,
  type SnapshotRecord,
} from "./snapshots.js";
import { sanitizeSnapshotDatabase, validateSnapshotRows } from "./snapshot-rows.js";
import {
  entryOf,
  openDownload,
  packageDownloadPath,
  receiveSnapshotUpload,
  snapshotExportPath,
  snapshotFilename,
  snapshotZipOf,
  type SnapshotUpload,
  type DownloadFile,
  type PackageDownloadGrant,
  type SnapshotDownloadGrant,
  type SnapshotEntry,
} from "./backups/backup-files.js";
import { sealSnapshotFile } from "./backups/snapshot-crypto.js";

export {
  packageDownloadPath,
  snapshotExportPath,
  SnapshotUpload,
  type DownloadFile,
  type DownloadGrant,
  type PackageDownloadGrant,
  type SnapshotDownloadGrant,
  type SnapshotEntry,
} from "./backups/backup-files.js";

export interface BackupsServiceDeps {
  settings: Settings;
  store: Store;
  clock: Clock;
  log: Logger;
  downloads: DownloadsService;
  mesh: MeshService;
  registry: NodeActorRegistry;
  hub: EventHub;
  /**
   * The `system.status.updated` payload, published after a restore when given (spec §6.5:
   * restore changes the whole mesh). Optional: without it a restore publishes the config list only.
   */
  status?: () => Promise<SystemStatus>;
  /**
   * Runs inside a restore's replacing transaction (the alert rules close the replaced nodes' and
   * pairs' open alerts with it); what it answers runs after the commit.
   */
  inRestore?: () => (() => void) | undefined;
}

/**
 * Work directories and temp files are dot-names; left over by a crash, they are removed at first
 * use (with the temp files of {@link isAtomicWriteTemp}, and `*.json.tmp` sidecars of older versions).
 */
const WORK_PREFIXES = [".create-", ".import-", ".restore-", ".tmp-"];

/**
 * Snapshots and bulk config packages (spec §2.3, §2.4, §4 rows 7–9, rule 8).
 *
 * Files, no tables: `{dataDir}/snapshots/{snapshot_id}.zip` + `{snapshot_id}.json` and
 * `{dataDir}/packages/{package_id}.zip` + `{package_id}.json`. Snapshot changes (create, import,
 * restore, delete) run one at a time, and so do package creations. `snapshot.list.updated` is
 * published after each (spec §6.5 publishing points), after the write.
 */
export class BackupsService {
  /** Snapshot changes, one at a time in call order; a failed one rejects its caller only. */
  readonly #snapshots = new PQueue({ concurrency: 1 });
  /** Package creations, likewise. */
  readonly #packages = new PQueue({ concurrency: 1 });
  readonly #dirs = new Map<string, Promise<string>>();

  constructor(readonly deps: BackupsServiceDeps) {}

  get snapshotsDir(): string {
    return join(this.deps.settings.dataDir, "snapshots");
  }

  get packagesDir(): string {
    return join(this.deps.settings.dataDir, "packages");
  }

  // ---- snapshots -------------------------------------------------------------------------

  /** Every stored snapshot, newest first. */
  async listSnapshots(): Promise<SnapshotEntry[]> {
    return (await readSnapshotRecords(this.snapshotsDir, this.deps.log)).map(entryOf);
  }

  /**
   * Takes a snapshot: a consistent copy of the live database (`VACUUM INTO` while no other
   * statement holds the connection), with sessions, tokens, settings and broker secrets emptied
   * (nodes' private keys stay: docs/backups.md), zipped with its manifest; with `passphrase`, the
   * zip is stored encrypted ({@link sealSnapshotFile}). The passphrase is used for this call only.
   */
  async createSnapshot(passphrase?: string): Promise<SnapshotEntry> {
    const { store, clock } = this.deps;
    const entry = await this.#snapshots.add(async () => {
      const dir = await this.#dir(this.snapshotsDir);
      const work = await mkdtemp(join(dir, ".create-"));
      const id = newId("snap") as string;
      const zipPath = snapshotZipPath(dir, id);
      try {
        const dbFile = join(work, DB_ENTRY);
        await copyDatabaseTo(store, dbFile);
        scrubDatabaseCopy(dbFile);
        const db = await hashFile(dbFile);
        const now = clock.now();
        const manifest: SnapshotManifest = {
          format: SNAPSHOT_FORMAT,
          version: VERSION,
          created_at: isoTime(now),
          db_sha256: db.sha256,
          db_size_bytes: db.size,
        };
        const tmpZip = join(work, "snapshot.zip");
        await writeSnapshotZip(dbFile, manifest, tmpZip);
        const contents = countSnapshotContents(dbFile);
        if (passphrase === undefined) return await this.#store(dir, id, tmpZip, manifest, now, "created", { encrypted: false, contents });
        const sealed = join(work, "snapshot.zip.enc");
        await sealSnapshotFile(tmpZip, sealed, passphrase);
        return await this.#store(dir, id, sealed, manifest, now, "created", { encrypted: true, contents });
      } catch (err) {
        await rm(zipPath, { force: true });
        throw err;
      } finally {
        await removePath(work);
      }
    });
    await this.#publishSnapshots();
    return entry;
  }

  /**
   * Issues a `snapshot_export` download token (spec §2.1) for a stored snapshot.
   * @throws AppError NOT_FOUND
   */
  async snapshotDownload(snapshotId: string): Promise<SnapshotDownloadGrant> {
    const record = await this.#requireSnapshot(snapshotId);
    const issued = await this.deps.downloads.issue("snapshot_export", snapshotId);
    return {
      snapshot_id: snapshotId,
      filename: snapshotFilename(record),
      download_path: `${snapshotExportPath(snapshotId)}?download_token=${encodeURIComponent(issued.token)}`,
      download_token: issued.token,
      download_token_expires_at: isoTime(issued.expiresAt),
    };
  }

  /** Opens a stored snapshot's file (a zip, or the encrypted zip as stored) for download. @throws AppError NOT_FOUND */
  async snapshotFile(snapshotId: string): Promise<DownloadFile> {
    const record = await this.#requireSnapshot(snapshotId);
    return openDownload(snapshotZipPath(this.snapshotsDir, snapshotId), snapshotFilename(record));
  }

  /**
   * Streams a request body into a private work file, refusing more than
   * `settings.maxSnapshotBytes` (declared or counted). The caller passes the result to
   * {@link importSnapshot}, or discards it.
   * @throws AppError PAYLOAD_TOO_LARGE
   */
  async receiveUpload(body: Readable, declaredBytes: number | undefined): Promise<SnapshotUpload> {
    return receiveSnapshotUpload(body, declaredBytes, this.deps.settings.maxSnapshotBytes, () => this.#dir(this.snapshotsDir));
  }

  /**
   * Imports an uploaded snapshot zip as a new stored snapshot (not restored). Refused uploads
   * leave nothing behind; the upload is always discarded. Every row is validated
   * ({@link validateSnapshotRows}) and every node config rendered on the throw-away copy
   * ({@link sanitizeSnapshotDatabase}), so a snapshot that could never be restored is never stored.
   * An encrypted file is checked through its decryption with `passphrase` and stored as uploaded
   * (still encrypted); the passphrase is used for this call only.
   * @throws AppError VALIDATION_FAILED naming the first problem ({@link extractSnapshotZip},
   *         {@link prepareSnapshotDatabase}, {@link validateSnapshotRows}: table, row and field),
   *         SNAPSHOT_PASSPHRASE_REQUIRED, SNAPSHOT_PASSPHRASE_WRONG ({@link snapshotZipOf})
   */
  async importSnapshot(upload: SnapshotUpload, passphrase?: string): Promise<SnapshotEntry> {
    const { store, clock, settings, log } = this.deps;
    try {
      const entry = await this.#snapshots.add(async () => {
        const { zip, encrypted } = await snapshotZipOf(upload.file, upload.dir, passphrase, settings.maxSnapshotBytes);
        const { manifest, dbFile } = await extractSnapshotZip(zip, upload.dir, settings.maxSnapshotBytes);
        await prepareSnapshotDatabase(dbFile, await store.read(tableDefinitions), log);
        await validateSnapshotRows(dbFile);
        // A trial of the restore's re-rendering on this throw-away copy: every config renders.
        await sanitizeSnapshotDatabase(dbFile, clock.now(), log);
        const contents = countSnapshotContents(dbFile);
        const dir = await this.#dir(this.snapshotsDir);
        const id = newId("snap") as string;
        try {
          return await this.#store(dir, id, upload.file, manifest, clock.now(), "imported", { encrypted, contents });
        } catch (err) {
          await rm(snapshotZipPath(dir, id), { force: true });
          throw err;
        }
      });
      await this.#publishSnapshots();
      return entry;
    } finally {
      await upload.discard();
    }
  }

  /**
   * Restores a stored snapshot while the service runs (spec §2.4; docs/history/decisions-2026.md "snapshot
   * restore and input rules"). Nothing in the snapshot is trusted, and nothing live changes until
   * all of it has been checked:
   * 1. an encrypted snapshot is decrypted with `passphrase` into a private work directory
   *    ({@link snapshotZipOf}; the passphrase is used for this call only), and its database is
   *    extracted, checked and brought to the running schema ({@link extractSnapshotZip},
   *    {@link prepareSnapshotDatabase});
   * 2. every row of every data table is validated with the API's field rules
   *    ({@link validateSnapshotRows});
   * 3. in the private copy, broker credentials and machine snapshots are dropped (restored
   *    nodes start fresh, dynamic ones re-bind) and every node config is re-rendered
   *    ({@link sanitizeSnapshotDatabase});
   * 4. ONE transaction on the live connection replaces every data table ({@link DATA_TABLES})
   *    with the copy's rows, drops every bind token, revokes node config download tokens and
   *    closes the open alerts of the nodes and pairs it replaced (`inRestore`);
   * 5. every node actor is rehydrated from the store (a node that cannot be is quarantined,
   *    never a failure), clients that were bound are revoked at the broker, and the console is
   *    told (snapshot list, config list, system status).
   * Admin sessions, settings and secrets (`settings_kv`) and file download tokens stay.
   * A refusal in 1-4 leaves the live database as it was.
   * @returns the snapshot id and what it restored (each dynamic node must bind again)
   * @throws AppError NOT_FOUND, VALIDATION_FAILED (naming table, row and field where a row is at fault),
   *         SNAPSHOT_PASSPHRASE_REQUIRED, SNAPSHOT_PASSPHRASE_WRONG ({@link snapshotZipOf})
   */
  async restoreSnapshot(snapshotId: string, passphrase?: string): Promise<{ restored: string } & SnapshotContents> {
    const { store, registry, clock, log, settings } = this.deps;
    const contents = await this.#snapshots.add(async () => {
      const record = await this.#requireSnapshot(snapshotId);
      const dir = await this.#dir(this.snapshotsDir);
      const work = await mkdtemp(join(dir, ".restore-"));
      try {
        const { zip } = await snapshotZipOf(snapshotZipPath(dir, snapshotId), work, passphrase, settings.maxSnapshotBytes);
        // Checked again (the file may have been touched on disk); bounded by what it recorded.
        const { dbFile } = await extractSnapshotZip(zip, work, record.manifest.db_size_bytes);
        await prepareSnapshotDatabase(dbFile, await store.read(tableDefinitions), log);
        await validateSnapshotRows(dbFile);
        await sanitizeSnapshotDatabase(dbFile, clock.now(), log);
        const restored = countSnapshotContents(dbFile);
        let reloading: Promise<number> | undefined;
        // On the read path's hold: no request transaction is open while the tables change.
        await store.read((conn) => {
          let applied: (() => void) | undefined;
          const inRestore = () => void (applied = this.deps.inRestore?.());
          replaceDataFromSnapshot(conn, dbFile, (table) => invalidSnapshot(`table ${table} differs from this server's schema`), inRestore);
          // Synchronously after the commit: no queued write of an old actor can land in between.
          reloading = registry.reload();
          applied?.();
        });
        const actors = await reloading;
        log.info({ snapshot_id: snapshotId, actors, ...restored }, "snapshot restored");
        return restored;
      } finally {
        await removePath(work);
      }
    });
    await this.#publishSnapshots();
    await this.#publishRestored();
    return { restored: snapshotId, ...contents };
  }

  /** Deletes a stored snapshot and revokes its download tokens. @throws AppError NOT_FOUND */
  async deleteSnapshot(snapshotId: string): Promise<void> {
    const { store } = this.deps;
    await this.#snapshots.add(async () => {
      await this.#requireSnapshot(snapshotId);
      await store.transaction((trx) => tokensRepo.deleteDownloadTokensOf(trx, "snapshot_export", snapshotId));
      // The sidecar first: from then on the snapshot is not listed.
      await rm(snapshotRecordPath(this.snapshotsDir, snapshotId), { force: true });
      await rm(snapshotZipPath(this.snapshotsDir, snapshotId), { force: true });
    });
    await this.#publishSnapshots();
  }

  // ---- bulk config package ----------------------------------------------------------------

  /**
   * Builds the bulk package of the given configs (all when absent) and makes it the one current
   * package (spec §4 rule 8): the previous package's file is deleted and its tokens revoked.
   * Answers a `config_bulk_package` download token (spec §2.1).
   * @throws AppError NOT_FOUND for an unknown config id (nothing is written then)
   */
  async createBulkPackage(configIds?: string[]): Promise<PackageDownloadGrant> {
    const { mesh, store, clock, downloads, log } = this.deps;
    return this.#packages.add(async () => {
      const ids = configIds === undefined ? (await mesh.listConfigs()).map((c) => c.config_id) : [...new Set(configIds)];
      const configs = await collectPackageConfigs(mesh, ids);
      const entries = packageEntries(configs);
      const dir = await this.#dir(this.packagesDir);
      const previous = await readPackageRecords(dir, log);
      const now = clock.now();
      const id = newId("pkg") as string;
      const tmp = join(dir, `.tmp-${id}.zip`);
      const zipPath = packageZipPath(dir, id);
      let record: PackageRecord;
      try {
        await writePackageZip(entries, tmp, new Date(now));
        const { sha256, size } = await hashFile(tmp);
        await rename(tmp, zipPath);
        record = {
          package_id: id,
          filename: `svc-config-bulk-${isoTime(now).replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z")}.zip`,
          created_at: isoTime(now),
          created_at_ms: now,
          size_bytes: size,
          sha256,
          config_ids: ids,
          files: entries.length,
        };
        await writeJsonAtomic(packageRecordPath(dir, id), record);
      } catch (err) {
        await rm(tmp, { force: true });
        await rm(zipPath, { force: true });
        throw err;
      }
      // The new package is in place; now the old ones go, tokens first.
      const stale = new Set(previous.map((p) => p.package_id));
      for (const name of await readdir(dir)) {
        const m = /^([a-z0-9][a-z0-9_-]{0,63})\.(zip|json)$/.exec(name);
        if (m?.[1] !== undefined && m[1] !== id) stale.add(m[1]);
      }
      for (const oldId of stale) {
        await store.transaction((trx) => tokensRepo.deleteDownloadTokensOf(trx, "config_bulk_package", oldId));
        await rm(packageRecordPath(dir, oldId), { force: true });
        await rm(packageZipPath(dir, oldId), { force: true });
      }
      const issued = await downloads.issue("config_bulk_package", id);
      log.info({ package_id: id, configs: ids.length, files: entries.length, replaced: stale.size }, "bulk package created");
      return {
        package_id: id,
        filename: record.filename,
        download_path: `${packageDownloadPath(id)}?download_token=${encodeURIComponent(issued.token)}`,
        download_token: issued.token,
        download_token_expires_at: isoTime(issued.expiresAt),
      };
    });
  }

  /** Opens the current package's zip. @throws AppError NOT_FOUND for any other id */
  async packageFile(packageId: string): Promise<DownloadFile> {
    const record = (await readPackageRecords(this.packagesDir, this.deps.log)).find((p) => p.package_id === packageId);
    if (!record) throw new AppError("NOT_FOUND", `no bulk package ${packageId} (only the latest one exists)`);
    return openDownload(packageZipPath(this.packagesDir, packageId), record.filename);
  }

  // ---- internals --------------------------------------------------------------------------

  async #requireSnapshot(snapshotId: string): Promise<SnapshotRecord> {
    const dir = this.snapshotsDir;
    const record = await readSnapshotRecord(snapshotRecordPath(dir, snapshotId), this.deps.log);
    if (!record || record.snapshot_id !== snapshotId) throw new AppError("NOT_FOUND", `no snapshot ${snapshotId}`);
    return record;
  }

  /** Moves a checked zip into place, then writes its sidecar (which makes it listed). */
  async #store(
    dir: string,
    id: string,
    zipFile: string,
    manifest: SnapshotManifest,
    now: number,
    source: SnapshotRecord["source"],
    what: { encrypted: boolean; contents: SnapshotContents },
  ): Promise<SnapshotEntry> {
    const { sha256, size } = await hashFile(zipFile);
    await rename(zipFile, snapshotZipPath(dir, id));
    const record: SnapshotRecord = {
      snapshot_id: id,
      created_at: isoTime(now),
      created_at_ms: now,
      size_bytes: size,
      sha256,
      source,
      manifest,
      encrypted: what.encrypted,
      contents: what.contents,
    };
    await writeJsonAtomic(snapshotRecordPath(dir, id), record);
    this.deps.log.info({ snapshot_id: id, source, size_bytes: size, encrypted: what.encrypted }, "snapshot stored");
    return entryOf(record);
  }

  /** Creates `path` (0700) once; work files a crash left behind are removed then. */
  #dir(path: string): Promise<string> {
    let ready = this.#dirs.get(path);
    if (!ready) {
      ready = (async () => {
        await mkdir(path, { recursive: true, mode: 0o700 });
        for (const name of await readdir(path)) {
          if (WORK_PREFIXES.some((p) => name.startsWith(p)) || name.endsWith(".json.tmp") || isAtomicWriteTemp(name)) {
            await removePath(join(path, name));
          }
        }
        return path;
      })();
      this.#dirs.set(path, ready);
      ready.catch(() => this.#dirs.delete(path));
    }
    return ready;
  }

  async #publishSnapshots(): Promise<void> {
    const { hub, log } = this.deps;
    if (hub.subscriberCount() === 0) return;
    try {
      hub.publish("snapshot.list.updated", { snapshots: await this.listSnapshots() });
    } catch (err) {
      log.error({ err }, "publishing snapshot.list.updated failed");
    }
  }

  async #publishRestored(): Promise<void> {
    const { hub, mesh, status, log } = this.deps;
    if (hub.subscriberCount() === 0) return;
    try {
      hub.publish("config.list.updated", { configs: await mesh.listConfigs() });
      if (status) hub.publish("system.status.updated", await status());
    } catch (err) {
      log.error({ err }, "publishing the restore refresh failed");
    }
  }
}
