import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { test } from "node:test";
import SQLite from "better-sqlite3";
import { createConfig, createNode } from "../http/harness.js";
import {
  assertHttpError,
  buildZip,
  lieAboutSize,
  renameEntry,
  startBackupsHarness,
  unzip,
  type BackupsHarness,
} from "./harness.js";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const MiB = 1024 * 1024;

/** A manifest that matches `db` (so only the defect under test is wrong). */
function manifestFor(db: Buffer, extra: Record<string, unknown> = {}): Buffer {
  return Buffer.from(
    JSON.stringify({
      format: 1,
      version: "0.1.0",
      created_at: "2026-01-01T00:00:00.000Z",
      db_sha256: sha256(db),
      db_size_bytes: db.length,
      ...extra,
    }),
  );
}

/** A snapshot made by the service itself, and its svc.db bytes. */
async function exported(h: BackupsHarness): Promise<{ zip: Buffer; db: Buffer; manifest: Buffer }> {
  const config = await createConfig(h);
  await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const snap = (await h.req("POST", "/api/v1/backups")).json;
  const res = await h.http(`/api/v1/backups/export/${snap.snapshot_id}`, { bearer: h.token });
  assert.equal(res.status, 200);
  const files = await unzip(res.body);
  return { zip: res.body, db: files.get("svc.db")!, manifest: files.get("manifest.json")! };
}

/** A valid SQLite database without our tables. */
function foreignDatabase(): Buffer {
  const db = new SQLite(":memory:");
  try {
    db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)");
    return Buffer.from(db.serialize());
  } finally {
    db.close();
  }
}

/**
 * Posts `body` to the import route and checks the refusal changed nothing: 400 (or `code`), the
 * snapshot directory's listing, the snapshot list and the database fingerprint are as before.
 */
async function refused(h: BackupsHarness, body: Buffer, label: string, code: "VALIDATION_FAILED" | "PAYLOAD_TOO_LARGE" | "UNSUPPORTED_MEDIA_TYPE" = "VALIDATION_FAILED", contentType = "application/zip") {
  const dir = h.snapshotDir();
  const list = (await h.req("GET", "/api/v1/backups")).json;
  const fp = h.fingerprint();
  const res = await h.http("/api/v1/backups/import", { method: "POST", bearer: h.token, body, headers: { "content-type": contentType } });
  assertHttpError(res, code, label);
  if (process.env.SHOW_REFUSALS) console.log(label, "->", res.json.error.message);
  assert.deepEqual(h.snapshotDir(), dir, `${label}: no file left behind`);
  assert.deepEqual((await h.req("GET", "/api/v1/backups")).json, list, `${label}: list unchanged`);
  assert.equal(h.fingerprint(), fp, `${label}: database unchanged`);
  return res;
}

test("an exported snapshot imports as a new snapshot (not restored), as application/zip or application/octet-stream", async (t) => {
  const h = await startBackupsHarness(t);
  const { zip } = await exported(h);
  const fp = h.fingerprint();
  h.clock.advance(1000);
  const res = await h.http("/api/v1/backups/import", { method: "POST", bearer: h.token, body: zip, headers: { "content-type": "application/zip" } });
  assert.equal(res.status, 201, res.body.toString());
  assert.deepEqual(Object.keys(res.json).sort(), ["contents", "created_at", "encrypted", "sha256", "size_bytes", "snapshot_id"]);
  assert.equal(res.json.sha256, sha256(zip));
  assert.equal(res.json.size_bytes, zip.length);
  assert.equal(res.json.created_at, new Date(h.clock.now()).toISOString());
  assert.equal(h.fingerprint(), fp, "importing does not restore");
  const list = (await h.req("GET", "/api/v1/backups")).json.snapshots;
  assert.equal(list.length, 2);
  assert.deepEqual(list[0], res.json);

  const octet = await h.http("/api/v1/backups/import", { method: "POST", bearer: h.token, body: zip, headers: { "content-type": "application/octet-stream" } });
  assert.equal(octet.status, 201);
  assert.equal(h.snapshotDir().length, 6, "three snapshots, zip + record each, no work files");

  // Without the admin bearer nothing is read or written.
  const dir = h.snapshotDir();
  assertHttpError(await h.http("/api/v1/backups/import", { method: "POST", body: zip, headers: { "content-type": "application/zip" } }), "UNAUTHORIZED");
  assert.deepEqual(h.snapshotDir(), dir);
});

test("hostile entries are refused and change nothing — ../, absolute path, symlink, extra or missing entry", async (t) => {
  const h = await startBackupsHarness(t);
  const { db, manifest } = await exported(h);

  const traversal = renameEntry(
    await buildZip([
      { name: "manifest.json", data: manifest },
      { name: "xx/svc.db", data: db },
    ]),
    "xx/svc.db",
    "../svc.db",
  );
  await refused(h, traversal, "../ entry");

  const absolute = renameEntry(
    await buildZip([
      { name: "manifest.json", data: manifest },
      { name: "Zsvc.db", data: db },
    ]),
    "Zsvc.db",
    "/svc.db",
  );
  await refused(h, absolute, "absolute path entry");

  const backslash = renameEntry(
    await buildZip([
      { name: "manifest.json", data: manifest },
      { name: "xxxsvc.db", data: db },
    ]),
    "xxxsvc.db",
    "..\\svc.db",
  );
  await refused(h, backslash, "backslash entry");

  const target = Buffer.from("/etc/passwd");
  const symlink = await buildZip([
    { name: "manifest.json", data: manifestFor(target) },
    { name: "svc.db", data: target, mode: 0o120777 },
  ]);
  const res = await refused(h, symlink, "symlink entry");
  assert.match(res.json.error.message, /symbolic link/);

  await refused(
    h,
    await buildZip([
      { name: "manifest.json", data: manifest },
      { name: "svc.db", data: db },
      { name: "extra.txt", data: Buffer.from("x") },
    ]),
    "extra entry",
  );
  await refused(h, await buildZip([{ name: "svc.db", data: db }, { name: "notes.json", data: manifest }]), "unexpected name");
  await refused(h, await buildZip([{ name: "svc.db", data: db }]), "missing manifest");
  await refused(
    h,
    await buildZip([
      { name: "manifest.json", data: manifest },
      { name: "manifest.json", data: manifest },
    ]),
    "duplicate entry",
  );
});

test("a zip bomb is refused before it inflates past SVC_MAX_SNAPSHOT_BYTES, whether its header is honest or lies", async (t) => {
  const h = await startBackupsHarness(t, { maxSnapshotBytes: MiB });
  await exported(h);
  const zeros = Buffer.alloc(8 * MiB);
  const bomb = await buildZip([
    { name: "manifest.json", data: manifestFor(zeros) },
    { name: "svc.db", data: zeros },
  ]);
  assert.ok(bomb.length < 64 * 1024, "small on the wire");
  const honest = await refused(h, bomb, "declared 8 MiB");
  assert.match(honest.json.error.message, /would inflate/);
  // The header claims 1000 bytes: counting while inflating stops it.
  await refused(h, lieAboutSize(bomb, "svc.db", 1000), "lying header");
  // A compressed body over the limit is refused as too large.
  await refused(h, randomBytes(MiB + 1), "body over the limit", "PAYLOAD_TOO_LARGE");
});

test("a corrupted or foreign database, a wrong digest, a bad manifest or a non-zip is refused and changes nothing", async (t) => {
  const h = await startBackupsHarness(t);
  const { db } = await exported(h);
  const pack = (dbBytes: Buffer, man: Buffer = manifestFor(dbBytes)) =>
    buildZip([
      { name: "manifest.json", data: man },
      { name: "svc.db", data: dbBytes },
    ]);

  // Pages overwritten after the header: SQLite finds the damage.
  const damaged = Buffer.from(db);
  damaged.fill(0xa5, 4096, Math.min(damaged.length, 4096 * 3));
  await refused(h, await pack(damaged), "damaged pages");
  await refused(h, await pack(randomBytes(8192)), "not a database");
  await refused(h, await pack(foreignDatabase()), "a database without our tables");
  const wrongDigest = await refused(h, await pack(db, manifestFor(db, { db_sha256: sha256(Buffer.from("other")) })), "db_sha256 mismatch");
  assert.match(wrongDigest.json.error.message, /db_sha256/);
  await refused(h, await pack(db, manifestFor(db, { db_size_bytes: db.length + 1 })), "db_size_bytes mismatch");
  await refused(h, await pack(db, manifestFor(db, { format: 2 })), "unknown format");
  await refused(h, await pack(db, manifestFor(db, { unexpected: true })), "unknown manifest field");
  await refused(h, await pack(db, Buffer.from("{not json")), "manifest not JSON");
  await refused(h, randomBytes(4096), "not a zip");
  await refused(h, Buffer.alloc(0), "empty body");
  // A database from a newer server (an unknown migration) is not ours to restore.
  await refused(h, await pack(withMigration(db, "9999_future")), "unknown migration");
  await refused(h, Buffer.from("[]"), "JSON body", "VALIDATION_FAILED", "application/json");
  await refused(h, Buffer.from("a=b"), "form body", "UNSUPPORTED_MEDIA_TYPE", "application/x-www-form-urlencoded");
});

/** A copy of `db` that records one more migration than this server knows. */
function withMigration(db: Buffer, name: string): Buffer {
  const d = new SQLite(db); // an in-memory copy
  try {
    d.prepare("INSERT INTO kysely_migration (name, timestamp) VALUES (?, ?)").run(name, new Date().toISOString());
    return Buffer.from(d.serialize());
  } finally {
    d.close();
  }
}
