/**
 * The cost of Kysely's per-query `prepare` (a benchmark, not a test: it prints a table
 * and asserts nothing).
 *
 *   npx tsx scripts/bench/statements.ts [--nodes 1000] [--calls 100000] [--rounds 3]
 *
 * Opens a real SQLite file through `Store.open`, seeds one config with `--nodes` nodes, and
 * times `--calls` point queries of Kysely's query builder through two handles on that one
 * file: Kysely's stock `SqliteDialect` over the raw better-sqlite3 handle (a `prepare` per
 * query) and `Store.db`. The cases alternate round by round, so load on the shared machine falls
 * on both alike. Cases: `selectFrom("nodes").selectAll().where("node_id", "=", x)
 * .executeTakeFirst()` and `updateTable("nodes").set({ updated_at }).where("node_id", "=", x)`.
 * Prints µs per call, the best and the median round.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Kysely, SqliteDialect } from "kysely";
import { createLogger } from "../../src/logger.js";
import { Store, type Db } from "../../src/store/db.js";
import type { Database } from "../../src/store/schema.js";
import { sqliteOf } from "../../src/store/connection.js";

const { values } = parseArgs({ options: { nodes: { type: "string", default: "1000" }, calls: { type: "string", default: "100000" }, rounds: { type: "string", default: "3" } } });
const NODES = Number(values.nodes);
const CALLS = Number(values.calls);
const ROUNDS = Number(values.rounds);
const CONFIG = "cfg-benchstmts00000000";

const dir = mkdtempSync(join(tmpdir(), "svc-stmts-"));
const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
const s = sqliteOf(store);
s.transaction(() => {
  s.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES (?, 'bench', 'wireguard', '10.0.0.0/8', 0, 0)").run(CONFIG);
  const node = s.prepare("INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, created_at, updated_at) VALUES (?, ?, ?, 'static', 'svc0', ?, 'k', 'K', 0, 0)");
  for (let i = 0; i < NODES; i++) node.run(`node-${i}`, CONFIG, `node-${i}`, `10.0.${i >> 8}.${i & 255}`);
})();
const ids = Array.from({ length: NODES }, (_, i) => `node-${i}`);

/** Kysely's own driver over the same connection: `db.prepare(sql)` on every query. */
const stock = new Kysely<Database>({ dialect: new SqliteDialect({ database: s }) });

type Case = (db: Db, i: number) => Promise<unknown>;
const cases: Array<[string, Case]> = [
  ["select by node_id", (db, i) => db.selectFrom("nodes").selectAll().where("node_id", "=", ids[i % NODES] ?? "").executeTakeFirst()],
  ["update by node_id", (db, i) => db.updateTable("nodes").set({ updated_at: i }).where("node_id", "=", ids[i % NODES] ?? "").execute()],
];
const handles: Array<[string, Db]> = [
  ["Kysely's SqliteDialect", stock],
  ["Store.db", store.db],
];

/** µs per call of `run` over `CALLS` calls. */
async function time(db: Db, run: Case): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < CALLS; i++) await run(db, i);
  return ((performance.now() - t0) * 1000) / CALLS;
}

const results = new Map<string, number[]>();
for (const [, db] of handles) for (const [, run] of cases) await time(db, run); // warm-up at full length
for (let r = 0; r < ROUNDS; r++) {
  for (const [caseName, run] of cases) {
    for (const [handleName, db] of handles) {
      const key = `${caseName}\t${handleName}`;
      results.set(key, [...(results.get(key) ?? []), await time(db, run)]);
    }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
console.log(`\n${NODES} nodes, ${CALLS} calls per round, ${ROUNDS} rounds\n`);
console.log("| query | handle | best µs/call | median µs/call | median s per 100,000 |");
console.log("|---|---|---:|---:|---:|");
for (const [key, xs] of results) {
  const [caseName, handleName] = key.split("\t");
  console.log(`| ${caseName} | ${handleName} | ${Math.min(...xs).toFixed(2)} | ${median(xs).toFixed(2)} | ${((median(xs) * 100_000) / 1e6).toFixed(2)} |`);
}

await store.close();
rmSync(dir, { recursive: true, force: true });
