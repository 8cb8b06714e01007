/** The answers, uploads and opened files of the backups service (src/services/backups.service.ts). */
import { createWriteStream } from "node:fs";
import { mkdtemp, open } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import type { z } from "zod";
import { AppError } from "../../errors.js";
import type { snapshotEntrySchema } from "../../protocol/views.schema.js";
import { invalidSnapshot, removePath, type SnapshotRecord } from "../snapshots.js";
import { isSealedSnapshot, openSealedSnapshotFile, passphraseRequired } from "./snapshot-crypto.js";

/** One snapshot in the list and the create/import answers (DESIGN §5). */
export type SnapshotEntry = z.output<typeof snapshotEntrySchema>;

/** The one answer shape of every download the backend creates (DESIGN §5). */
export interface DownloadGrant {
  filename: string;
  download_path: string;
  download_token: string;
  download_token_expires_at: string;
}

export interface SnapshotDownloadGrant extends DownloadGrant {
  snapshot_id: string;
}

export interface PackageDownloadGrant extends DownloadGrant {
  package_id: string;
}

/** An opened file to stream to a downloader (the handle stays valid if the file is deleted meanwhile). */
export interface DownloadFile {
  filename: string;
  size: number;
  stream: Readable;
}

/** The route of snapshot exports (spec §4: download token or session). */
export function snapshotExportPath(snapshotId: string): string {
  return `/api/v1/backups/export/${snapshotId}`;
}

/** The route of bulk package downloads (spec §4: download token). */
export function packageDownloadPath(packageId: string): string {
  return `/api/v1/tools/download/config-bulk/package/${packageId}`;
}

/**
 * A snapshot zip received as a request body, in its own work directory under the snapshot
 * directory until it is accepted (moved into place) or discarded.
 */
export class SnapshotUpload {
  constructor(
    /** The private work directory. */
    readonly dir: string,
    readonly file: string,
    readonly size: number,
  ) {}

  /** Removes the work directory and whatever is left in it. Idempotent. */
  async discard(): Promise<void> {
    await removePath(this.dir);
  }
}

/** The list entry of a stored snapshot. */
export function entryOf(record: SnapshotRecord): SnapshotEntry {
  return {
    snapshot_id: record.snapshot_id,
    created_at: record.created_at,
    size_bytes: record.size_bytes,
    sha256: record.sha256,
    encrypted: record.encrypted,
    contents: record.contents ?? null,
  };
}

/** The name a snapshot's file is downloaded under: a zip, or an encrypted zip. */
export function snapshotFilename(record: SnapshotRecord): string {
  return record.encrypted ? `${record.snapshot_id}.zip.enc` : `${record.snapshot_id}.zip`;
}

/** Opens a stored file for a download. @throws AppError NOT_FOUND when it is gone */
export async function openDownload(path: string, filename: string): Promise<DownloadFile> {
  let fh;
  try {
    fh = await open(path, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new AppError("NOT_FOUND", `no file ${filename}`);
    throw err;
  }
  const { size } = await fh.stat();
  return { filename, size, stream: fh.createReadStream({ autoClose: true }) };
}

/**
 * Streams a request body into a new private work directory under `dir()` (`.import-*`), refusing
 * more than `max` bytes (declared, before the directory is asked for, or counted).
 * @throws AppError PAYLOAD_TOO_LARGE, VALIDATION_FAILED (an interrupted upload)
 */
export async function receiveSnapshotUpload(
  body: Readable,
  declaredBytes: number | undefined,
  max: number,
  dir: () => Promise<string>,
): Promise<SnapshotUpload> {
  const tooLarge = () => new AppError("PAYLOAD_TOO_LARGE", `a snapshot may have at most ${max} bytes`);
  if (declaredBytes !== undefined && declaredBytes > max) {
    body.resume(); // discard what is sent, so the 413 reaches the client
    throw tooLarge();
  }
  const work = await mkdtemp(join(await dir(), ".import-"));
  const file = join(work, "upload.zip");
  let size = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      const out = createWriteStream(file, { flags: "wx", mode: 0o600 });
      let failed = false;
      const fail = (err: unknown) => {
        if (failed) return;
        failed = true;
        body.unpipe(out);
        body.resume();
        out.destroy();
        reject(err);
      };
      body.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > max) fail(tooLarge());
      });
      body.on("error", fail);
      body.on("close", () => {
        if (!body.readableEnded) fail(new AppError("VALIDATION_FAILED", "the upload was interrupted"));
      });
      out.on("error", fail);
      out.on("finish", () => {
        if (!failed) resolve();
      });
      body.pipe(out);
    });
    return new SnapshotUpload(work, file, size);
  } catch (err) {
    await removePath(work);
    throw err;
  }
}

/**
 * The snapshot zip inside a snapshot file: the file itself when it is a plain zip, else its
 * decryption with `passphrase` into `{workDir}/decrypted.zip` (removed with the work directory).
 * What the file is decides, not what a sidecar says.
 * @param maxBytes largest accepted decrypted zip
 * @throws AppError SNAPSHOT_PASSPHRASE_REQUIRED (encrypted, no passphrase), SNAPSHOT_PASSPHRASE_WRONG
 *   (wrong passphrase or altered file), VALIDATION_FAILED (a passphrase for a plain zip; a
 *   malformed encrypted file)
 */
export async function snapshotZipOf(
  file: string,
  workDir: string,
  passphrase: string | undefined,
  maxBytes: number,
): Promise<{ zip: string; encrypted: boolean }> {
  if (!(await isSealedSnapshot(file))) {
    if (passphrase !== undefined) throw invalidSnapshot("it is not encrypted; send it without a passphrase");
    return { zip: file, encrypted: false };
  }
  if (passphrase === undefined) throw passphraseRequired();
  const zip = join(workDir, "decrypted.zip");
  await openSealedSnapshotFile(file, zip, passphrase, maxBytes);
  return { zip, encrypted: true };
}
