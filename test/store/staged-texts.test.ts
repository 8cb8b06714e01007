/**
 * Migration 0013_node_staged_texts (docs/history/decisions-2026.md "staged texts in their own
 * table"): a node's rendered staged text lives in `node_staged_texts`, labelled with the version
 * and sha it was rendered for. Marking nodes changed (a protocol switch) touches no text; a stale
 * text is never served (spec §3.5, §3.8: the agent gets text whose SHA-256 is the staged sha).
 * Real SQLite files.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Kysely, Migrator, SqliteDialect } from "kysely";
import SQLite from "better-sqlite3";
import { createLogger } from "../../src/logger.js";
import { Store } from "../../src/store/db.js";
import { migrations } from "../../src/store/migrations.js";
import { bumpStagedVersionsOfConfig, findStagedText, listNodes, putStagedText, storeStagedRendering } from "../../src/store/nodes.repository.js";
import { materializeStaged, renderConfigTexts } from "../../src/services/rendering.service.js";
import { lazyMesh, servedText } from "../helpers/lazy-mesh.js";
import { sqliteOf } from "../../src/store/connection.js";

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

test("migration 0013 moves each rendered node's text into node_staged_texts with its version and sha, drops nodes.staged_config_text, and leaves unrendered nodes without a text", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-texts-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "svc.db");
  const before = Object.keys(migrations).sort().filter((n) => n < "0013");
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
  assert.equal((await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateTo(before.at(-1) ?? "")).error, undefined);
  await db.destroy();
  const raw = new SQLite(file);
  raw.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES ('c', 'c', 'wireguard', '10.9.0.0/24', 1, 1)").run();
  const node = raw.prepare(
    `INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, staged_config_version, staged_config_sha256, staged_config_text, created_at, updated_at)
     VALUES (?, 'c', ?, 'dynamic', 'wg0', ?, 'sk', 'pk', ?, ?, ?, 1, 1)`,
  );
  const big = "[Interface]\n" + "# filler\n".repeat(2000); // overflows a page, like a real mesh config
  node.run("a", "a", "10.9.0.1", 3, sha256(big), big);
  node.run("b", "b", "10.9.0.2", 2, null, null); // staged lazily: no text yet
  node.run("z", "z", "10.9.0.3", 0, null, null); // never staged
  raw.close();

  const store = await Store.open(file, createLogger("silent"));
  t.after(() => store.close());
  const columns = (sqliteOf(store).prepare("SELECT name FROM pragma_table_info('nodes')").all() as Array<{ name: string }>).map((c) => c.name);
  assert.ok(!columns.includes("staged_config_text"), "the text column is gone from nodes");
  assert.deepEqual(sqliteOf(store).prepare("SELECT * FROM node_staged_texts").all(), [{ node_id: "a", config_version: 3, config_sha256: sha256(big), config_text: big }]);
  const [a] = await listNodes(store.db, "c");
  assert.ok(a);
  assert.equal(await servedText(store.db, a), big, "the moved text is served at its version and sha");
  assert.deepEqual(sqliteOf(store).pragma("foreign_key_check"), []);
});

test("marking a whole config changed (a protocol switch) rewrites no text: no page is freed in its UPDATE; the stale texts stay but are not served, and the next rendering replaces them with the full re-render's", async (t) => {
  const { store, mesh, configId, ids } = await lazyMesh(t, 40);
  for (const id of ids) await mesh.getStagedConfig(configId, id); // every node rendered: ~40 peers, a few overflow pages each
  const rendered = await listNodes(store.db, configId);
  const texts = new Map<string, string | null>();
  for (const n of rendered) texts.set(n.node_id, await servedText(store.db, n));
  assert.ok([...texts.values()].every((x) => x !== null && x.length > 4096), "texts larger than a page");
  // Pages per table, each table's indexes counted with it (SQLite's dbstat).
  const pagesByTable = () =>
    new Map(
      (sqliteOf(store).prepare("SELECT s.tbl_name AS t, count(*) AS n FROM dbstat d JOIN sqlite_schema s ON s.name = d.name GROUP BY s.tbl_name").all() as Array<{ t: string; n: number }>).map((r) => [r.t, r.n]),
    );
  const pagesBefore = pagesByTable();
  const freeBefore = sqliteOf(store).pragma("freelist_count", { simple: true }) as number;

  const bumped = await bumpStagedVersionsOfConfig(store.db, configId, 1);
  assert.equal(bumped.length, ids.length);
  const pagesAfter = pagesByTable();
  assert.equal(pagesAfter.get("node_staged_texts"), pagesBefore.get("node_staged_texts"), "no page of a text was freed or rewritten elsewhere");
  // The UPDATE clears each node's sha: an index of `nodes` over it can merge a page (about 1 run
  // in 20, by where the random ids fall). Every page freed is one of those, none a text's.
  const nodesShrink = (pagesBefore.get("nodes") ?? 0) - (pagesAfter.get("nodes") ?? 0);
  assert.equal((sqliteOf(store).pragma("freelist_count", { simple: true }) as number) - freeBefore, nodesShrink, "every freed page was one of the nodes table's own");
  assert.equal((sqliteOf(store).prepare("SELECT count(*) AS n FROM node_staged_texts").get() as { n: number }).n, ids.length, "the old texts are still stored");
  for (const n of await listNodes(store.db, configId)) {
    assert.equal(n.staged_config_sha256, null);
    assert.equal(await servedText(store.db, n), null, `${n.node_id}: the stale text is not served`);
    // Asked for by the old version and sha, it is found; by the new version, it is not.
    const old = rendered.find((r) => r.node_id === n.node_id);
    assert.ok(old?.staged_config_sha256);
    assert.equal(await findStagedText(store.db, n.node_id, old.staged_config_version, old.staged_config_sha256), texts.get(n.node_id));
    assert.equal(await findStagedText(store.db, n.node_id, n.staged_config_version, old.staged_config_sha256), undefined);
  }

  // Rendered again on demand: the full re-render's text, at the new version.
  const full = new Map((await renderConfigTexts(store.db, configId)).map((r) => [r.node.node_id, r.text]));
  for (const n of await listNodes(store.db, configId)) {
    const staged = await materializeStaged(store.db, n);
    assert.ok(staged);
    assert.equal(staged.config_version, n.staged_config_version);
    assert.equal(staged.config_text, full.get(n.node_id));
    assert.equal(staged.config_sha256, sha256(staged.config_text));
  }
  assert.equal((sqliteOf(store).prepare("SELECT count(*) AS n FROM node_staged_texts").get() as { n: number }).n, ids.length, "one text per node: replaced, not added");
});

test("a rendering is stored only at the version it was rendered for, with its text written before its sha; an older text never replaces a newer one", async (t) => {
  const { store, configId, ids } = await lazyMesh(t, 3);
  const [a] = ids as [string];
  const row = (await listNodes(store.db, configId)).find((n) => n.node_id === a);
  assert.ok(row && row.staged_config_version >= 2);
  const version = row.staged_config_version;

  // A stale renderer (the version before) stores nothing: the node is not served its text.
  assert.equal(await storeStagedRendering(store.db, a, version - 1, sha256("old"), "old"), false);
  assert.equal(await servedText(store.db, { ...row, staged_config_sha256: sha256("old") }), null);
  // The renderer of this version stores; the same rendering again is accepted (a node whose text
  // went missing is rendered again); another sha at this version is refused.
  assert.equal(await storeStagedRendering(store.db, a, version, sha256("new"), "new"), true);
  const stored = (await listNodes(store.db, configId)).find((n) => n.node_id === a);
  assert.ok(stored);
  assert.equal(stored.staged_config_sha256, sha256("new"));
  assert.equal(await servedText(store.db, stored), "new");
  await store.db.deleteFrom("node_staged_texts").where("node_id", "=", a).execute();
  assert.equal(await storeStagedRendering(store.db, a, version, sha256("new"), "new"), true);
  assert.equal(await servedText(store.db, stored), "new");
  assert.equal(await storeStagedRendering(store.db, a, version, sha256("other"), "other"), false);

  // Versions only move forward: a text of an older version is dropped.
  await putStagedText(store.db, a, version + 1, sha256("newer"), "newer");
  await putStagedText(store.db, a, version, sha256("older"), "older");
  assert.deepEqual(
    await store.db.selectFrom("node_staged_texts").select(["config_version", "config_text"]).where("node_id", "=", a).executeTakeFirst(),
    { config_version: version + 1, config_text: "newer" },
  );
});
