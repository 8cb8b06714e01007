import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { createLogger } from "../../src/logger.js";
import { sqliteOf, type Connected } from "../../src/store/connection.js";
import { Store } from "../../src/store/db.js";
import { putSetting } from "../../src/store/settings.repository.js";

// The store's doors: raw statements outside src/store run through Store.read (no other caller's
// transaction open meanwhile) or Store.whenIdle (background writers: never inside a request's
// transaction). DESIGN §3 Persistence order: nothing lands inside another caller's transaction.

const log = createLogger("silent");

async function openStore(t: TestContext): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), "svc-doors-"));
  const store = await Store.open(join(dir, "svc.db"), log);
  t.after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

/** The value of setting `key` read with a raw statement on the store's connection. */
function rawSetting(conn: Connected, key: string): string | undefined {
  const row = sqliteOf(conn).prepare("SELECT value FROM settings_kv WHERE key = ?").get(key) as { value: string } | undefined;
  return row?.value;
}

/** A transaction that has written `key` and stays open until `release` is called. */
function openTransaction(store: Store, key: string): { release: () => void; done: Promise<void>; written: Promise<void> } {
  let release = () => {};
  let written = () => {};
  const wrote = new Promise<void>((resolve) => (written = resolve));
  const gate = new Promise<void>((resolve) => (release = resolve));
  const done = store.transaction(async (trx) => {
    await putSetting(trx, key, "v", 1);
    written();
    await gate;
  });
  return { release, done, written: wrote };
}

test("Store.whenIdle runs a background write after an open transaction commits, never inside it", async (t) => {
  const store = await openStore(t);
  const trx = openTransaction(store, "k");
  await trx.written;
  const seen: Array<{ inTransaction: boolean; value: string | undefined }> = [];
  const ran = store.whenIdle(() => seen.push({ inTransaction: sqliteOf(store).inTransaction, value: rawSetting(store, "k") }));
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  assert.deepEqual(seen, [], "nothing ran while the transaction was open");
  trx.release();
  await trx.done;
  await ran;
  assert.deepEqual(seen, [{ inTransaction: false, value: "v" }], "ran once, outside any transaction, after the commit");
});

test("Store.whenIdle runs the work asked in one turn in that order, and rejects after `turns` busy turns", async (t) => {
  const store = await openStore(t);
  const order: number[] = [];
  await Promise.all([store.whenIdle(() => order.push(1)), store.whenIdle(() => order.push(2)), store.whenIdle(() => order.push(3))]);
  assert.deepEqual(order, [1, 2, 3]);
  assert.equal(await store.whenIdle(() => 42), 42, "the work's result");
  await assert.rejects(
    store.whenIdle(() => {
      throw new Error("boom");
    }),
    /boom/,
    "the work's error",
  );

  const trx = openTransaction(store, "k");
  await trx.written;
  await assert.rejects(store.whenIdle(() => order.push(4), { turns: 3 }), /the database stayed busy/);
  trx.release();
  await trx.done;
  assert.deepEqual(order, [1, 2, 3], "the refused work never ran");
});

test("Store.read waits for an open transaction and never shows its uncommitted rows", async (t) => {
  const store = await openStore(t);
  const trx = openTransaction(store, "k");
  await trx.written;
  let read: string | undefined | null = null;
  const reading = store.read((conn) => (read = rawSetting(conn, "k")));
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  assert.equal(read, null, "the read waited for the transaction");
  trx.release();
  await trx.done;
  assert.equal(await reading, "v");
  assert.equal(read, "v", "it read the committed row");
});
