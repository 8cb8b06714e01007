/**
 * Migration 0011_mesh_pair_sides (docs/history/decisions-2026.md "the 5,000-node build"):
 * `mesh_pairs` without the index on `node_b` and without the foreign key that
 * needed it; triggers keep the key's guarantees. Real SQLite files.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Kysely, Migrator, SqliteDialect } from "kysely";
import SQLite from "better-sqlite3";
import { createLogger } from "../../src/logger.js";
import { Store } from "../../src/store/db.js";
import { listPairsOfNode, pairPage } from "../../src/store/mesh-pairs.repository.js";
import { migrations } from "../../src/store/migrations.js";
import type { Database } from "../../src/store/schema.js";
import { sqliteOf } from "../../src/store/connection.js";

const log = createLogger("silent");

function tempFile(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-sides-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "svc.db");
}

/** Config `c` with nodes `n00` … `n{k-1}` (ids sort as created) and, in config `d`, `m0`, `m1`. */
function seed(db: SQLite.Database, k: number): string[] {
  db.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES ('c', 'c', 'wireguard', '10.9.0.0/24', 1, 1), ('d', 'd', 'wireguard', '10.8.0.0/24', 1, 1)").run();
  const node = db.prepare(
    "INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, staged_config_version, created_at, updated_at) VALUES (?, ?, ?, 'static', 'wg0', ?, 'sk', 'pk', 0, ?, ?)",
  );
  const ids = Array.from({ length: k }, (_, i) => `n${String(i).padStart(2, "0")}`);
  ids.forEach((id, i) => node.run(id, "c", id, `10.9.0.${i + 1}`, i, i));
  node.run("m0", "d", "m0", "10.8.0.1", 0, 0);
  node.run("m1", "d", "m1", "10.8.0.2", 0, 0);
  return ids;
}

/** Full mesh of `ids` in config c with ids p-{a}-{b}, plus the pair m0–m1 of config d. */
function fullMesh(db: SQLite.Database, ids: readonly string[]): void {
  const pair = db.prepare("INSERT INTO mesh_pairs (pair_id, config_id, node_a, node_b, enabled, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)");
  let t = 0;
  for (const [i, a] of ids.entries()) for (const b of ids.slice(i + 1)) pair.run(`p-${a}-${b}`, "c", a, b, t % 3 === 0 ? 0 : 1, t++, t);
  pair.run("p-m0-m1", "d", "m0", "m1", 1, 0, 0);
}

const pairs = (db: SQLite.Database) => db.prepare("SELECT rowid AS rid, * FROM mesh_pairs ORDER BY rowid").all();

test("migration 0011 carries every pair (columns and rowids) and leaves mesh_pairs without a node_b index or foreign key", async (t) => {
  const file = tempFile(t);
  const before = Object.keys(migrations).sort().filter((n) => n < "0011");
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
  const upTo = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateTo(before.at(-1) ?? "");
  assert.equal(upTo.error, undefined);
  await db.destroy();
  const raw = new SQLite(file);
  raw.pragma("foreign_keys = ON");
  const ids = seed(raw, 12);
  fullMesh(raw, ids);
  raw.prepare("DELETE FROM mesh_pairs WHERE pair_id = 'p-n03-n04'").run(); // a gap in the rowids
  const old = pairs(raw);
  raw.close();

  // Up to 0011 only: later migrations (0016) convert the full-mesh rows to the policy.
  const to0011 = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
  assert.equal((await new Migrator({ db: to0011, provider: { getMigrations: async () => migrations } }).migrateTo("0011_mesh_pair_sides")).error, undefined);
  await to0011.destroy();
  const migrated = new SQLite(file);
  t.after(() => migrated.close());
  migrated.pragma("foreign_keys = ON");
  assert.deepEqual(pairs(migrated), old, "same rows, same rowids");
  assert.equal(old.length, (12 * 11) / 2);
  const indexes = migrated.prepare("SELECT name FROM pragma_index_list('mesh_pairs') ORDER BY name").all();
  assert.deepEqual(indexes, [{ name: "mesh_pairs_config_created" }, { name: "sqlite_autoindex_mesh_pairs_1" }, { name: "sqlite_autoindex_mesh_pairs_2" }]);
  const keys = migrated.prepare("SELECT \"from\" AS col, \"table\" AS parent, on_delete FROM pragma_foreign_key_list('mesh_pairs') ORDER BY col").all();
  assert.deepEqual(keys, [
    { col: "config_id", parent: "configs", on_delete: "CASCADE" },
    { col: "node_a", parent: "nodes", on_delete: "CASCADE" },
  ]);
  assert.deepEqual(migrated.pragma("foreign_key_check"), []);
});

test("0011's triggers keep the node_b key: a pair must name an existing node_b; deleting a node deletes the pairs it is either side of, and nothing else", async (t) => {
  const store = await Store.open(tempFile(t), log);
  t.after(() => store.close());
  const db = sqliteOf(store);
  const ids = seed(db, 10);
  fullMesh(db, ids);
  const insert = db.prepare("INSERT INTO mesh_pairs (pair_id, config_id, node_a, node_b, enabled, created_at, updated_at) VALUES (?, 'c', ?, ?, 1, 0, 0)");
  assert.throws(() => insert.run("p-bad", "m0", "zz-none"), /FOREIGN KEY constraint failed/);
  assert.throws(() => insert.run("p-bad-a", "aa-none", "n05"), /FOREIGN KEY constraint failed/, "node_a keeps its foreign key");
  assert.throws(() => db.prepare("UPDATE mesh_pairs SET node_b = 'zz-none' WHERE pair_id = 'p-n01-n02'").run(), /FOREIGN KEY constraint failed/);

  const count = () => (db.prepare("SELECT count(*) AS n FROM mesh_pairs").get() as { n: number }).n;
  assert.equal(count(), 45 + 1);
  // n05 is node_b of n00 … n04 and node_a of n06 … n09.
  db.prepare("DELETE FROM nodes WHERE node_id = 'n05'").run();
  assert.equal((db.prepare("SELECT count(*) AS n FROM mesh_pairs WHERE node_a = 'n05' OR node_b = 'n05'").get() as { n: number }).n, 0);
  assert.equal(count(), 36 + 1, "the other 36 pairs of c and d's pair stay");
  // The highest id: node_b of all its pairs.
  db.prepare("DELETE FROM nodes WHERE node_id = 'n09'").run();
  assert.equal(count(), 28 + 1);
  assert.deepEqual(db.pragma("foreign_key_check"), []);
  // Deleting the config removes the rest of c's pairs, its nodes, and nothing of d.
  db.prepare("DELETE FROM configs WHERE config_id = 'c'").run();
  assert.deepEqual(db.prepare("SELECT pair_id FROM mesh_pairs").all(), [{ pair_id: "p-m0-m1" }]);
  db.prepare("DELETE FROM nodes WHERE node_id = 'm1'").run();
  assert.equal(count(), 0);
});

test("a node's pairs are read without scanning mesh_pairs: through UNIQUE (node_a, node_b) and the config's nodes; same rows as a plain filter", async (t) => {
  const store = await Store.open(tempFile(t), log);
  t.after(() => store.close());
  const ids = seed(sqliteOf(store), 12);
  fullMesh(sqliteOf(store), ids);
  for (const id of ["n00", "n05", "n11"]) {
    const want = sqliteOf(store).prepare("SELECT pair_id FROM mesh_pairs WHERE node_a = ? OR node_b = ? ORDER BY pair_id").all(id, id) as Array<{ pair_id: string }>;
    const got = (await listPairsOfNode(store.db, id)).map((p) => p.pair_id).sort();
    assert.deepEqual(got, want.map((r) => r.pair_id));
    for (const p of await listPairsOfNode(store.db, id)) assert.ok(p.pair_id.includes(p.peer.node_id) && p.peer.node_id !== id);
    // Paged by node: every page in (created_at, pair_id) order, together the node's pairs.
    const seen: string[] = [];
    let after: { created_at: number; pair_id: string } | undefined;
    for (;;) {
      const page = await pairPage(store.db, "c", { nodeId: id, after, limit: 4 });
      seen.push(...page.slice(0, 4).map((p) => p.pair_id));
      const last = page[3];
      if (page.length <= 4 || !last) break;
      after = { created_at: last.created_at, pair_id: last.pair_id };
    }
    const ordered = sqliteOf(store).prepare("SELECT pair_id FROM mesh_pairs WHERE node_a = ? OR node_b = ? ORDER BY created_at, pair_id").all(id, id) as Array<{ pair_id: string }>;
    assert.deepEqual(seen, ordered.map((r) => r.pair_id));
    assert.deepEqual(await pairPage(store.db, "d", { nodeId: id, limit: 10 }), [], "another config's filter finds none");
  }
  // The plans: no full scan of mesh_pairs anywhere (a scan is n²/2 rows at scale).
  const plan = (q: string, ...args: string[]) => (sqliteOf(store).prepare(`EXPLAIN QUERY PLAN ${q}`).all(...args) as Array<{ detail: string }>).map((r) => r.detail).join(" | ");
  const deleting = plan("DELETE FROM nodes WHERE node_id = ?", "n05");
  assert.doesNotMatch(deleting, /SCAN mesh_pairs/, deleting);
});
