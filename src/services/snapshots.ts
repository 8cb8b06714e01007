import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { open, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import * as yauzl from "yauzl";
import * as yazl from "yazl";
import { z } from "zod";
import { AppError } from "../errors.js";
import { writeFileAtomic } from "../lib/atomic-write.js";
import { readdirOrEmpty } from "../lib/fs.js";
import type { Logger } from "../logger.js";
import { ID_PATTERN } from "../protocol/ids.js";
import { Store } from "../store/db.js";
import { migrations } from "../store/migrations.js";
import { DATA_TABLE_SINCE, DATA_TABLES, fileTableDefinitions, openSnapshotReader, type SnapshotReader } from "../store/snapshots.repository.js";

/**
 * Snapshot files (spec §2.4; docs/history/decisions-2026.md "Bulk packages, snapshots and MCP"): a zip holding `manifest.json` and `svc.db`, a
 * consistent copy of the database. Metadata lives beside each zip as `{snapshot_id}.json`
 * (the zip is renamed into place first, the sidecar written last, so a listed snapshot always
 * has its file). Everything here is file and SQLite work; the service orders and locks it.
 */

/** Version of the zip layout; import refuses any other. */
export const SNAPSHOT_FORMAT = 1;
export const MANIFEST_ENTRY = "manifest.json";
export const DB_ENTRY = "svc.db";
/** A manifest is a few hundred bytes; anything past this is not ours. */
export const MAX_MANIFEST_BYTES = 64 * 1024;

/**
 * Tables a snapshot carries and a restore replaces, and tables emptied in every snapshot: see
 * `src/store/snapshots.repository.ts`, which holds every statement of snapshots.
 */
export { DATA_TABLES, SCRUBBED_TABLES, scrubDatabaseCopy, tableDefinitions } from "../store/snapshots.repository.js";

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "must be 64 lower-case hex digits");

/** `manifest.json` inside a snapshot zip. */
export const snapshotManifestSchema = z.strictObject({
  format: z.literal(SNAPSHOT_FORMAT),
  /** Server VERSION that wrote the snapshot. */
  version: z.string().min(1).max(64),
  created_at: z.iso.datetime(),
  db_sha256: sha256Hex,
  db_size_bytes: z.number().int().nonnegative(),
});
export type SnapshotManifest = z.infer<typeof snapshotManifestSchema>;

/** The sidecar `{snapshot_id}.json` of a stored snapshot. */
export const snapshotRecordSchema = z.object({
  snapshot_id: z.string().regex(ID_PATTERN),
  /** When this service stored the snapshot (created, or imported), ISO 8601. */
  created_at: z.string(),
  created_at_ms: z.number().int(),
  /** Size and SHA-256 of the zip file, what a download delivers. */
  size_bytes: z.number().int().nonnegative(),
  sha256: sha256Hex,
  source: z.enum(["created", "imported"]),
  manifest: snapshotManifestSchema,
  /** The stored file is an encrypted snapshot (`src/services/backups/snapshot-crypto.ts`); absent in older sidecars. */
  encrypted: z.boolean().default(false),
  /** Counted from the checked database when stored; absent in older sidecars. */
  contents: z.strictObject({ configs: z.number().int(), nodes: z.number().int(), dynamic_nodes: z.number().int() }).optional(),
});
export type SnapshotRecord = z.infer<typeof snapshotRecordSchema>;

/** The refusal of an import: 400 VALIDATION_FAILED naming what is wrong. */
export function invalidSnapshot(reason: string): AppError {
  return new AppError("VALIDATION_FAILED", `the snapshot is not acceptable: ${reason}`);
}

export function snapshotZipPath(dir: string, snapshotId: string): string {
  return join(dir, `${snapshotId}.zip`);
}

export function snapshotRecordPath(dir: string, snapshotId: string): string {
  return join(dir, `${snapshotId}.json`);
}

/** SHA-256 (hex) and size of a file, streamed. */
export async function hashFile(file: string): Promise<{ sha256: string; size: number }> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of createReadStream(file)) {
    const buf = chunk as Buffer;
    size += buf.length;
    hash.update(buf);
  }
  return { sha256: hash.digest("hex"), size };
}

/** Writes JSON (mode 0600) atomically: readers never see half a file (see {@link writeFileAtomic}). */
export async function writeJsonAtomic(file: string, value: unknown): Promise<void> {
  await writeFileAtomic(file, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
}

/**
 * Reads every sidecar of `dir` (a missing directory is an empty list); unreadable sidecars and
 * sidecars without their zip are skipped with a warning.
 */
export async function readSnapshotRecords(dir: string, log: Logger): Promise<SnapshotRecord[]> {
  const names = await readdirOrEmpty(dir);
  const present = new Set(names);
  const out: SnapshotRecord[] = [];
  for (const name of names) {
    if (!name.endsWith(".json") || name.startsWith(".")) continue;
    const record = await readSnapshotRecord(join(dir, name), log);
    if (record && present.has(`${record.snapshot_id}.zip`) && name === `${record.snapshot_id}.json`) out.push(record);
  }
  return out.sort((a, b) => b.created_at_ms - a.created_at_ms || (a.snapshot_id < b.snapshot_id ? 1 : -1));
}

/** One sidecar, or undefined when missing or unreadable. */
export async function readSnapshotRecord(file: string, log: Logger): Promise<SnapshotRecord | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  try {
    const parsed = snapshotRecordSchema.safeParse(JSON.parse(text));
    if (parsed.success) return parsed.data;
  } catch {
    // fall through to the warning
  }
  log.warn({ file }, "unreadable snapshot record ignored");
  return undefined;
}

/** Writes the snapshot zip: `manifest.json` then `svc.db`, both regular files (mode 0644). */
export async function writeSnapshotZip(dbFile: string, manifest: SnapshotManifest, outZip: string): Promise<void> {
  const mtime = new Date(manifest.created_at);
  const zip = new yazl.ZipFile();
  zip.addBuffer(Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`), MANIFEST_ENTRY, { mtime, mode: 0o100644 });
  zip.addFile(dbFile, DB_ENTRY, { mtime, mode: 0o100644 });
  zip.end();
  await pipeline(zip.outputStream as Readable, createWriteStream(outZip, { mode: 0o600 }));
}

/**
 * Reads and checks a snapshot zip, extracting `svc.db` to `{workDir}/svc.db`:
 * exactly the two expected entry names (which rules out `../`, absolute and backslash paths),
 * regular files only (no symlink, directory or device by their external attributes), not
 * encrypted, stored or deflated, sizes bounded before inflating (declared sizes) and while
 * inflating (bytes counted), the CRC-32 of every entry's data equal to its header's (yauzl does
 * not check it; docs/history/decisions-2026.md "Zip CRC-32"), manifest schema, and the database's size and SHA-256 equal to the
 * manifest's.
 * @param maxDbBytes largest accepted uncompressed `svc.db`
 * @throws AppError VALIDATION_FAILED naming the first problem
 */
export async function extractSnapshotZip(
  zipPath: string,
  workDir: string,
  maxDbBytes: number,
): Promise<{ manifest: SnapshotManifest; dbFile: string }> {
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.openPromise(zipPath, {
      lazyEntries: true,
      autoClose: false,
      decodeStrings: true,
      validateEntrySizes: true,
      strictFileNames: true,
    });
  } catch (err) {
    throw invalidSnapshot(`not a readable zip file (${messageOf(err)})`);
  }
  const dbFile = join(workDir, DB_ENTRY);
  let manifestBytes: Buffer | undefined;
  let db: { sha256: string; size: number } | undefined;
  try {
    if (zip.entryCount !== 2) {
      throw invalidSnapshot(`expected exactly the entries ${MANIFEST_ENTRY} and ${DB_ENTRY}, found ${zip.entryCount} entries`);
    }
    for await (const entry of zip.eachEntry()) {
      const name = entry.fileName;
      if (name !== MANIFEST_ENTRY && name !== DB_ENTRY) {
        throw invalidSnapshot(`unexpected entry "${name.slice(0, 200)}" (only ${MANIFEST_ENTRY} and ${DB_ENTRY} are allowed)`);
      }
      if ((name === MANIFEST_ENTRY && manifestBytes) || (name === DB_ENTRY && db)) {
        throw invalidSnapshot(`duplicate entry "${name}"`);
      }
      checkRegularFile(entry);
      const limit = name === MANIFEST_ENTRY ? MAX_MANIFEST_BYTES : maxDbBytes;
      if (entry.uncompressedSize > limit) {
        throw invalidSnapshot(`entry "${name}" would inflate to ${entry.uncompressedSize} bytes, more than the ${limit} allowed`);
      }
      // Never more than declared (yauzl checks too) and never more than the limit.
      const bound = Math.min(limit, entry.uncompressedSize);
      if (name === MANIFEST_ENTRY) {
        const stream = await openEntry(zip, entry);
        const chunks: Buffer[] = [];
        await drain(stream, bound, entry, (chunk) => {
          chunks.push(chunk);
        });
        manifestBytes = Buffer.concat(chunks);
      } else {
        const hash = createHash("sha256");
        // The file first: no await may fall between opening the entry and reading it.
        const fh = await open(dbFile, "wx", 0o600);
        try {
          const stream = await openEntry(zip, entry);
          const size = await drain(stream, bound, entry, async (chunk) => {
            hash.update(chunk);
            await fh.write(chunk);
          });
          db = { sha256: hash.digest("hex"), size };
        } finally {
          await fh.close();
        }
      }
    }
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw invalidSnapshot(messageOf(err));
  } finally {
    zip.close();
  }
  if (!manifestBytes || !db) throw invalidSnapshot(`${MANIFEST_ENTRY} and ${DB_ENTRY} are both required`);
  let manifestJson: unknown;
  try {
    manifestJson = JSON.parse(manifestBytes.toString("utf8"));
  } catch {
    throw invalidSnapshot(`${MANIFEST_ENTRY} is not JSON`);
  }
  const parsed = snapshotManifestSchema.safeParse(manifestJson);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalidSnapshot(`${MANIFEST_ENTRY}: ${issue ? `${issue.path.join(".") || "(root)"}: ${issue.message}` : "invalid"}`);
  }
  const manifest = parsed.data;
  if (manifest.db_size_bytes !== db.size) {
    throw invalidSnapshot(`${DB_ENTRY} has ${db.size} bytes, the manifest says ${manifest.db_size_bytes}`);
  }
  if (manifest.db_sha256 !== db.sha256) throw invalidSnapshot(`${DB_ENTRY} does not match the manifest's db_sha256`);
  return { manifest, dbFile };
}

/** Unix file type bits of the external attributes must say "regular file" (or nothing, as DOS tools write). */
function checkRegularFile(entry: yauzl.Entry): void {
  const name = entry.fileName;
  const unixType = (entry.externalFileAttributes >>> 16) & 0o170000;
  if (unixType === 0o120000) throw invalidSnapshot(`entry "${name}" is a symbolic link`);
  if (unixType !== 0 && unixType !== 0o100000) throw invalidSnapshot(`entry "${name}" is not a regular file`);
  if ((entry.externalFileAttributes & 0x10) !== 0 || name.endsWith("/")) throw invalidSnapshot(`entry "${name}" is a directory`);
  if (entry.isEncrypted()) throw invalidSnapshot(`entry "${name}" is encrypted`);
  if (!entry.canDecodeFileData()) throw invalidSnapshot(`entry "${name}" uses an unsupported compression method`);
}

/**
 * Opens an entry's data. Inflating starts at once (yauzl pipes into a byte-count check), so a
 * lying header can error the stream before anyone reads it: the error is kept on the stream
 * (`errored`, which `drain` reports) instead of escaping as an uncaught exception.
 */
async function openEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<Readable> {
  const stream = (await zip.openReadStreamPromise(entry)) as Readable;
  stream.on("error", () => undefined);
  return stream;
}

/**
 * Reads an entry's stream into `sink`, counting bytes and computing the CRC-32 of the data
 * (`node:zlib` crc32); more than `limit` bytes, or a CRC-32 other than the entry's header
 * declares, destroys it and refuses.
 * @returns the number of bytes read
 * @throws AppError VALIDATION_FAILED
 */
async function drain(stream: Readable, limit: number, entry: yauzl.Entry, sink: (chunk: Buffer) => void | Promise<void>): Promise<number> {
  const name = entry.fileName;
  let total = 0;
  let crc = 0;
  try {
    if (stream.errored) throw invalidSnapshot(`entry "${name}": ${messageOf(stream.errored)}`);
    for await (const chunk of stream) {
      const buf = chunk as Buffer;
      total += buf.length;
      if (total > limit) throw invalidSnapshot(`entry "${name}" inflates past ${limit} bytes`);
      crc = crc32(buf, crc);
      await sink(buf);
    }
  } finally {
    // Inflating may still push into the stream after we stop reading (yauzl then reports "too
    // many bytes" for a lying header): that refusal is already ours, so later errors are moot.
    stream.on("error", () => undefined);
    stream.destroy();
  }
  if (crc >>> 0 !== entry.crc32 >>> 0) {
    throw invalidSnapshot(`entry "${name}" fails its CRC-32 check (data ${hex32(crc)}, header ${hex32(entry.crc32)})`);
  }
  return total;
}

function hex32(n: number): string {
  return (n >>> 0).toString(16).padStart(8, "0");
}

/**
 * Checks an extracted snapshot database and brings it to the running schema, in place:
 * 1. read-only, untrusted schema: `PRAGMA integrity_check` is ok, the migration table exists,
 *    its migrations are a prefix of ours (never a newer server's), the data tables of that
 *    prefix exist (a table a later migration makes, {@link DATA_TABLE_SINCE}, is not required
 *    of an older snapshot), and `PRAGMA foreign_key_check` finds nothing;
 * 2. our pending migrations are applied to this private copy;
 * 3. every data table's CREATE TABLE text equals the live database's, so restore copies exactly
 *    the columns and constraints the service runs with.
 * @param live CREATE TABLE texts of the live database ({@link tableDefinitions})
 * @throws AppError VALIDATION_FAILED
 */
export async function prepareSnapshotDatabase(dbFile: string, live: Map<string, string>, log: Logger): Promise<void> {
  let db: SnapshotReader | undefined;
  try {
    db = openSnapshotReader(dbFile);
    const integrity = db.integrityCheck();
    if (integrity.length !== 1 || integrity[0] !== "ok") {
      throw invalidSnapshot(`${DB_ENTRY} fails PRAGMA integrity_check (${integrity[0] ?? "no answer"})`);
    }
    const tables = db.tableDefinitions();
    if (!tables.has("kysely_migration")) throw invalidSnapshot(`${DB_ENTRY} has no table kysely_migration`);
    const applied = db.appliedMigrations();
    const known = Object.keys(migrations).sort();
    if (applied.length === 0 || applied.length > known.length || applied.some((n, i) => known[i] !== n)) {
      throw invalidSnapshot(`${DB_ENTRY} has a schema this server does not know (migrations: ${applied.join(", ").slice(0, 200)})`);
    }
    // A table made by a migration the snapshot's server had not run yet is made by migrating it.
    for (const table of DATA_TABLES) {
      const since = DATA_TABLE_SINCE[table];
      if (since !== undefined && !applied.includes(since)) continue;
      if (!tables.has(table)) throw invalidSnapshot(`${DB_ENTRY} has no table ${table}`);
    }
    const fk = db.foreignKeyViolations();
    if (fk > 0) throw invalidSnapshot(`${DB_ENTRY} has ${fk} rows breaking foreign keys`);
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw invalidSnapshot(`${DB_ENTRY} is not a usable database (${messageOf(err)})`);
  } finally {
    db?.close();
  }
  let migrated: Store | undefined;
  try {
    migrated = await Store.open(dbFile, log);
  } catch (err) {
    throw invalidSnapshot(`${DB_ENTRY} cannot be brought to the current schema (${messageOf(err)})`);
  } finally {
    await migrated?.close();
  }
  try {
    const tables = fileTableDefinitions(dbFile);
    for (const table of DATA_TABLES) {
      if (tables.get(table) !== live.get(table)) throw invalidSnapshot(`${DB_ENTRY}: table ${table} differs from this server's schema`);
    }
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw invalidSnapshot(`${DB_ENTRY} is not a usable database (${messageOf(err)})`);
  }
}

/** Removes a file or directory tree; missing is fine. */
export async function removePath(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true });
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}
