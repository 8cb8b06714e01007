import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Kysely, SqliteDialect, sql } from "kysely";
import { createLogger } from "../../src/logger.js";
import { STATEMENT_CACHE_SIZE, Store, StatementCache } from "../../src/store/db.js";
import type { Database } from "../../src/store/schema.js";
import { sqliteOf } from "../../src/store/connection.js";

// docs/history/decisions-2026.md "prepared-statement cache": Kysely's SQLite driver
// prepares on every query; Store keeps its statements by SQL text in a bounded LRU.

const log = createLogger("silent");

async function openStore(t: { after(fn: () => void | Promise<void>): void }): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), "svc-stmts-"));
  const store = await Store.open(join(dir, "svc.db"), log);
  t.after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

/** Counts `prepare` calls on the raw handle (the cache's only way to make a statement) by SQL text. */
function countPrepares(store: Store): Map<string, number> {
  const counts = new Map<string, number>();
  const prepare = sqliteOf(store).prepare.bind(sqliteOf(store));
  sqliteOf(store).prepare = ((text: string) => {
    counts.set(text, (counts.get(text) ?? 0) + 1);
    return prepare(text);
  }) as ReturnType<typeof sqliteOf>["prepare"];
  return counts;
}

const put = (db: Kysely<Database>, key: string, value: string) => db.insertInto("settings_kv").values({ key, value, updated_at: 0 }).execute();
const byPrefix = (db: Kysely<Database>, prefix: string) => db.selectFrom("settings_kv").select(["key", "value"]).where("key", "like", `${prefix}%`).orderBy("key").execute();

test("a query text is prepared once and its statement reused; results follow inserts, updates and deletes", async (t) => {
  const store = await openStore(t);
  const counts = countPrepares(store);
  const db = store.db;

  await put(db, "a1", "x");
  await put(db, "a2", "y");
  assert.deepEqual(await byPrefix(db, "a"), [{ key: "a1", value: "x" }, { key: "a2", value: "y" }]);
  await put(db, "a3", "z");
  assert.deepEqual(await byPrefix(db, "a"), [{ key: "a1", value: "x" }, { key: "a2", value: "y" }, { key: "a3", value: "z" }]);
  await db.updateTable("settings_kv").set({ value: "changed" }).where("key", "=", "a2").execute();
  assert.deepEqual(await byPrefix(db, "a"), [{ key: "a1", value: "x" }, { key: "a2", value: "changed" }, { key: "a3", value: "z" }]);
  const deleted = await db.deleteFrom("settings_kv").where("key", "=", "a1").executeTakeFirst();
  assert.equal(deleted.numDeletedRows, 1n, "run() answers still reach Kysely");
  await db.deleteFrom("settings_kv").where("key", "=", "a3").execute();
  assert.deepEqual(await byPrefix(db, "a"), [{ key: "a2", value: "changed" }]);
  assert.deepEqual(await byPrefix(db, "none"), []);
  await store.transaction(async (trx) => {
    await put(trx, "a4", "w");
  });
  assert.deepEqual(await byPrefix(db, "a"), [{ key: "a2", value: "changed" }, { key: "a4", value: "w" }]);

  const text = [...counts.keys()].find((k) => k.startsWith('select "key", "value" from "settings_kv"'));
  assert.ok(text !== undefined, "the select went through the cache");
  assert.equal(counts.get(text), 1, "6 runs of the select, 1 prepare");
  const insertText = [...counts.keys()].find((k) => k.startsWith('insert into "settings_kv"'));
  assert.ok(insertText !== undefined);
  assert.equal(counts.get(insertText), 1, "4 inserts, 1 prepare");
  assert.equal(counts.get("begin"), 1);
  assert.equal(counts.get("commit"), 1);
});

test("a stream interleaved with a query of the same text: the busy statement is not reused, and it is reused once the stream ends", async (t) => {
  const store = await openStore(t);
  const counts = countPrepares(store);
  for (const k of ["s1", "s2", "s3"]) await put(store.db, k, k.toUpperCase());
  // Kysely holds its one connection for the whole stream, so a second query of `store.db`
  // would wait for it to end; a second Kysely over the same cache runs the interleaved queries
  // through the same driver code and the same cached statements.
  const other = new Kysely<Database>({ dialect: new SqliteDialect({ database: store.statements }) });
  const streamed = () => store.db.selectFrom("settings_kv").select(["key", "value"]).where("key", "like", "s%").orderBy("key");

  const seen: string[] = [];
  for await (const row of streamed().stream()) {
    seen.push(row.key);
    const all = await other.selectFrom("settings_kv").select(["key", "value"]).where("key", "like", "s%").orderBy("key").execute();
    assert.deepEqual(all.map((r) => r.key), ["s1", "s2", "s3"], `the interleaved query at ${row.key} sees every row`);
  }
  assert.deepEqual(seen, ["s1", "s2", "s3"], "the stream was not disturbed");
  const text = [...counts.keys()].find((k) => k.startsWith('select "key", "value" from "settings_kv"'));
  assert.ok(text !== undefined);
  assert.equal(counts.get(text), 4, "the stream's statement, then a fresh one for each of the 3 queries while it was busy");

  // A stream left early is reset by its iterator's return(): its statement is free again.
  for await (const row of streamed().stream()) {
    assert.equal(row.key, "s1");
    break;
  }
  assert.deepEqual((await streamed().execute()).map((r) => r.key), ["s1", "s2", "s3"]);
  assert.equal(counts.get(text), 4, "after the streams the cached statement serves again");
});

test("the cache is bounded: N + 1 distinct texts leave N, the least recently used dropped", async (t) => {
  const store = await openStore(t);
  const counts = countPrepares(store);
  const cache = new StatementCache(sqliteOf(store), 3);
  const texts = ["SELECT 1", "SELECT 2", "SELECT 3", "SELECT 4"];
  for (const text of texts.slice(0, 3)) cache.prepare(text);
  cache.prepare("SELECT 1"); // now the most recent: SELECT 2 is the oldest
  cache.prepare("SELECT 4");
  assert.equal(cache.size, 3);
  cache.prepare("SELECT 1");
  cache.prepare("SELECT 3");
  cache.prepare("SELECT 4");
  assert.equal(counts.get("SELECT 1"), 1, "kept: used again before the fourth text came");
  cache.prepare("SELECT 2");
  assert.equal(counts.get("SELECT 2"), 2, "dropped for the fourth text, prepared again");
  assert.equal(cache.size, 3);

  // The store's own cache with IN lists of STATEMENT_CACHE_SIZE + 1 lengths (dynamic SQL).
  for (let n = 1; n <= STATEMENT_CACHE_SIZE + 1; n++) {
    const keys = Array.from({ length: n }, (_, i) => `k${i}`);
    assert.deepEqual(await store.db.selectFrom("settings_kv").select("key").where("key", "in", keys).execute(), []);
  }
  assert.equal(store.statements.size, STATEMENT_CACHE_SIZE);
});

test("a cached select * sees a column added by ALTER TABLE through Kysely, and migrations run through the cache", async (t) => {
  const store = await openStore(t);
  const db = store.db as unknown as Kysely<Record<string, Record<string, unknown>>>; // a column outside schema.ts
  await put(store.db, "c1", "v");
  const before = await db.selectFrom("settings_kv").selectAll().where("key", "=", "c1").execute();
  assert.deepEqual(Object.keys(before[0] ?? {}).sort(), ["key", "updated_at", "value"]);
  const size = store.statements.size;

  await db.schema.alterTable("settings_kv").addColumn("extra", "text", (c) => c.defaultTo("d")).execute();
  const after = await db.selectFrom("settings_kv").selectAll().where("key", "=", "c1").execute();
  assert.deepEqual(after, [{ key: "c1", value: "v", updated_at: 0, extra: "d" }]);
  assert.equal(store.statements.size, size + 1, "the select came from the cache (only the ALTER is new)");
  await db.insertInto("settings_kv").values({ key: "c2", value: "w", updated_at: 1, extra: "e" }).execute();
  assert.deepEqual(await db.selectFrom("settings_kv").selectAll().where("key", "=", "c2").execute(), [{ key: "c2", value: "w", updated_at: 1, extra: "e" }]);

  // Store.open ran every migration through the cache; the ledger is complete and readable.
  const { rows } = await sql<{ n: number }>`select count(*) as n from kysely_migration`.execute(store.db);
  assert.ok((rows[0]?.n ?? 0) > 0);
});
