import assert from "node:assert/strict";
import { test } from "node:test";
import { assertError, createConfig, createNode, startHarness } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";
import { downloadTokenKindSchema } from "../../src/protocol/download-tokens.js";

const FIVE_MINUTES = 5 * 60 * 1000;

test("spec §4 rows 1-2: a download token downloads exactly that node's config text, without an admin session", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { name: "Office mesh" });
  const a = await createNode(h, config.config_id, { name: "laptop 7", public_address: "192.0.2.1", interface_name: "wg-a" });
  await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const issued = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/download-token`);
  assert.equal(issued.status, 200, issued.text);
  assert.equal(issued.json.download_token_expires_at, new Date(h.clock.now() + FIVE_MINUTES).toISOString());
  assert.ok(issued.json.download_path.startsWith(`/api/v1/configs/${config.config_id}/nodes/${a.node_id}/`));
  assert.ok(issued.json.download_path.endsWith(`?download_token=${issued.json.download_token}`));

  const res = await h.req("GET", issued.json.download_path, undefined, { auth: false });
  assert.equal(res.status, 200);
  assert.match(String(res.headers["content-type"]), /^text\/plain/);
  // Named after the config and the node, not the interface (every node's is svc0 by default).
  assert.equal(res.headers["content-disposition"], 'attachment; filename="Office-mesh-laptop-7.conf"');
  assert.equal(res.headers["cache-control"], "no-store");
  const staged = await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/config`);
  assert.equal(res.text, staged.json.config_text);
  assert.equal(res.text.match(/^PrivateKey = /gm)?.length, 1);
  // Usable again until it expires.
  assert.equal((await h.req("GET", issued.json.download_path, undefined, { auth: false })).status, 200);
});

test("spec §3.7: a token is valid for 5 minutes, then INVALID_DOWNLOAD_TOKEN (injected clock)", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const a = await createNode(h, config.config_id);
  const { download_path } = (await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/download-token`)).json;
  h.clock.advance(FIVE_MINUTES - 1);
  assert.equal((await h.req("GET", download_path, undefined, { auth: false })).status, 200);
  h.clock.advance(1);
  assertError(await h.req("GET", download_path, undefined, { auth: false }), "INVALID_DOWNLOAD_TOKEN");
  // An admin session does not open node config downloads: the token is the only key (spec §5).
  assertError(await h.req("GET", download_path), "INVALID_DOWNLOAD_TOKEN");
});

test("spec §4 rule 1, §3.7: another node's token answers DOWNLOAD_TOKEN_SCOPE_MISMATCH; unknown or missing tokens INVALID_DOWNLOAD_TOKEN", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const other = await createConfig(h, { network_cidr: "10.98.0.0/24" });
  const a = await createNode(h, config.config_id);
  const b = await createNode(h, config.config_id);
  const c = await createNode(h, other.config_id);
  const tokenA = (await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/download-token`)).json.download_token;
  const pathB = `/api/v1/configs/${config.config_id}/nodes/${b.node_id}/config/download`;
  const pathC = `/api/v1/configs/${other.config_id}/nodes/${c.node_id}/config/download`;
  // A token already used by its own node is still refused for another node.
  assert.equal((await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/config/download?download_token=${tokenA}`, undefined, { auth: false })).status, 200);
  assertError(await h.req("GET", `${pathB}?download_token=${tokenA}`, undefined, { auth: false }), "DOWNLOAD_TOKEN_SCOPE_MISMATCH");
  assertError(await h.req("GET", `${pathC}?download_token=${tokenA}`, undefined, { auth: false }), "DOWNLOAD_TOKEN_SCOPE_MISMATCH");
  // Same node id under another config id: still a mismatch, never another config's text.
  assertError(
    await h.req("GET", `/api/v1/configs/${other.config_id}/nodes/${a.node_id}/config/download?download_token=${tokenA}`, undefined, { auth: false }),
    "DOWNLOAD_TOKEN_SCOPE_MISMATCH",
  );
  assertError(await h.req("GET", pathB, undefined, { auth: false }), "INVALID_DOWNLOAD_TOKEN");
  assertError(await h.req("GET", `${pathB}?download_token=${"x".repeat(43)}`, undefined, { auth: false }), "INVALID_DOWNLOAD_TOKEN");
  assertError(await h.req("GET", `${pathB}?download_token=%00`, undefined, { auth: false }), "INVALID_DOWNLOAD_TOKEN");
  assertError(await h.req("GET", `${pathB}?download_token=${"x".repeat(1024)}`, undefined, { auth: false }), "VALIDATION_FAILED");
});

test("spec §7 DOWNLOAD_TOKEN_SCOPE_MISMATCH, kind half: a token for the same resource_id but another kind is refused, at the node config route and for every pair of kinds", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id);
  const path = `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/config/download`;
  // The node config download's resource id, bound to each other kind (spec §3.7 "its own kind + resource_id").
  const resourceId = `${config.config_id}/${node.node_id}`;
  for (const kind of ["client_artifact", "config_bulk_package", "snapshot_export"] as const) {
    const { token } = await h.server.downloads.issue(kind, resourceId);
    assertError(await h.req("GET", `${path}?download_token=${token}`, undefined, { auth: false }), "DOWNLOAD_TOKEN_SCOPE_MISMATCH", kind);
  }
  const own = await h.server.downloads.issue("node_config", resourceId);
  assert.equal((await h.req("GET", `${path}?download_token=${own.token}`, undefined, { auth: false })).status, 200, "its own kind opens it");

  // The service's rule for every ordered pair of kinds over one shared resource id.
  const kinds = downloadTokenKindSchema.options;
  for (const issuedFor of kinds) {
    const { token } = await h.server.downloads.issue(issuedFor, "shared-resource");
    for (const presentedFor of kinds) {
      const verdict = await h.server.downloads.verify(token, presentedFor, "shared-resource").then(
        () => "allowed",
        (err: { code?: string }) => err.code,
      );
      assert.equal(verdict, presentedFor === issuedFor ? "allowed" : "DOWNLOAD_TOKEN_SCOPE_MISMATCH", `${issuedFor} token presented for ${presentedFor}`);
    }
  }
});

test("download tokens are random and stored only as SHA-256; deleting the node revokes them", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const a = await createNode(h, config.config_id);
  const url = `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/download-token`;
  const t1 = (await h.req("POST", url)).json;
  const t2 = (await h.req("POST", url, undefined, { headers: { "content-type": "application/json" } })).json;
  assert.notEqual(t1.download_token, t2.download_token);
  assert.ok(t1.download_token.length >= 43, "32 random bytes");
  const rows = sqliteOf(h.server.store).prepare("SELECT * FROM download_tokens").all() as Array<Record<string, unknown>>;
  assert.equal(rows.length, 2);
  const dump = JSON.stringify(rows);
  assert.ok(!dump.includes(t1.download_token) && !dump.includes(t2.download_token), "no plaintext token stored");
  assert.deepEqual(new Set(rows.map((r) => r.kind)), new Set(["node_config"]));
  assert.deepEqual(new Set(rows.map((r) => r.resource_id)), new Set([`${config.config_id}/${a.node_id}`]));

  // Expired tokens are pruned when new ones are issued.
  h.clock.advance(FIVE_MINUTES);
  await h.req("POST", url);
  assert.equal((sqliteOf(h.server.store).prepare("SELECT count(*) AS n FROM download_tokens").get() as { n: number }).n, 1);

  await h.req("DELETE", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}`);
  assert.equal((sqliteOf(h.server.store).prepare("SELECT count(*) AS n FROM download_tokens").get() as { n: number }).n, 0);
  assertError(await h.req("GET", t1.download_path, undefined, { auth: false }), "INVALID_DOWNLOAD_TOKEN");
  assertError(await h.req("POST", url), "NOT_FOUND");
});

test("a static node's config download records the staged version it served; the staged config answer says what was last downloaded and under which file name", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { name: "edge" });
  const a = await createNode(h, config.config_id, { name: "gw", public_address: "192.0.2.1" });
  const stagedPath = `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/config`;
  const before = (await h.req("GET", stagedPath)).json;
  assert.equal(before.last_download, null, "never downloaded");
  assert.equal(before.filename, "edge-gw.conf");

  const { download_path } = (await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/download-token`)).json;
  h.clock.advance(1_000);
  assert.equal((await h.req("GET", download_path, undefined, { auth: false })).status, 200);
  const after = (await h.req("GET", stagedPath)).json;
  assert.deepEqual(after.last_download, {
    config_version: before.config_version,
    config_sha256: before.config_sha256,
    downloaded_at: new Date(h.clock.now()).toISOString(),
  });

  // A new peer re-stages the node: the staged version moves on, the last download stays.
  await createNode(h, config.config_id, { name: "peer", public_address: "192.0.2.2" });
  const changed = (await h.req("GET", stagedPath)).json;
  assert.ok(changed.config_version > before.config_version, "the staged version moved on");
  assert.equal(changed.last_download.config_version, before.config_version);

  // The record goes with the node.
  assert.equal((await h.req("DELETE", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}`)).status, 204);
  const rows = sqliteOf(h.server.store).prepare("SELECT count(*) AS n FROM node_config_downloads").get() as { n: number };
  assert.equal(rows.n, 0);
});
