/**
 * Migration 0016_mesh_pair_policy (src/store/migration-0016.ts): a database whose full mesh is
 * stored as n²/2 rows is converted to the full-mesh policy with explicit exceptions, and keeps
 * every pair, its enabled flag and creation time (spec §6.5: the pairs and their integrity are
 * the same to the API); the ids of the policy's pairs become `pair-{seq}-{seq}`, the operator's
 * own rows keep theirs. Real SQLite files.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { Kysely, Migrator, SqliteDialect } from "kysely";
import SQLite from "better-sqlite3";
import { createLogger } from "../../src/logger.js";
import { Store } from "../../src/store/db.js";
import { sqliteOf } from "../../src/store/connection.js";
import { listPairs } from "../../src/store/mesh-pairs.repository.js";
import { migrations } from "../../src/store/migrations.js";
import { parsePolicyPairId, policyPairId, policyPairIdsOf } from "../../src/store/mesh-policy.js";
import { countStore } from "../../src/store/summary.repository.js";

function tempFile(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-policy-migration-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "svc.db");
}

/** The file migrated up to the migration before 0016, as a server of that version left it. */
async function before0016(file: string): Promise<void> {
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
  const result = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateTo("0015_node_hub");
  assert.equal(result.error, undefined);
  await db.destroy();
}

/**
 * Config c: nodes n00 … n{k-1}, the i-th created at 1000 + i; each node's creation write paired
 * it with every node before it (created_at = its own), except: n08 was created with auto_pair
 * false, n01–n05 was disabled later, n02–n06 deleted, n03–n07 deleted and made again by hand,
 * n04–n08 made by hand. Config d: two nodes without pairs and one pair made by hand.
 */
function seedOldMesh(db: SQLite.Database, k: number): string[] {
  db.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES ('c', 'c', 'wireguard', '10.9.0.0/24', 1, 1), ('d', 'd', 'wireguard', '10.8.0.0/24', 1, 1)").run();
  const node = db.prepare(
    "INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, public_address, listen_port, private_key, public_key, staged_config_version, created_at, updated_at) VALUES (?, ?, ?, 'static', 'wg0', ?, '192.0.2.1', 51820, 'sk', 'pk', 0, ?, ?)",
  );
  const pair = db.prepare("INSERT INTO mesh_pairs (pair_id, config_id, node_a, node_b, enabled, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)");
  const ids = Array.from({ length: k }, (_, i) => `n${String(i).padStart(2, "0")}`);
  ids.forEach((id, i) => {
    node.run(id, "c", id, `10.9.0.${i + 1}`, 1000 + i, 1000 + i);
    if (id === "n08") return;
    for (const x of ids.slice(0, i)) {
      if (`${x}-${id}` === "n02-n06" || `${x}-${id}` === "n03-n07") continue;
      pair.run(`pair-old${x}${id}`, "c", x, id, `${x}-${id}` === "n01-n05" ? 0 : 1, 1000 + i, `${x}-${id}` === "n01-n05" ? 5000 : 1000 + i);
    }
  });
  pair.run("pair-byhand1", "c", "n03", "n07", 1, 6000, 6000);
  pair.run("pair-byhand2", "c", "n04", "n08", 1, 6001, 6001);
  node.run("m0", "d", "m0", "10.8.0.1", 2000, 2000);
  node.run("m1", "d", "m1", "10.8.0.2", 3000, 3000);
  pair.run("pair-byhand3", "d", "m0", "m1", 0, 7000, 7000);
  return ids;
}

type Seen = Array<[string, number, number, number]>;
const seen = (rows: ReadonlyArray<{ node_a: string; node_b: string; enabled: number; created_at: number; updated_at: number }>): Seen =>
  rows.map((r) => [`${r.node_a}|${r.node_b}`, r.enabled, r.created_at, r.updated_at] as [string, number, number, number]).sort(([x], [y]) => (x < y ? -1 : 1));

test("migration 0016 converts a full mesh of rows to the policy: every pair is kept with its enabled flag and times, the policy's rows go (their ids become pair-{seq}-{seq}), the operator's rows stay with their ids, a deleted pair becomes a removal, and the file shrinks", async (t) => {
  const file = tempFile(t);
  await before0016(file);
  const raw = new SQLite(file);
  raw.pragma("foreign_keys = ON");
  const ids = seedOldMesh(raw, 60);
  const old = raw.prepare("SELECT * FROM mesh_pairs ORDER BY config_id, node_a, node_b").all() as Array<{ pair_id: string; config_id: string; node_a: string; node_b: string; enabled: number; created_at: number; updated_at: number }>;
  // Each table or index a later migration adds takes one page even when empty: the file may grow by those, never by the dropped rows.
  const treesOf = (db: SQLite.Database) => (db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE rootpage > 0").get() as { n: number }).n;
  const treesBefore = treesOf(raw);
  const pageSize = Number(raw.pragma("page_size", { simple: true }));
  raw.close();
  const sizeBefore = statSync(file).size; // the last connection closed: the WAL is in the file

  const store = await Store.open(file, createLogger("silent"));
  t.after(() => store.close());
  for (const config of ["c", "d"]) {
    const now = await listPairs(store.db, config);
    assert.deepEqual(seen(now), seen(old.filter((r) => r.config_id === config)), `config ${config}: the same pairs, flags and times`);
    for (const p of now) {
      const kept = old.find((r) => r.node_a === p.node_a && r.node_b === p.node_b);
      const ownRow = kept !== undefined && (kept.pair_id.startsWith("pair-byhand") || kept.enabled === 0);
      if (ownRow) assert.equal(p.pair_id, kept.pair_id, "the operator's rows keep their ids");
      else assert.match(p.pair_id, /^pair-\d{10}-\d{10}$/, "the policy's pairs get derived ids");
    }
  }
  const sqlite = sqliteOf(store);
  assert.deepEqual(
    sqlite.prepare("SELECT pair_id FROM mesh_pairs ORDER BY pair_id").all().map((r) => (r as { pair_id: string }).pair_id),
    ["pair-byhand1", "pair-byhand2", "pair-byhand3", "pair-oldn01n05"],
    "only the exceptions are rows",
  );
  assert.deepEqual(sqlite.prepare("SELECT node_a, node_b FROM mesh_pair_removals").all(), [{ node_a: "n02", node_b: "n06" }], "the deleted policy pair");
  const auto = sqlite.prepare("SELECT node_id FROM nodes WHERE auto_pair = 1 ORDER BY node_id").all().map((r) => (r as { node_id: string }).node_id);
  assert.deepEqual(auto, ids.slice(1).filter((id) => id !== "n08"), "auto_pair: every node whose creation paired it with the nodes before it");
  assert.equal(countStore(store).mesh_pairs, old.length, "the system status counts the same pairs");
  const newTrees = treesOf(sqlite) - treesBefore;
  assert.ok(statSync(file).size < sizeBefore + newTrees * pageSize, `the file was compacted (${statSync(file).size} < ${sizeBefore} bytes + ${newTrees} new empty tables and indexes)`);
});

test("a node's policy pair ids padded once are the pair ids of the two sequence numbers in order, and parse back", () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 99_999_999 }), fc.integer({ min: 1, max: 99_999_999 }), (own, other) => {
      fc.pre(own !== other);
      const id = policyPairIdsOf(own)(other);
      assert.equal(id, policyPairId(Math.min(own, other), Math.max(own, other)));
      assert.deepEqual(parsePolicyPairId(id), [Math.min(own, other), Math.max(own, other)]);
    }),
    { numRuns: 300 },
  );
});
