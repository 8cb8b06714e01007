import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { loadSettings, SettingsError } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { nodeClientId, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { createServer, type AppContext } from "../../src/server.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * spec §5 row "broker → backend authz": the `x-svc-internal-key` the backend expects comes from
 * `SVC_BROKER_AUTHZ_SHARED_KEY`, parsed from the environment; without it a key is generated once
 * and kept in the store (DESIGN §6, docs/history/decisions-2026.md "Broker").
 */

const URL = "/api/internal/emqx/authz";
const BODY = {
  clientid: nodeClientId("cfg-1", "node-a"),
  username: nodeUsername("cfg-1", "node-a"),
  peerhost: "10.0.0.7",
  action: "publish",
  topic: "svc/cfg-1/node-a/heartbeat",
  qos: "1",
  retain: "false",
};

async function start(t: TestContext, env: Record<string, string>): Promise<AppContext> {
  const settings = loadSettings({ SVC_ADMIN_PASSWORD: "correct horse battery staple", SVC_ENABLE_MQTT_SERVICES: "false", ...env });
  const server = await createServer(settings, createLogger("silent"), { clock: new ManualClock() });
  t.after(() => server.close());
  return server;
}

/** The route's HTTP status for one key (401 = refused; anything else = the key was accepted). */
async function statusWith(server: AppContext, key: string): Promise<number> {
  const res = await server.app.inject({ method: "POST", url: URL, headers: { "content-type": "application/json", "x-svc-internal-key": key }, payload: BODY });
  return res.statusCode;
}

test("spec §5 broker → backend authz: SVC_BROKER_AUTHZ_SHARED_KEY is parsed from the environment (at least 16 characters) and is the key the route accepts", async (t) => {
  const key = "env-key-".repeat(3);
  assert.equal(loadSettings({ SVC_BROKER_AUTHZ_SHARED_KEY: key }).brokerAuthzSharedKey, key);
  assert.equal(loadSettings({}).brokerAuthzSharedKey, undefined);
  assert.equal(loadSettings({ SVC_BROKER_AUTHZ_SHARED_KEY: "" }).brokerAuthzSharedKey, undefined, "empty counts as unset");
  assert.throws(() => loadSettings({ SVC_BROKER_AUTHZ_SHARED_KEY: "short-key-15chr" }), (e: unknown) => e instanceof SettingsError && /SVC_BROKER_AUTHZ_SHARED_KEY/.test(e.message));
  const dataDir = mkdtempSync(join(tmpdir(), "svc-authz-key-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const server = await start(t, { SVC_DATA_DIR: dataDir, SVC_BROKER_AUTHZ_SHARED_KEY: key });
  assert.equal(await statusWith(server, key), 200);
  assert.equal(await statusWith(server, `${key}x`), 401);
  const stored = sqliteOf(server.store).prepare("SELECT value FROM settings_kv WHERE key = 'broker_authz_shared_key'").get() as { value: string } | undefined;
  if (stored) assert.equal(await statusWith(server, stored.value), 401, "the environment's key wins over a stored one");
});

test("spec §5 broker → backend authz: without SVC_BROKER_AUTHZ_SHARED_KEY a random key is generated once, stored, and kept across restarts", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-authz-key-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await start(t, { SVC_DATA_DIR: dataDir });
  const row = sqliteOf(first.store).prepare("SELECT value FROM settings_kv WHERE key = 'broker_authz_shared_key'").get() as { value: string };
  assert.match(row.value, /^[A-Za-z0-9_-]{43}$/, "32 random bytes, base64url");
  assert.equal(await statusWith(first, row.value), 200);
  assert.equal(await statusWith(first, "x".repeat(43)), 401);
  await first.close();
  const second = await start(t, { SVC_DATA_DIR: dataDir });
  assert.equal(await statusWith(second, row.value), 200, "the same key after a restart");
  const other = mkdtempSync(join(tmpdir(), "svc-authz-key-"));
  t.after(() => rmSync(other, { recursive: true, force: true }));
  const third = await start(t, { SVC_DATA_DIR: other });
  const otherKey = (sqliteOf(third.store).prepare("SELECT value FROM settings_kv WHERE key = 'broker_authz_shared_key'").get() as { value: string }).value;
  assert.notEqual(otherKey, row.value, "random per install");
});
