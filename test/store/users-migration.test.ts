/**
 * Migration 0017_users (README "Users, roles and tokens"): the one admin password of a database
 * from before users becomes the user `admin` with role `owner`, and the admin sessions open at
 * the upgrade stay open as admin's. Real SQLite files.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { Kysely, Migrator, SqliteDialect } from "kysely";
import SQLite from "better-sqlite3";
import { hashPassword, hashToken, verifyPassword } from "../../src/domain/tokens.js";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { AuthService } from "../../src/services/auth.service.js";
import { sqliteOf } from "../../src/store/connection.js";
import { Store } from "../../src/store/db.js";
import { migrations } from "../../src/store/migrations.js";
import { tempDir } from "../helpers/temp-dir.js";

test("migration 0017: the stored admin password becomes user admin (owner, id usr-admin), it leaves settings_kv, and an open session keeps working as admin's", async (t) => {
  const file = join(tempDir(t, "svc-users-"), "svc.db");
  const before = Object.keys(migrations).sort().filter((n) => n < "0017");
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(file) }) });
  assert.equal((await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateTo(before.at(-1) ?? "")).error, undefined);
  await db.destroy();
  const hash = await hashPassword("the old admin password", 2 ** 14);
  const raw = new SQLite(file);
  raw.prepare("INSERT INTO settings_kv (key, value, updated_at) VALUES ('admin_password_hash', ?, 5)").run(hash);
  raw.prepare("INSERT INTO admin_sessions (token_hash, created_at, expires_at) VALUES (?, 1, ?)").run(hashToken("an-open-session-token-of-43-characters-xxxx"), 10_000);
  raw.close();

  const store = await Store.open(file, createLogger("silent"));
  t.after(() => store.close());
  const sqlite = sqliteOf(store);
  assert.deepEqual(sqlite.prepare("SELECT user_id, username, password_hash, role, disabled FROM users").all(), [{ user_id: "usr-admin", username: "admin", password_hash: hash, role: "owner", disabled: 0 }]);
  assert.deepEqual(sqlite.prepare("SELECT count(*) AS n FROM settings_kv WHERE key = 'admin_password_hash'").get(), { n: 0 }, "the hash lives in users only");
  const auth = new AuthService({ store, clock: new ManualClock(1000), sessionTtlMs: 60_000 });
  const session = await auth.session("an-open-session-token-of-43-characters-xxxx");
  assert.deepEqual(session.principal, { user_id: "usr-admin", username: "admin", role: "owner", via: "session", login: "password" });
  // The old password signs in as admin; with no user at all a first owner would be made, not here.
  assert.equal(await auth.ensureAdminPassword(undefined), null, "no password generated: admin exists");
  assert.ok((await auth.login("admin", "the old admin password")).accessToken);
  // The hash from before (N = 2^14 there) is made again at OWASP's cost at the first sign-in.
  const upgraded = (sqlite.prepare("SELECT password_hash FROM users").get() as { password_hash: string }).password_hash;
  assert.match(upgraded, /^scrypt\$131072\$8\$1\$/);
  assert.ok(await verifyPassword("the old admin password", upgraded));
});

test("a database from before users with no admin password gets a generated first owner; SVC_ADMIN_PASSWORD keeps admin's password in sync", async (t) => {
  const file = join(tempDir(t, "svc-users-"), "svc.db");
  const store = await Store.open(file, createLogger("silent"));
  t.after(() => store.close());
  const auth = new AuthService({ store, clock: new ManualClock(1000), sessionTtlMs: 60_000 });
  const generated = await auth.ensureAdminPassword(undefined);
  assert.ok(generated !== null && generated.length >= 20);
  assert.equal(await auth.ensureAdminPassword(undefined), null, "only at first start");
  await auth.ensureAdminPassword("a password from the environment");
  assert.ok((await auth.login("admin", "a password from the environment")).accessToken);
  await assert.rejects(auth.login("admin", generated), /wrong username or password/);
});
