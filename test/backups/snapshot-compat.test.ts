/**
 * Snapshots made by an earlier version of the service (spec §2.4 snapshot import and restore;
 * docs/history/decisions-2026.md "Snapshots from before a table existed"). A snapshot is a copy of the
 * database at the schema of the server that made it; importing one brings that private copy to
 * this server's schema with our own migrations before anything is restored. Real SQLite files,
 * the real import and restore routes over HTTP.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { Kysely, Migrator, SqliteDialect } from "kysely";
import { migrations } from "../../src/store/migrations.js";
import { DATA_TABLES, DATA_TABLE_SINCE } from "../../src/store/snapshots.repository.js";
import { createConfig, createNode } from "../http/harness.js";
import { importAndRestore, snapshotDb, startBackupsHarness } from "./harness.js";

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");
const MIGRATION_NAMES = Object.keys(migrations).sort();

/** A database file migrated up to and including `last` (our migrations, in order). */
async function databaseAt(t: TestContext, last: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "svc-compat-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "svc.db");
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
  try {
    const res = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateTo(last);
    assert.equal(res.error, undefined, `migrating to ${last}`);
  } finally {
    await db.destroy();
  }
  return file;
}

function tablesOf(sqlite: SQLite.Database, schema = "main"): Set<string> {
  const rows = sqlite.prepare(`SELECT name FROM ${schema}.sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`).all() as Array<{ name: string }>;
  return new Set(rows.map((r) => r.name));
}

function columnsOf(sqlite: SQLite.Database, schema: string, table: string): string[] {
  return (sqlite.prepare(`SELECT name FROM pragma_table_info(?, ?)`).all(table, schema) as Array<{ name: string }>).map((c) => c.name);
}

/**
 * `current` (a snapshot's svc.db at this server's schema) as a server at migration `level` would
 * have exported it: every row of the tables that schema has (the columns both schemas have), and,
 * before migration 0013, each node's rendered text in `nodes.staged_config_text`, where it lived.
 */
async function atSchema(t: TestContext, current: Buffer, level: string): Promise<Buffer> {
  const file = await databaseAt(t, level);
  const currentFile = `${file}.current`;
  writeFileSync(currentFile, current);
  const old = new SQLite(file);
  try {
    old.pragma("foreign_keys = OFF");
    old.prepare("ATTACH DATABASE ? AS cur").run(currentFile);
    const copied = tablesOf(old, "cur");
    for (const table of tablesOf(old)) {
      if (table.startsWith("kysely_") || !copied.has(table)) continue;
      const theirs = new Set(columnsOf(old, "cur", table));
      const cols = columnsOf(old, "main", table).filter((c) => theirs.has(c)).map((c) => `"${c}"`).join(", ");
      old.exec(`INSERT INTO main."${table}" (${cols}) SELECT ${cols} FROM cur."${table}"`);
    }
    // Before migration 0016 a full mesh's pairs were rows: the policy's pairs are written out as
    // a server of that schema had them (made by the later node's creation write), for the import
    // to convert them back.
    if (!tablesOf(old).has("mesh_pair_removals")) {
      old.exec(`INSERT INTO main.mesh_pairs (pair_id, config_id, node_a, node_b, enabled, created_at, updated_at)
        SELECT 'pair-old' || x.mesh_seq || 'x' || y.mesh_seq, y.config_id, min(x.node_id, y.node_id), max(x.node_id, y.node_id), 1, y.created_at, y.created_at
        FROM cur.nodes y JOIN cur.nodes x ON x.config_id = y.config_id AND x.mesh_seq < y.mesh_seq
        WHERE y.auto_pair = 1
          AND NOT EXISTS (SELECT 1 FROM cur.mesh_pairs p WHERE p.node_a = min(x.node_id, y.node_id) AND p.node_b = max(x.node_id, y.node_id))
          AND NOT EXISTS (SELECT 1 FROM cur.mesh_pair_removals r WHERE r.node_a = min(x.node_id, y.node_id) AND r.node_b = max(x.node_id, y.node_id))`);
      assert.ok((old.prepare("SELECT count(*) AS n FROM main.mesh_pairs").get() as { n: number }).n > 0, `${level}: the pairs are rows`);
    }
    if (columnsOf(old, "main", "nodes").includes("staged_config_text")) {
      const moved = old
        .prepare(
          `UPDATE main.nodes SET staged_config_text = (SELECT s.config_text FROM cur.node_staged_texts s
             WHERE s.node_id = nodes.node_id AND s.config_version = nodes.staged_config_version AND s.config_sha256 = nodes.staged_config_sha256)`,
        )
        .run().changes;
      assert.ok(moved > 0);
    }
    old.exec("DETACH DATABASE cur");
    return Buffer.from(old.serialize());
  } finally {
    old.close();
  }
}

test("spec §2.4: a snapshot of every earlier schema of ours imports and restores (before migration 0013 there was no node_staged_texts); each node is then served the renderer's text, its sha and its version as before", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h, { network_cidr: "10.41.0.0/24" });
  const nodes = [await createNode(h, config.config_id, { public_address: "192.0.2.1" }), await createNode(h, config.config_id, { public_address: "192.0.2.2" })];
  const url = (n: { node_id: string }) => `/api/v1/configs/${config.config_id}/nodes/${n.node_id}/config`;
  const before = new Map<string, { config_text: string; config_sha256: string; config_version: number }>();
  for (const n of nodes) before.set(n.node_id, (await h.req("GET", url(n))).json);
  const current = await snapshotDb(h);
  const levels = MIGRATION_NAMES.slice(0, -1);
  assert.ok(levels.includes("0012_node_views"), "the schema just before the texts' own table is among them");
  for (const level of levels) {
    const old = await atSchema(t, current, level);
    if (level < "0013") {
      // The old snapshot holds every text the renderer made, in the nodes table.
      const check = new SQLite(old);
      const texts = check.prepare("SELECT node_id, staged_config_text AS text FROM nodes ORDER BY node_id").all() as Array<{ node_id: string; text: string | null }>;
      check.close();
      assert.deepEqual(texts.map((r) => r.text), texts.map((r) => before.get(r.node_id)?.config_text), level);
    }

    await importAndRestore(h, old);

    for (const n of nodes) {
      const was = before.get(n.node_id);
      assert.ok(was);
      const staged = (await h.req("GET", url(n))).json;
      assert.equal(staged.config_text, was.config_text, `${level}, ${n.node_id}: the renderer's text`);
      assert.equal(staged.config_sha256, sha256(staged.config_text));
      assert.equal(staged.config_version, was.config_version, `${level}: a text that was the renderer's keeps its version`);
    }
  }
  // The download a bound agent or an operator fetches is the same text.
  for (const n of nodes) {
    const grant = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${n.node_id}/download-token`);
    const file = await h.http(grant.json.download_path);
    assert.equal(file.status, 200);
    assert.equal(file.body.toString("utf8"), before.get(n.node_id)?.config_text);
  }
});

test("every table a snapshot carries is required only from the migration that created it (DATA_TABLE_SINCE), so a snapshot of any earlier schema of ours is not refused for lacking it", async (t) => {
  const since = new Map<string, string>();
  for (const name of MIGRATION_NAMES) {
    const file = await databaseAt(t, name);
    const sqlite = new SQLite(file, { readonly: true });
    const tables = tablesOf(sqlite);
    sqlite.close();
    for (const table of DATA_TABLES) if (tables.has(table) && !since.has(table)) since.set(table, name);
  }
  for (const table of DATA_TABLES) {
    assert.equal(DATA_TABLE_SINCE[table] ?? MIGRATION_NAMES[0], since.get(table), `${table} first exists after this migration`);
  }
});
