/** The answers, uploads and opened files of the backups service (src/services/backups.service.ts). */
import { open } from "node:fs/promises";
import type { Readable } from "node:stream";
import type { z } from "zod";
import { AppError } from "../../errors.js";
import type { snapshotEntrySchema } from "../../protocol/views.schema.js";
import { removePath, type SnapshotRecord } from "../snapshots.js";

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
  };
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
