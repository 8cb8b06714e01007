/**
 * A config's apply mode (`restart`, the spec's push sequence §3.8, or `hitless`): what the REST
 * API takes and answers, that it reaches no node's text, and that a snapshot carries it — an
 * older snapshot, made before the setting existed, restores as `restart`. Real service, real
 * SQLite file, the real export, import and restore routes over HTTP.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { assertError, createNode } from "../http/harness.js";
import { importAndRestore, snapshotDb, startBackupsHarness } from "./harness.js";

const MIGRATION = "0024_config_apply_mode";

/** `db` as a server from before the apply mode would have exported it: no column, no migration row. */
function withoutApplyMode(t: TestContext, db: Buffer): Buffer {
  const dir = mkdtempSync(join(tmpdir(), "svc-apply-mode-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "svc.db");
  writeFileSync(file, db);
  const sqlite = new SQLite(file);
  try {
    sqlite.exec("ALTER TABLE configs DROP COLUMN apply_mode");
    const removed = sqlite.prepare("DELETE FROM kysely_migration WHERE name = ?").run(MIGRATION).changes;
    assert.equal(removed, 1, "the snapshot had run the migration");
  } finally {
    sqlite.close();
  }
  return readFileSync(file);
}

test("apply_mode: restart by default (spec §3.8), hitless on request; a PATCH changes it and no node's config text", async (t) => {
  const h = await startBackupsHarness(t);
  const plain = await h.req("POST", "/api/v1/configs", { name: "plain", tunnel_protocol: "wireguard", network_cidr: "10.50.0.0/24" });
  assert.equal(plain.status, 201, plain.text);
  assert.equal(plain.json.apply_mode, "restart");
  const hitless = await h.req("POST", "/api/v1/configs", { name: "live", tunnel_protocol: "wireguard", network_cidr: "10.51.0.0/24", apply_mode: "hitless" });
  assert.equal(hitless.status, 201, hitless.text);
  assert.equal(hitless.json.apply_mode, "hitless");

  const node = await createNode(h, plain.json.config_id, { public_address: "192.0.2.9" });
  const configUrl = `/api/v1/configs/${plain.json.config_id}`;
  const staged = (await h.req("GET", `${configUrl}/nodes/${node.node_id}/config`)).json;
  const patched = await h.req("PATCH", configUrl, { apply_mode: "hitless" });
  assert.equal(patched.status, 200, patched.text);
  assert.equal(patched.json.apply_mode, "hitless");
  assert.equal((await h.req("GET", configUrl)).json.apply_mode, "hitless");
  const list = await h.req("GET", "/api/v1/configs");
  const modes = new Map(list.json.configs.map((c: { name: string; apply_mode: string }) => [c.name, c.apply_mode]));
  assert.deepEqual(Object.fromEntries(modes), { plain: "hitless", live: "hitless" });
  const after = (await h.req("GET", `${configUrl}/nodes/${node.node_id}/config`)).json;
  assert.equal(after.config_version, staged.config_version, "how pushes are applied is not in the text: no new version");

  const before = h.fingerprint();
  for (const body of [{ apply_mode: "live" }, { apply_mode: null }, { apply_mode: 1 }]) {
    assertError(await h.req("PATCH", configUrl, body), "VALIDATION_FAILED", JSON.stringify(body));
  }
  assertError(await h.req("POST", "/api/v1/configs", { name: "x", tunnel_protocol: "wireguard", network_cidr: "10.52.0.0/24", apply_mode: "sync" }), "VALIDATION_FAILED");
  assert.equal(h.fingerprint(), before);
});

test("a snapshot keeps each config's apply mode; one from before the setting existed restores as restart", async (t) => {
  const h = await startBackupsHarness(t);
  const created = await h.req("POST", "/api/v1/configs", { name: "live", tunnel_protocol: "wireguard", network_cidr: "10.53.0.0/24", apply_mode: "hitless" });
  assert.equal(created.status, 201, created.text);
  const configUrl = `/api/v1/configs/${created.json.config_id}`;
  await createNode(h, created.json.config_id, { public_address: "192.0.2.10" });
  const db = await snapshotDb(h);

  assert.equal((await h.req("PATCH", configUrl, { apply_mode: "restart" })).json.apply_mode, "restart");
  await importAndRestore(h, db);
  assert.equal((await h.req("GET", configUrl)).json.apply_mode, "hitless", "restored as it was exported");

  await importAndRestore(h, withoutApplyMode(t, db));
  assert.equal((await h.req("GET", configUrl)).json.apply_mode, "restart", "an older snapshot gets the spec's behaviour");
});
