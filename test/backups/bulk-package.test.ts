import assert from "node:assert/strict";
import { test } from "node:test";
import { assertError, createConfig, createNode } from "../http/harness.js";
import { FIVE_MINUTES, assertHttpError, startBackupsHarness, unzip, zipEntries, type BackupsHarness } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

const PACKAGE = "/api/v1/tools/download/config-bulk/package";

async function mesh(h: BackupsHarness) {
  const a = await createConfig(h, { name: "Office mesh/1", network_cidr: "10.10.0.0/24" });
  const b = await createConfig(h, { name: "lab", tunnel_protocol: "awg_2", network_cidr: "10.11.0.0/24" });
  const a1 = await createNode(h, a.config_id, { public_address: "192.0.2.1", interface_name: "wg-office" });
  const a2 = await createNode(h, a.config_id, { mode: "dynamic" });
  const b1 = await createNode(h, b.config_id, { public_address: "192.0.2.9" });
  return { a, b, nodes: [a1, a2, b1] };
}

async function staged(h: BackupsHarness, configId: string, nodeId: string): Promise<string> {
  const res = await h.req("GET", `/api/v1/configs/${configId}/nodes/${nodeId}/config`);
  assert.equal(res.status, 200, res.text);
  return res.json.config_text;
}

test("spec §2.3, §4 row 'config-bulk/package': one zip of every node's staged config, {config}/{interface}-{node}.conf, 5-minute token", async (t) => {
  const h = await startBackupsHarness(t);
  const { a, b, nodes } = await mesh(h);
  const [a1, a2, b1] = nodes;
  assert.ok(a1 && a2 && b1);

  const created = await h.req("POST", PACKAGE);
  assert.equal(created.status, 201, created.text);
  const grant = created.json;
  assert.deepEqual(Object.keys(grant).sort(), ["download_path", "download_token", "download_token_expires_at", "filename", "package_id"]);
  assert.match(grant.package_id, /^[a-z0-9][a-z0-9_-]{0,63}$/);
  assert.match(grant.filename, /^svc-config-bulk-\d{8}T\d{6}Z\.zip$/);
  assert.equal(grant.download_path, `${PACKAGE}/${grant.package_id}?download_token=${grant.download_token}`);
  assert.equal(grant.download_token_expires_at, new Date(h.clock.now() + FIVE_MINUTES).toISOString());

  const res = await h.http(grant.download_path);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/zip");
  assert.equal(res.headers.get("content-disposition"), `attachment; filename="${grant.filename}"`);
  assert.equal(res.headers.get("cache-control"), "no-store");
  const files = await unzip(res.body);
  // Unsafe characters of a config name become "_" (one path segment, no traversal).
  const expected = new Map([
    [`Office_mesh_1/wg-office-${a1.node_id}.conf`, await staged(h, a.config_id, a1.node_id)],
    [`Office_mesh_1/svc0-${a2.node_id}.conf`, await staged(h, a.config_id, a2.node_id)],
    [`lab/svc0-${b1.node_id}.conf`, await staged(h, b.config_id, b1.node_id)],
  ]);
  assert.deepEqual([...files.keys()].sort(), [...expected.keys()].sort());
  for (const [name, text] of expected) assert.equal(files.get(name)?.toString("utf8"), text, name);
  for (const e of await zipEntries(res.body)) assert.equal(e.mode & 0o170000, 0o100000, `${e.name} is a regular file`);

  // config_ids selects configs; an empty selection or an unknown id writes nothing.
  const only = await h.req("POST", PACKAGE, { config_ids: [b.config_id] });
  assert.equal(only.status, 201, only.text);
  const onlyFiles = await unzip((await h.http(only.json.download_path)).body);
  assert.deepEqual([...onlyFiles.keys()], [`lab/svc0-${b1.node_id}.conf`]);

  const before = h.packageDir();
  const fp = h.fingerprint();
  assertError(await h.req("POST", PACKAGE, { config_ids: [a.config_id, "cfg-unknown"] }), "NOT_FOUND");
  assertError(await h.req("POST", PACKAGE, { config_ids: [] }), "VALIDATION_FAILED");
  assertError(await h.req("POST", PACKAGE, { config_ids: ["../etc"] }), "VALIDATION_FAILED");
  assert.deepEqual(h.packageDir(), before, "a refused package writes no file");
  assert.equal(h.fingerprint(), fp, "a refused package writes no row");
});

test("spec §4 rule 8, §8: a new package replaces the previous one; the old token is revoked (INVALID_DOWNLOAD_TOKEN) and the old id is gone (404)", async (t) => {
  const h = await startBackupsHarness(t);
  await mesh(h);
  const first = (await h.req("POST", PACKAGE)).json;
  assert.equal((await h.http(first.download_path)).status, 200);
  assert.deepEqual(h.packageDir(), [`${first.package_id}.json`, `${first.package_id}.zip`]);

  h.clock.advance(1000);
  const second = (await h.req("POST", PACKAGE)).json;
  assert.notEqual(second.package_id, first.package_id);
  // Only the latest package exists (spec §8).
  assert.deepEqual(h.packageDir(), [`${second.package_id}.json`, `${second.package_id}.zip`]);

  // The old token was revoked with its package: INVALID_DOWNLOAD_TOKEN, before any 404.
  assertHttpError(await h.http(first.download_path), "INVALID_DOWNLOAD_TOKEN", "old token, old package");
  assertHttpError(await h.http(`${PACKAGE}/${second.package_id}?download_token=${first.download_token}`), "INVALID_DOWNLOAD_TOKEN", "old token, new package");
  // An admin session passes the credential check and finds no such package.
  assertHttpError(await h.http(`${PACKAGE}/${first.package_id}`, { bearer: h.token }), "NOT_FOUND", "admin, old package");
  // The new one works.
  assert.equal((await h.http(second.download_path)).status, 200);
  const rows = sqliteOf(h.server.store).prepare("SELECT resource_id FROM download_tokens WHERE kind = 'config_bulk_package'").all();
  assert.deepEqual(rows, [{ resource_id: second.package_id }], "only the current package has tokens");
});

test("spec §3.7, §5: bulk package download errors — expired, other package, other kind, none, garbage; an admin session opens it", async (t) => {
  const h = await startBackupsHarness(t);
  const { a, nodes } = await mesh(h);
  const grant = (await h.req("POST", PACKAGE)).json;
  const url = `${PACKAGE}/${grant.package_id}`;

  // None, garbage, unknown: INVALID_DOWNLOAD_TOKEN (an unauthenticated caller learns nothing).
  assertHttpError(await h.http(url), "INVALID_DOWNLOAD_TOKEN", "no token");
  assertHttpError(await h.http(`${url}?download_token=${"x".repeat(43)}`), "INVALID_DOWNLOAD_TOKEN", "unknown token");
  assertHttpError(await h.http(`${PACKAGE}/pkg-unknown`), "INVALID_DOWNLOAD_TOKEN", "no token, unknown package");
  assertHttpError(await h.http(url, { bearer: "A".repeat(43) }), "INVALID_DOWNLOAD_TOKEN", "a dead session is no credential");

  // Bound to another resource of the same kind.
  assertHttpError(await h.http(`${PACKAGE}/pkg-other?download_token=${grant.download_token}`), "DOWNLOAD_TOKEN_SCOPE_MISMATCH", "other package id");
  // A token of another kind: a node config token, and a snapshot export token.
  const node = nodes[0];
  assert.ok(node);
  const nodeToken = (await h.req("POST", `/api/v1/configs/${a.config_id}/nodes/${node.node_id}/download-token`)).json.download_token;
  assertHttpError(await h.http(`${url}?download_token=${nodeToken}`), "DOWNLOAD_TOKEN_SCOPE_MISMATCH", "node config token");
  const snap = (await h.req("POST", "/api/v1/backups")).json;
  const snapToken = (await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/download-token`)).json.download_token;
  assertHttpError(await h.http(`${url}?download_token=${snapToken}`), "DOWNLOAD_TOKEN_SCOPE_MISMATCH", "snapshot token");

  // Admin session (decision: accepted for bulk packages, like client artifacts).
  const admin = await h.http(url, { bearer: h.token });
  assert.equal(admin.status, 200);
  assert.equal(admin.headers.get("content-type"), "application/zip");

  // Valid until the last millisecond of its 5 minutes (injected clock), then expired.
  h.clock.advance(FIVE_MINUTES - 1);
  assert.equal((await h.http(grant.download_path)).status, 200);
  h.clock.advance(1);
  assertHttpError(await h.http(grant.download_path), "INVALID_DOWNLOAD_TOKEN", "expired");
  // A session still opens it after the token expired.
  assert.equal((await h.http(url, { bearer: h.token })).status, 200);
});

test("the package route needs the admin session to create a package", async (t) => {
  const h = await startBackupsHarness(t);
  assertError(await h.req("POST", PACKAGE, undefined, { auth: false }), "UNAUTHORIZED");
  assert.deepEqual(h.packageDir(), []);
});
