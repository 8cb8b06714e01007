import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import SQLite from "better-sqlite3";
import { createLogger } from "../../src/logger.js";
import { Store } from "../../src/store/db.js";
import { migrations } from "../../src/store/migrations.js";
import { getSetting, putSetting } from "../../src/store/settings.repository.js";
import { sqliteOf } from "../../src/store/connection.js";
import { tempDir } from "../helpers/temp-dir.js";

const log = createLogger("silent");

test("opening a new file applies the migrations with WAL, foreign keys and a busy timeout; reopening is a no-op", async (t) => {
  const file = join(tempDir(t, "svc-store-"), "svc.db");
  const store = await Store.open(file, log);
  assert.equal(sqliteOf(store).pragma("journal_mode", { simple: true }), "wal");
  assert.equal(sqliteOf(store).pragma("foreign_keys", { simple: true }), 1);
  assert.equal(sqliteOf(store).pragma("busy_timeout", { simple: true }), 5000);
  const tables = (sqliteOf(store).prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as Array<{ name: string }>).map((r) => r.name);
  for (const name of ["configs", "nodes", "node_client_state", "mesh_pairs", "port_forwards", "download_tokens", "bind_tokens", "control_logs", "admin_sessions"]) {
    assert.ok(tables.includes(name), `table ${name}`);
  }
  await putSetting(store.db, "k", "v", 1);
  await store.close();
  const again = await Store.open(file, log);
  t.after(() => again.close());
  assert.equal(await getSetting(again.db, "k"), "v");
  const applied = sqliteOf(again).prepare("SELECT name FROM kysely_migration").all();
  assert.deepEqual(applied, Object.keys(migrations).sort().map((name) => ({ name })), "every migration once, in order");
});

test("foreign keys cascade: deleting a config removes its nodes, pairs, client state and tags", async (t) => {
  const store = await Store.open(join(tempDir(t, "svc-store-"), "svc.db"), log);
  t.after(() => store.close());
  const db = sqliteOf(store);
  db.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, awg_params, created_at, updated_at) VALUES ('c1', 'n', 'wireguard', '10.0.0.0/24', NULL, 0, 0)").run();
  for (const [id, addr] of [["n1", "10.0.0.1"], ["n2", "10.0.0.2"]]) {
    db.prepare("INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, created_at, updated_at) VALUES (?, 'c1', ?, 'static', 'svc0', ?, 'k', 'p', 0, 0)").run(id, id, addr);
    db.prepare("INSERT INTO node_client_state (node_id, updated_at) VALUES (?, 0)").run(id);
    db.prepare("INSERT INTO node_tags VALUES (?, 't')").run(id);
  }
  db.prepare("INSERT INTO mesh_pairs VALUES ('p1', 'c1', 'n1', 'n2', 1, 0, 0)").run();
  assert.throws(() => db.prepare("INSERT INTO mesh_pairs VALUES ('p2', 'c1', 'n2', 'n1', 1, 0, 0)").run(), /CHECK/);
  assert.throws(() => db.prepare("INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, created_at, updated_at) VALUES ('n3', 'nope', 'x', 'static', 'svc0', '10.0.0.3', 'k', 'p', 0, 0)").run(), /FOREIGN KEY/);
  db.prepare("DELETE FROM configs WHERE config_id = 'c1'").run();
  const left = db.prepare("SELECT (SELECT count(*) FROM nodes) + (SELECT count(*) FROM mesh_pairs) + (SELECT count(*) FROM node_client_state) + (SELECT count(*) FROM node_tags) AS n").get();
  assert.deepEqual(left, { n: 0 });
});

test("transaction: after-commit hooks run only after a commit; a rollback drops them and the writes", async (t) => {
  const store = await Store.open(join(tempDir(t, "svc-store-"), "svc.db"), log);
  t.after(() => store.close());
  const seen: string[] = [];
  await store.transaction(async (trx, afterCommit) => {
    await putSetting(trx, "a", "1", 0);
    afterCommit(() => {
      seen.push(`hook sees a=${String(sqliteOf(store).prepare("SELECT value FROM settings_kv WHERE key = 'a'").pluck().get())}`);
    });
    seen.push("body done");
  });
  assert.deepEqual(seen, ["body done", "hook sees a=1"]);
  await assert.rejects(
    store.transaction(async (trx, afterCommit) => {
      await putSetting(trx, "b", "2", 0);
      afterCommit(() => {
        seen.push("must not run");
      });
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal(await getSetting(store.db, "b"), undefined);
  assert.equal(seen.includes("must not run"), false);
});

test("a failing migration rejects Store.open, and `npm start` exits non-zero with one line", async (t) => {
  const dir = tempDir(t, "svc-store-");
  const file = join(dir, "svc.db");
  // A table in the way of 0001_init makes it fail.
  const raw = new SQLite(file);
  raw.exec("CREATE TABLE configs (x INTEGER)");
  raw.close();
  await assert.rejects(Store.open(file, log), /database migration failed/);
  const run = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: { ...process.env, SVC_DATA_DIR: dir, SVC_HTTP_PORT: "0", SVC_LOG_LEVEL: "silent", SVC_ADMIN_PASSWORD: "long-enough" },
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(run.status, 1, run.stderr);
  assert.match(run.stderr, /^svc: start-up failed: database migration failed/m);
});
