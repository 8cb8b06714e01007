import assert from "node:assert/strict";
import { test } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { ADMIN_PASSWORD, assertError, startHarness } from "./harness.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqliteOf } from "../../src/store/connection.js";

test("login answers a bearer token with its expiry; a wrong password answers UNAUTHORIZED", async (t) => {
  const h = await startHarness(t);
  const res = await h.req("POST", "/api/v1/auth/login", { password: ADMIN_PASSWORD }, { auth: false });
  assert.equal(res.status, 200);
  assert.equal(res.json.token_type, "Bearer");
  assert.equal(res.json.expires_at, new Date(h.clock.now() + 12 * 3600 * 1000).toISOString());
  assert.equal(res.json.expires_in, 12 * 3600, "the lifetime in seconds (RFC 6749 §5.1), for clients whose clock differs");
  assert.notEqual(res.json.access_token, h.token);
  assertError(await h.req("POST", "/api/v1/auth/login", { password: "wrong" }, { auth: false }), "UNAUTHORIZED");
  assertError(await h.req("POST", "/api/v1/auth/login", {}, { auth: false }), "VALIDATION_FAILED");
  // Tokens and the password are stored only hashed.
  const dump = JSON.stringify(sqliteOf(h.server.store).prepare("SELECT * FROM admin_sessions").all()) +
    JSON.stringify(sqliteOf(h.server.store).prepare("SELECT * FROM settings_kv").all()) +
    JSON.stringify(sqliteOf(h.server.store).prepare("SELECT * FROM users").all());
  assert.ok(!dump.includes(res.json.access_token));
  assert.ok(!dump.includes(ADMIN_PASSWORD));
  assert.match(dump, /scrypt\$/);
});

test("health needs no token; the bearer scheme is required and logout ends the session", async (t) => {
  const h = await startHarness(t);
  const health = await h.req("GET", "/api/v1/health", undefined, { auth: false });
  assert.equal(health.status, 200);
  assert.equal(health.json.status, "ok");
  assert.match(health.json.version, /^\d+\.\d+\.\d+/);
  assertError(
    await h.req("GET", "/api/v1/configs", undefined, { auth: false, headers: { authorization: `Basic ${h.token}` } }),
    "UNAUTHORIZED",
  );
  assert.equal((await h.req("POST", "/api/v1/auth/logout")).status, 204);
  assertError(await h.req("GET", "/api/v1/configs"), "UNAUTHORIZED");
});

test("without SVC_ADMIN_PASSWORD a password is generated once and kept across restarts; setting it replaces the old one", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-auth-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const log = createLogger("silent");
  const clock = new ManualClock();
  const first = await createServer(testSettings({ dataDir, adminPassword: undefined }), log, { clock });
  const generated = first.generatedAdminPassword;
  assert.ok(generated !== null && generated.length >= 20);
  await first.close();
  const second = await createServer(testSettings({ dataDir, adminPassword: undefined }), log, { clock });
  assert.equal(second.generatedAdminPassword, null, "printed once only");
  const ok = await second.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: generated } });
  assert.equal(ok.statusCode, 200);
  await second.close();
  const third = await createServer(testSettings({ dataDir, adminPassword: "a-new-password" }), log, { clock });
  t.after(() => third.close());
  const old = await third.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: generated } });
  assert.equal(old.statusCode, 401);
  const fresh = await third.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: "a-new-password" } });
  assert.equal(fresh.statusCode, 200);
});
