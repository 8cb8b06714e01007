import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import SQLite from "better-sqlite3";
import { VERSION } from "../../src/lib/version.js";
import { opening, startSseServer } from "../events/sse-harness.js";
import { assertError, createConfig, createNode, type Harness } from "../http/harness.js";
import { FIVE_MINUTES, assertHttpError, buildZip, startBackupsHarness, unzip, zipEntries } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** Opens a database held in a buffer (a copy in a temp dir, removed after `fn`). */
function withDb<T>(bytes: Buffer, fn: (db: SQLite.Database) => T): T {
  const dir = mkdtempSync(join(tmpdir(), "svc-snapdb-"));
  try {
    const file = join(dir, "svc.db");
    writeFileSync(file, bytes);
    const db = new SQLite(file, { readonly: true });
    try {
      return fn(db);
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a snapshot is a zip of manifest.json + svc.db; listed newest first with the zip's size and sha256", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h, { name: "office" });
  await createNode(h, config.config_id, { public_address: "192.0.2.1" });

  const first = await h.req("POST", "/api/v1/backups");
  assert.equal(first.status, 201, first.text);
  assert.deepEqual(Object.keys(first.json).sort(), ["contents", "created_at", "encrypted", "sha256", "size_bytes", "snapshot_id"]);
  assert.equal(first.json.encrypted, false);
  assert.deepEqual(first.json.contents, { configs: 1, nodes: 1, dynamic_nodes: 0 });
  assert.match(first.json.snapshot_id, /^snap-[a-z0-9_-]+$/);
  assert.match(first.json.snapshot_id, /^[a-z0-9][a-z0-9_-]{0,63}$/);
  assert.equal(first.json.created_at, new Date(h.clock.now()).toISOString());
  h.clock.advance(60_000);
  const second = (await h.req("POST", "/api/v1/backups")).json;

  const list = await h.req("GET", "/api/v1/backups");
  assert.equal(list.status, 200);
  assert.deepEqual(list.json, { snapshots: [second, first.json] }, "newest first");

  const grant = await h.req("POST", `/api/v1/backups/${first.json.snapshot_id}/download-token`);
  assert.equal(grant.status, 200, grant.text);
  assert.deepEqual(Object.keys(grant.json).sort(), [
    "download_path",
    "download_token",
    "download_token_expires_at",
    "filename",
    "snapshot_id",
  ]);
  assert.equal(grant.json.snapshot_id, first.json.snapshot_id);
  assert.equal(grant.json.filename, `${first.json.snapshot_id}.zip`);
  assert.equal(
    grant.json.download_path,
    `/api/v1/backups/export/${first.json.snapshot_id}?download_token=${grant.json.download_token}`,
  );
  assert.equal(grant.json.download_token_expires_at, new Date(h.clock.now() + FIVE_MINUTES).toISOString());

  const res = await h.http(grant.json.download_path);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/zip");
  assert.equal(res.headers.get("content-disposition"), `attachment; filename="${first.json.snapshot_id}.zip"`);
  assert.equal(res.body.length, first.json.size_bytes);
  assert.equal(sha256(res.body), first.json.sha256);

  assert.deepEqual(
    (await zipEntries(res.body)).map((e) => [e.name, e.mode & 0o170000]),
    [
      ["manifest.json", 0o100000],
      ["svc.db", 0o100000],
    ],
  );
  const files = await unzip(res.body);
  const manifest = JSON.parse(files.get("manifest.json")!.toString("utf8"));
  const db = files.get("svc.db")!;
  assert.deepEqual(manifest, {
    format: 1,
    version: VERSION,
    created_at: first.json.created_at,
    db_sha256: sha256(db),
    db_size_bytes: db.length,
  });
  withDb(db, (d) => {
    assert.equal((d.pragma("integrity_check") as Array<{ integrity_check: string }>)[0]?.integrity_check, "ok");
    assert.deepEqual(d.prepare("SELECT name FROM configs").all(), [{ name: "office" }]);
    assert.equal((d.prepare("SELECT count(*) AS n FROM nodes").get() as { n: number }).n, 1);
    // Decision: secrets, sessions and tokens never leave inside a snapshot.
    for (const table of ["settings_kv", "admin_sessions", "download_tokens", "bind_tokens"]) {
      assert.equal((d.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n, 0, table);
    }
  });
});

test("spec §3.7, §4 row 'backups/export', §5: export errors — expired, other snapshot, other kind, none; an admin session is accepted; delete revokes", async (t) => {
  const h = await startBackupsHarness(t);
  const a = (await h.req("POST", "/api/v1/backups")).json;
  const b = (await h.req("POST", "/api/v1/backups")).json;
  const grantA = (await h.req("POST", `/api/v1/backups/${a.snapshot_id}/download-token`)).json;
  const urlA = `/api/v1/backups/export/${a.snapshot_id}`;
  const urlB = `/api/v1/backups/export/${b.snapshot_id}`;

  assertHttpError(await h.http(urlA), "INVALID_DOWNLOAD_TOKEN", "none");
  assertHttpError(await h.http(`${urlA}?download_token=${"y".repeat(43)}`), "INVALID_DOWNLOAD_TOKEN", "unknown");
  assertHttpError(await h.http(`/api/v1/backups/export/snap-unknown`), "INVALID_DOWNLOAD_TOKEN", "none, unknown snapshot");
  assertHttpError(await h.http(`${urlB}?download_token=${grantA.download_token}`), "DOWNLOAD_TOKEN_SCOPE_MISMATCH", "other snapshot");
  const pkg = (await h.req("POST", "/api/v1/tools/download/config-bulk/package")).json;
  assertHttpError(await h.http(`${urlA}?download_token=${pkg.download_token}`), "DOWNLOAD_TOKEN_SCOPE_MISMATCH", "bulk package token");
  assertHttpError(
    await h.http(`/api/v1/tools/download/config-bulk/package/${pkg.package_id}?download_token=${grantA.download_token}`),
    "DOWNLOAD_TOKEN_SCOPE_MISMATCH",
    "snapshot token at the package route",
  );

  // spec §4 row: "download token or session".
  const admin = await h.http(urlB, { bearer: h.token });
  assert.equal(admin.status, 200);
  assert.equal(sha256(admin.body), b.sha256);
  assertHttpError(await h.http(`/api/v1/backups/export/snap-unknown`, { bearer: h.token }), "NOT_FOUND", "admin, unknown snapshot");

  h.clock.advance(FIVE_MINUTES - 1);
  assert.equal((await h.http(grantA.download_path)).status, 200);
  h.clock.advance(1);
  assertHttpError(await h.http(grantA.download_path), "INVALID_DOWNLOAD_TOKEN", "expired");

  // Delete: 204, gone from the list and the directory, its tokens revoked.
  const fresh = (await h.req("POST", `/api/v1/backups/${b.snapshot_id}/download-token`)).json;
  assert.equal((await h.http(fresh.download_path)).status, 200);
  const del = await h.req("DELETE", `/api/v1/backups/${b.snapshot_id}`);
  assert.equal(del.status, 204);
  assert.deepEqual((await h.req("GET", "/api/v1/backups")).json, { snapshots: [a] });
  assert.deepEqual(h.snapshotDir(), [`${a.snapshot_id}.json`, `${a.snapshot_id}.zip`]);
  assertHttpError(await h.http(fresh.download_path), "INVALID_DOWNLOAD_TOKEN", "token of a deleted snapshot");
  assertHttpError(await h.http(urlB, { bearer: h.token }), "NOT_FOUND", "admin, deleted snapshot");
  assertError(await h.req("DELETE", `/api/v1/backups/${b.snapshot_id}`), "NOT_FOUND");
  assertError(await h.req("POST", `/api/v1/backups/${b.snapshot_id}/download-token`), "NOT_FOUND");
  assertError(await h.req("POST", `/api/v1/backups/${b.snapshot_id}/restore`), "NOT_FOUND");
});

/** Every GET answer describing the mesh, keyed by URL. */
async function capture(h: Harness): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const get = async (url: string) => {
    const res = await h.req("GET", url);
    assert.equal(res.status, 200, `${url}: ${res.text}`);
    out[url] = res.json;
    return res.json;
  };
  const configs = await get("/api/v1/configs");
  for (const c of configs.configs as Array<{ config_id: string }>) {
    const base = `/api/v1/configs/${c.config_id}`;
    const detail = await get(base);
    await get(`${base}/mesh-pairs`);
    await get(`${base}/tags`);
    await get(`${base}/nodes`);
    for (const n of detail.nodes as Array<{ node_id: string }>) {
      await get(`${base}/nodes/${n.node_id}`);
      await get(`${base}/nodes/${n.node_id}/config`);
      await get(`${base}/nodes/${n.node_id}/port-forwards`);
      await get(`${base}/nodes/${n.node_id}/endpoint-status`);
    }
  }
  return out;
}

test("restore brings configs, nodes, mesh pairs, port forwards and staged configs back exactly, and rehydrates every actor", async (t) => {
  const h = await startBackupsHarness(t);
  const a = await createConfig(h, { name: "office", network_cidr: "10.30.0.0/24" });
  const b = await createConfig(h, { name: "lab", tunnel_protocol: "awg_2", network_cidr: "10.31.0.0/24" });
  const a1 = await createNode(h, a.config_id, { public_address: "192.0.2.1", tags: ["edge"] });
  const a2 = await createNode(h, a.config_id, { mode: "dynamic", interface_name: "wg-a2" });
  const a3 = await createNode(h, a.config_id, { public_address: "192.0.2.3", listen_port: 51999, tags: ["edge", "db"] });
  await createNode(h, b.config_id, { public_address: "192.0.2.9" });
  const pairs = (await h.req("GET", `/api/v1/configs/${a.config_id}/mesh-pairs`)).json.mesh_pairs as Array<{ pair_id: string }>;
  assert.equal(pairs.length, 3);
  assert.equal((await h.req("PATCH", `/api/v1/configs/${a.config_id}/mesh-pairs/${pairs[0]!.pair_id}`, { enabled: false })).status, 200);
  const pf = await h.req("POST", `/api/v1/configs/${a.config_id}/nodes/${a1.node_id}/port-forwards`, {
    protocol: "tcp",
    listen_port: 8443,
    target_address: a3.address,
    target_port: 443,
  });
  assert.equal(pf.status, 201, pf.text);
  const bind = await h.req("POST", `/api/v1/configs/${a.config_id}/nodes/${a2.node_id}/bind-command`);
  assert.equal(bind.status, 200, bind.text);

  const before = await capture(h);
  const registry = h.server.registry;
  const actorsBefore = registry.size;
  assert.equal(actorsBefore, 4);
  const projectionBefore = registry.projection(a.config_id, a2.node_id);
  assert.ok(projectionBefore);
  const secretsBefore = sqliteOf(h.server.store).prepare("SELECT * FROM settings_kv ORDER BY key").all();

  const snap = (await h.req("POST", "/api/v1/backups")).json;
  assert.deepEqual(snap.contents, { configs: 2, nodes: 4, dynamic_nodes: 1 }, "counted from the snapshot when it was taken");

  // Change configs and nodes through the REST API.
  h.clock.advance(3_600_000);
  assert.equal((await h.req("DELETE", `/api/v1/configs/${b.config_id}`)).status, 204);
  assert.equal((await h.req("DELETE", `/api/v1/configs/${a.config_id}/nodes/${a3.node_id}`)).status, 204);
  assert.equal((await h.req("PATCH", `/api/v1/configs/${a.config_id}/nodes/${a1.node_id}`, { public_address: "198.51.100.7", tags: [] })).status, 200);
  assert.equal((await h.req("PATCH", `/api/v1/configs/${a.config_id}/nodes/${a2.node_id}`, { mode: "static" })).status, 200);
  const c = await createConfig(h, { name: "new", network_cidr: "10.32.0.0/24" });
  const c1 = await createNode(h, c.config_id);
  await createNode(h, a.config_id, { name: "late" });
  const nodeToken = (await h.req("POST", `/api/v1/configs/${c.config_id}/nodes/${c1.node_id}/download-token`)).json.download_path;
  assert.notDeepEqual(await capture(h), before);
  assert.equal(registry.has(c.config_id, c1.node_id), true);

  const restored = await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`);
  assert.equal(restored.status, 200, restored.text);
  assert.deepEqual(restored.json, { restored: snap.snapshot_id, ...snap.contents });

  // Exactly as before, answer by answer (the admin session survived the restore).
  assert.deepEqual(await capture(h), before);
  // Actors: one per restored node, none for nodes the snapshot does not have, projections as before.
  assert.equal(registry.size, actorsBefore);
  assert.equal(registry.has(c.config_id, c1.node_id), false);
  assert.equal(registry.has(a.config_id, a3.node_id), true);
  // Projections as before, except what a restore never takes from a snapshot (nothing in it is trusted): the
  // machine state starts fresh from the columns, so the bind token the restore dropped is gone.
  assert.equal(projectionBefore.bindToken, "valid");
  assert.deepEqual(registry.projection(a.config_id, a2.node_id), { ...projectionBefore, bindToken: "none" });
  // Decisions: settings and secrets are the live ones; bind tokens are dropped; node config tokens revoked.
  assert.deepEqual(sqliteOf(h.server.store).prepare("SELECT * FROM settings_kv ORDER BY key").all(), secretsBefore);
  assert.equal((sqliteOf(h.server.store).prepare("SELECT count(*) AS n FROM bind_tokens").get() as { n: number }).n, 0);
  assertError(await h.req("GET", nodeToken, undefined, { auth: false }), "INVALID_DOWNLOAD_TOKEN");
  assert.equal((sqliteOf(h.server.store).pragma("foreign_key_check") as unknown[]).length, 0);
  assert.equal(
    (sqliteOf(h.server.store).prepare("SELECT count(*) AS n FROM pragma_database_list WHERE name = 'snap'").get() as { n: number }).n,
    0,
    "the snapshot database is detached",
  );
  // The service keeps working on the restored data.
  const after = await createNode(h, a.config_id, { name: "after-restore" });
  assert.equal(registry.has(a.config_id, after.node_id), true);
  assert.deepEqual(h.snapshotDir(), [`${snap.snapshot_id}.json`, `${snap.snapshot_id}.zip`], "no work files left");
});

test("spec §6.5 publishing points: snapshot create, import, restore and delete publish snapshot.list.updated after the write", async (t) => {
  const s = await startSseServer(t);
  const stream = await s.open();
  t.after(() => stream.destroy());
  await opening(stream);
  const api = async (method: string, path: string, body?: Buffer) => {
    const res = await fetch(`${s.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${s.token}`, ...(body ? { "content-type": "application/zip" } : {}) },
      ...(body ? { body } : {}),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };
  const isList = (f: { event: string | undefined }) => f.event === "snapshot.list.updated";

  const created = await api("POST", "/api/v1/backups");
  assert.equal(created.status, 201);
  let frame = await stream.waitFor(isList);
  assert.deepEqual(frame.json.payload, { snapshots: [created.json] });

  const grant = await api("POST", `/api/v1/backups/${created.json.snapshot_id}/download-token`);
  const zip = Buffer.from(await (await fetch(`${s.baseUrl}${grant.json.download_path}`)).arrayBuffer());
  s.clock.advance(1000);
  const imported = await api("POST", "/api/v1/backups/import", zip);
  assert.equal(imported.status, 201);
  frame = await stream.waitFor(isList);
  assert.deepEqual(frame.json.payload, { snapshots: [imported.json, created.json] });

  const restored = await api("POST", `/api/v1/backups/${imported.json.snapshot_id}/restore`);
  assert.equal(restored.status, 200);
  frame = await stream.waitFor(isList);
  assert.deepEqual(frame.json.payload, { snapshots: [imported.json, created.json] });
  const configs = await stream.waitFor((f) => f.event === "config.list.updated");
  assert.deepEqual(configs.json.payload, { configs: [] });

  assert.equal((await api("DELETE", `/api/v1/backups/${created.json.snapshot_id}`)).status, 204);
  frame = await stream.waitFor(isList);
  assert.deepEqual(frame.json.payload, { snapshots: [imported.json] });
});

test("a stored snapshot altered on disk is checked again at restore: refused, and the live data is untouched", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h);
  await createNode(h, config.config_id);
  const snap = (await h.req("POST", "/api/v1/backups")).json;
  await createNode(h, config.config_id);
  const zipPath = join(h.dataDir, "snapshots", `${snap.snapshot_id}.zip`);
  const bytes = readFileSync(zipPath);
  const files = await unzip(bytes);
  const db = Buffer.from(files.get("svc.db")!);
  db[db.length - 10] = (db[db.length - 10]! + 1) % 256; // one byte, so the digest no longer matches
  writeFileSync(zipPath, await buildZip([
    { name: "manifest.json", data: files.get("manifest.json")! },
    { name: "svc.db", data: db },
  ]));
  const fp = h.fingerprint();
  const actors = h.server.registry.size;
  const res = await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`);
  assertError(res, "VALIDATION_FAILED");
  assert.match(res.json.error.message, /db_sha256/);
  assert.equal(h.fingerprint(), fp);
  assert.equal(h.server.registry.size, actors);
  assert.deepEqual(h.snapshotDir(), [`${snap.snapshot_id}.json`, `${snap.snapshot_id}.zip`], "no work files left");
});

test("spec §2.4: temp files a crash left in the snapshots directory (atomic-write temps, older `*.json.tmp` sidecars) are removed at first use; other files stay", async (t) => {
  const h = await startBackupsHarness(t);
  const dir = join(h.dataDir, "snapshots");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, `.snap-gone.json.${process.pid}.0123456789ab.tmp`), "{");
  writeFileSync(join(dir, "snap-gone.json.tmp"), "{");
  writeFileSync(join(dir, "notes.txt"), "kept");

  const created = await h.req("POST", "/api/v1/backups");
  assert.equal(created.status, 201, created.text);
  const id = created.json.snapshot_id as string;
  assert.deepEqual(h.snapshotDir(), [`${id}.json`, `${id}.zip`, "notes.txt"].sort());
});
