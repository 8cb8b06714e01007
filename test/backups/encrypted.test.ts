/**
 * Encrypted snapshots through the API (spec §2.4 snapshots, §2.1 and §4 `snapshot_export`
 * downloads; docs/backups.md): created with a passphrase, downloaded with a file token as the
 * encrypted file, imported and restored only with the passphrase; a missing or wrong passphrase
 * changes nothing; the passphrase is never logged and never stored.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { testSettings } from "../../src/config.js";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { SEALED_MAGIC } from "../../src/services/backups/snapshot-crypto.js";
import { sqliteOf } from "../../src/store/connection.js";
import { ADMIN_PASSWORD, createConfig, createNode, injectJson } from "../http/harness.js";
import { assertHttpError, importZip, startBackupsHarness, unzip, type BackupsHarness } from "./harness.js";

const PASSPHRASE = "correct horse battery staple, but longer: ünïcödé too";

function sha256(buf: Buffer): string {
  return createHash("sha256").update(buf).digest("hex");
}

/** Imports a file with the passphrase header (percent-encoded, as the route documents). */
function importWith(h: BackupsHarness, file: Buffer, passphrase: string) {
  return h.http("/api/v1/backups/import", {
    method: "POST",
    bearer: h.token,
    body: file,
    headers: { "content-type": "application/octet-stream", "x-snapshot-passphrase": encodeURIComponent(passphrase) },
  });
}

/** A config with a static and two dynamic nodes, and an encrypted snapshot of it, downloaded by its file token. */
async function encryptedExport(h: BackupsHarness) {
  const config = await createConfig(h, { name: "office" });
  const gateway = await createNode(h, config.config_id, { name: "gateway", public_address: "192.0.2.1" });
  await createNode(h, config.config_id, { name: "laptop-1", mode: "dynamic" });
  await createNode(h, config.config_id, { name: "laptop-2", mode: "dynamic" });
  const created = await h.req("POST", "/api/v1/backups", { passphrase: PASSPHRASE });
  assert.equal(created.status, 201, created.text);
  const grant = await h.req("POST", `/api/v1/backups/${created.json.snapshot_id}/download-token`);
  assert.equal(grant.status, 200, grant.text);
  const file = await h.http(grant.json.download_path);
  assert.equal(file.status, 200);
  return { config, gateway, snap: created.json, grant: grant.json, file: file.body };
}

test("spec §2.4, §2.1: a snapshot created with a passphrase is stored and downloaded encrypted; no private key is readable in it", async (t) => {
  const h = await startBackupsHarness(t);
  const { gateway, snap, grant, file } = await encryptedExport(h);
  assert.equal(snap.encrypted, true);
  assert.deepEqual(snap.contents, { configs: 1, nodes: 3, dynamic_nodes: 2 });
  assert.equal(grant.filename, `${snap.snapshot_id}.zip.enc`);
  assert.match(grant.download_path, /\?download_token=/);
  assert.ok(file.subarray(0, 8).equals(SEALED_MAGIC), "the download is the encrypted file");
  assert.equal(sha256(file), snap.sha256, "the listed sha256 is the file's");
  assert.equal(file.length, snap.size_bytes);
  const privateKey = sqliteOf(h.server.store).prepare("SELECT private_key FROM nodes WHERE node_id = ?").pluck().get(gateway.node_id) as string;
  assert.equal(file.indexOf(Buffer.from(privateKey)), -1);
  assert.equal(file.indexOf(Buffer.from("svc.db")), -1, "not even the zip's entry names are readable");
  const list = (await h.req("GET", "/api/v1/backups")).json.snapshots;
  assert.deepEqual(list, [snap]);
  // An unencrypted snapshot stays a plain zip.
  const plain = (await h.req("POST", "/api/v1/backups")).json;
  assert.equal(plain.encrypted, false);
  const plainFile = await h.http(`/api/v1/backups/export/${plain.snapshot_id}`, { bearer: h.token });
  assert.ok((await unzip(plainFile.body)).has("svc.db"));
});

test("spec §2.4: restoring an encrypted snapshot needs its passphrase; missing or wrong changes nothing; the right one restores", async (t) => {
  const h = await startBackupsHarness(t);
  const { config, snap } = await encryptedExport(h);
  assert.equal((await h.req("DELETE", `/api/v1/configs/${config.config_id}`)).status, 204);
  const fp = h.fingerprint();
  const files = h.snapshotDir();

  const missing = await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`);
  assert.equal(missing.status, 400);
  assert.equal(missing.json.error.code, "SNAPSHOT_PASSPHRASE_REQUIRED");
  assert.match(missing.json.error.message, /encrypted/);
  const wrong = await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`, { passphrase: "not the passphrase" });
  assert.equal(wrong.status, 400);
  assert.equal(wrong.json.error.code, "SNAPSHOT_PASSPHRASE_WRONG");
  assert.match(wrong.json.error.message, /wrong passphrase/);
  assert.equal(h.fingerprint(), fp, "a refused restore writes nothing");
  assert.deepEqual(h.snapshotDir(), files, "and leaves no work file");

  const ok = await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`, { passphrase: PASSPHRASE });
  assert.equal(ok.status, 200, ok.text);
  assert.deepEqual(ok.json, { restored: snap.snapshot_id, configs: 1, nodes: 3, dynamic_nodes: 2 });
  const nodes = (await h.req("GET", `/api/v1/configs/${config.config_id}/nodes`)).json.nodes as Array<{ name: string; mode: string; client: { client_initialized: boolean } }>;
  assert.deepEqual(nodes.map((n) => n.name).sort(), ["gateway", "laptop-1", "laptop-2"]);
  // spec §3.2: restored dynamic nodes are not bound; each must bind again.
  assert.deepEqual(nodes.filter((n) => n.mode === "dynamic").map((n) => n.client.client_initialized), [false, false]);
  assert.deepEqual(h.snapshotDir(), files, "the decrypted copy is gone");
});

test("spec §2.4: an encrypted file imports only with its passphrase, is stored still encrypted, and restores", async (t) => {
  const h = await startBackupsHarness(t);
  const { config, file } = await encryptedExport(h);
  const files = h.snapshotDir();
  const fp = h.fingerprint();

  const missing = await h.http("/api/v1/backups/import", { method: "POST", bearer: h.token, body: file, headers: { "content-type": "application/zip" } });
  assertHttpError(missing, "SNAPSHOT_PASSPHRASE_REQUIRED", "no passphrase");
  assertHttpError(await importWith(h, file, "not the passphrase"), "SNAPSHOT_PASSPHRASE_WRONG", "wrong passphrase");
  const altered = Buffer.from(file);
  altered[altered.length - 40] = (altered[altered.length - 40] ?? 0) ^ 1;
  assertHttpError(await importWith(h, altered, PASSPHRASE), "SNAPSHOT_PASSPHRASE_WRONG", "one byte changed");
  assertHttpError(await importWith(h, file.subarray(0, 12), PASSPHRASE), "VALIDATION_FAILED", "truncated header");
  const badEncoding = await h.http("/api/v1/backups/import", {
    method: "POST",
    bearer: h.token,
    body: file,
    headers: { "content-type": "application/zip", "x-snapshot-passphrase": "100%" },
  });
  assertHttpError(badEncoding, "VALIDATION_FAILED", "not percent-encoded");
  assert.deepEqual(h.snapshotDir(), files, "a refused import leaves nothing behind");
  assert.equal(h.fingerprint(), fp);

  const imported = await importWith(h, file, PASSPHRASE);
  assert.equal(imported.status, 201, imported.body.toString());
  assert.equal(imported.json.encrypted, true);
  assert.equal(imported.json.sha256, sha256(file), "stored as uploaded");
  assert.deepEqual(imported.json.contents, { configs: 1, nodes: 3, dynamic_nodes: 2 });
  assert.ok(readFileSync(join(h.dataDir, "snapshots", `${imported.json.snapshot_id}.zip`)).equals(file));

  assert.equal((await h.req("DELETE", `/api/v1/configs/${config.config_id}`)).status, 204);
  const restored = await h.req("POST", `/api/v1/backups/${imported.json.snapshot_id}/restore`, { passphrase: PASSPHRASE });
  assert.equal(restored.status, 200, restored.text);
  assert.equal((await h.req("GET", `/api/v1/configs/${config.config_id}`)).status, 200);
});

test("unencrypted snapshots keep working, and a passphrase for one is refused rather than ignored", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h);
  await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const snap = (await h.req("POST", "/api/v1/backups", {})).json;
  assert.equal(snap.encrypted, false);
  const zip = (await h.http(`/api/v1/backups/export/${snap.snapshot_id}`, { bearer: h.token })).body;
  const fp = h.fingerprint();
  const withPassphrase = await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`, { passphrase: PASSPHRASE });
  assert.equal(withPassphrase.status, 400);
  assert.match(withPassphrase.json.error.message, /not encrypted/);
  assertHttpError(await importWith(h, zip, PASSPHRASE), "VALIDATION_FAILED", "passphrase for a plain zip");
  assert.equal(h.fingerprint(), fp);
  assert.equal((await importZip(h, zip)).status, 201);
  assert.equal((await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`)).status, 200);
  assert.equal((await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`, {})).status, 200);
});

test("a passphrase shorter than 12 characters is refused when creating, and nothing is stored", async (t) => {
  const h = await startBackupsHarness(t);
  const res = await h.req("POST", "/api/v1/backups", { passphrase: "short" });
  assert.equal(res.status, 400);
  assert.equal(res.json.error.code, "VALIDATION_FAILED");
  assert.match(res.json.error.message, /passphrase/);
  assert.deepEqual(h.snapshotDir(), []);
});

test("the passphrase is never logged and never stored: not in any log line at trace level, the database or any file of the data directory", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-passphrase-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const lines: string[] = [];
  const server = await createServer(
    testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }),
    createLogger("trace", { write: (line: string) => void lines.push(line) }),
    { clock: new ManualClock() },
  );
  t.after(() => server.close());
  const login = await injectJson(server, { method: "POST", url: "/api/v1/auth/login", headers: { "content-type": "application/json" }, payload: { password: ADMIN_PASSWORD } });
  const auth = { authorization: `Bearer ${login.json.access_token as string}` };
  const json = { ...auth, "content-type": "application/json" };
  const secret = "a passphrase nobody may see 7f3a";
  const created = await injectJson(server, { method: "POST", url: "/api/v1/backups", headers: json, payload: { passphrase: secret } });
  assert.equal(created.status, 201, created.text);
  const id = created.json.snapshot_id as string;
  const download = await server.app.inject({ method: "GET", url: `/api/v1/backups/export/${id}`, headers: auth });
  for (const passphrase of [secret, `${secret} wrong`]) {
    await server.app.inject({
      method: "POST",
      url: "/api/v1/backups/import",
      headers: { ...auth, "content-type": "application/zip", "x-snapshot-passphrase": encodeURIComponent(passphrase) },
      payload: download.rawPayload,
    });
    await injectJson(server, { method: "POST", url: `/api/v1/backups/${id}/restore`, headers: json, payload: { passphrase } });
  }
  // A refused body (too short) must not echo it either.
  const refused = await injectJson(server, { method: "POST", url: "/api/v1/backups", headers: json, payload: { passphrase: "7f3a-short" } });
  assert.equal(refused.status, 400);
  assert.doesNotMatch(refused.text, /7f3a-short/);
  assert.ok(lines.length > 0, "the service logged");
  for (const needle of ["7f3a", encodeURIComponent(secret)]) {
    assert.equal(lines.filter((l) => l.includes(needle)).length, 0, `a log line holds ${needle}`);
  }
  await server.close();
  const walk = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => (statSync(join(dir, name)).isDirectory() ? walk(join(dir, name)) : [join(dir, name)]));
  for (const file of walk(dataDir)) assert.equal(readFileSync(file).indexOf(Buffer.from("7f3a")), -1, `${file} holds the passphrase`);
});
