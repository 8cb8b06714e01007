import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { createServer as createNetServer } from "node:net";
import { join } from "node:path";
import type { TestContext } from "node:test";
import * as yauzl from "yauzl";
import * as yazl from "yazl";
import type { Settings } from "../../src/config.js";
import { ERROR_CODES, type ErrorCode } from "../../src/errors.js";
import { startHarness, type Harness } from "../http/harness.js";

export const FIVE_MINUTES = 5 * 60 * 1000;

export interface BackupsHarness extends Harness {
  /** `http://127.0.0.1:{port}`, also the service's `publicUrl`. */
  baseUrl: string;
  /** A real HTTP request to the listening service (a path, or a full URL). */
  http(pathOrUrl: string, init?: { method?: string; bearer?: string; body?: Buffer | string; headers?: Record<string, string> }): Promise<HttpRes>;
  /** Names in `{dataDir}/snapshots` (none when it does not exist), sorted. */
  snapshotDir(): string[];
  /** Names in `{dataDir}/packages`, sorted. */
  packageDir(): string[];
}

export interface HttpRes {
  status: number;
  headers: Headers;
  body: Buffer;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test convenience: bodies are checked field by field
  json: any;
}

/** A free TCP port on loopback (the service is then told it is its public URL). */
async function freePort(): Promise<number> {
  const srv = createNetServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const address = srv.address();
  assert.ok(address !== null && typeof address === "object");
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return address.port;
}

/**
 * The test/http harness (real service, real SQLite file, ManualClock, admin logged in), also
 * listening on 127.0.0.1 at the port of its `publicUrl`, so download paths and URLs are fetched
 * over real HTTP.
 */
export async function startBackupsHarness(t: TestContext, overrides: Partial<Settings> = {}): Promise<BackupsHarness> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const h = await startHarness(t, { publicUrl: baseUrl, ...overrides });
  await h.server.app.listen({ host: "127.0.0.1", port });
  const dir = (name: string) => {
    const path = join(h.dataDir, name);
    return existsSync(path) ? readdirSync(path).sort() : [];
  };
  return Object.assign(h, {
    baseUrl,
    async http(pathOrUrl: string, init: { method?: string; bearer?: string; body?: Buffer | string; headers?: Record<string, string> } = {}) {
      const headers: Record<string, string> = { ...(init.headers ?? {}) };
      if (init.bearer !== undefined) headers.authorization = `Bearer ${init.bearer}`;
      const url = pathOrUrl.startsWith("http") ? pathOrUrl : `${baseUrl}${pathOrUrl}`;
      const res = await fetch(url, {
        method: init.method ?? "GET",
        headers,
        ...(init.body === undefined ? {} : { body: init.body }),
      });
      const body = Buffer.from(await res.arrayBuffer());
      let json: unknown;
      try {
        json = JSON.parse(body.toString("utf8"));
      } catch {
        json = undefined;
      }
      return { status: res.status, headers: res.headers, body, json };
    },
    snapshotDir: () => dir("snapshots"),
    packageDir: () => dir("packages"),
  });
}

/** Asserts an error answer over real HTTP: the registered status and the error body's code. */
export function assertHttpError(res: HttpRes, code: ErrorCode, context = ""): void {
  assert.equal(res.status, ERROR_CODES[code].status, `${context} status; body: ${res.body.toString("utf8").slice(0, 300)}`);
  assert.equal(res.json?.error?.code, code, `${context} code`);
}

/** The entries of a zip, by name (a reader for what the service wrote). */
export async function unzip(buf: Buffer): Promise<Map<string, Buffer>> {
  const zip = await yauzl.fromBufferPromise(buf, { lazyEntries: true });
  const out = new Map<string, Buffer>();
  for await (const entry of zip.eachEntry()) {
    const stream = await zip.openReadStreamPromise(entry);
    const chunks: Buffer[] = [];
    for await (const c of stream) chunks.push(c as Buffer);
    out.set(entry.fileName, Buffer.concat(chunks));
  }
  zip.close();
  return out;
}

/** The entries of a zip with their external attributes. */
export async function zipEntries(buf: Buffer): Promise<Array<{ name: string; mode: number }>> {
  const zip = await yauzl.fromBufferPromise(buf, { lazyEntries: true });
  const out: Array<{ name: string; mode: number }> = [];
  for await (const entry of zip.eachEntry()) out.push({ name: entry.fileName, mode: entry.externalFileAttributes >>> 16 });
  zip.close();
  return out;
}

/** Builds a zip with yazl (which itself refuses `../` and absolute names: see {@link renameEntry}). */
export async function buildZip(entries: Array<{ name: string; data: Buffer; mode?: number; compress?: boolean }>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const e of entries) {
    zip.addBuffer(e.data, e.name, { mode: e.mode ?? 0o100644, compress: e.compress ?? true, mtime: new Date("2026-01-01T00:00:00Z") });
  }
  zip.end();
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

/**
 * Replaces an entry name by another of the same length in the local header and the central
 * directory: how a hostile zip gets names no honest writer produces (`../svc.db`, `/svc.db`).
 */
export function renameEntry(zip: Buffer, from: string, to: string): Buffer {
  assert.equal(from.length, to.length);
  const out = Buffer.from(zip);
  const needle = Buffer.from(from);
  let at = out.indexOf(needle);
  let count = 0;
  while (at >= 0) {
    out.write(to, at, "latin1");
    count++;
    at = out.indexOf(needle, at + 1);
  }
  assert.equal(count, 2, "the name appears in the local header and the central directory");
  return out;
}

/**
 * Makes an entry claim `size` uncompressed bytes in both headers (a bomb that lies about its
 * size): the local header's field at +22 and the central directory's at +24.
 */
export function lieAboutSize(zip: Buffer, name: string, size: number): Buffer {
  const out = Buffer.from(zip);
  const nameBuf = Buffer.from(name);
  for (let i = 0; i + 46 <= out.length; i++) {
    const sig = out.readUInt32LE(i);
    if (sig === 0x04034b50) {
      const len = out.readUInt16LE(i + 26);
      if (out.subarray(i + 30, i + 30 + len).equals(nameBuf)) out.writeUInt32LE(size, i + 22);
    } else if (sig === 0x02014b50) {
      const len = out.readUInt16LE(i + 28);
      if (out.subarray(i + 46, i + 46 + len).equals(nameBuf)) out.writeUInt32LE(size, i + 24);
    }
  }
  return out;
}

/** Takes a snapshot through the API and answers its svc.db bytes. */
export async function snapshotDb(h: BackupsHarness): Promise<Buffer> {
  const snap = await h.req("POST", "/api/v1/backups");
  assert.equal(snap.status, 201, snap.text);
  const res = await h.http(`/api/v1/backups/export/${snap.json.snapshot_id}`, { bearer: h.token });
  assert.equal(res.status, 200);
  const db = (await unzip(res.body)).get("svc.db");
  assert.ok(db, "the export holds svc.db");
  return db;
}

/** A snapshot zip around `db` whose manifest matches it (as the service, or a hostile author, would write it). */
export function packSnapshot(db: Buffer): Promise<Buffer> {
  const manifest = {
    format: 1,
    version: "0.1.0",
    created_at: "2026-01-01T00:00:00.000Z",
    db_sha256: createHash("sha256").update(db).digest("hex"),
    db_size_bytes: db.length,
  };
  return buildZip([
    { name: "manifest.json", data: Buffer.from(JSON.stringify(manifest)) },
    { name: "svc.db", data: db },
  ]);
}

/** POSTs a snapshot zip to the import route. */
export async function importZip(h: BackupsHarness, zip: Buffer): Promise<HttpRes> {
  return h.http("/api/v1/backups/import", { method: "POST", bearer: h.token, body: zip, headers: { "content-type": "application/zip" } });
}

/** Imports a database as a snapshot and restores it; asserts both answered 2xx. */
export async function importAndRestore(h: BackupsHarness, db: Buffer): Promise<void> {
  const imported = await importZip(h, await packSnapshot(db));
  assert.equal(imported.status, 201, imported.body.toString("utf8"));
  const restored = await h.req("POST", `/api/v1/backups/${imported.json.snapshot_id}/restore`);
  assert.equal(restored.status, 200, restored.text);
}
