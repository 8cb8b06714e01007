import assert from "node:assert/strict";
import { test } from "node:test";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { STORED_KEY } from "../../src/services/mqtt-settings.service.js";
import type { AppContext } from "../../src/server.js";
import { api, bind, dynamicNode } from "../control/agent-harness.js";
import { opening, startSseServer, type SseServer } from "../events/sse-harness.js";
import { ADMIN_PASSWORD, assertError, injectJson, startHarness, type Harness, type Res } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * `GET, PUT /api/v1/settings/mqtt` (DESIGN §5 "MQTT settings (no secrets in answers)") and the `settings.mqtt.updated` event (spec §6.5).
 */

const PATH = "/api/v1/settings/mqtt";
const FIELDS = [
  "backend_username",
  "broker",
  "broker_connected",
  "mqtt_enabled",
  "public_host",
  "public_port",
  "public_tls_port",
  "sources",
  "tls_enabled",
].sort();

type Req = (method: string, url: string, body?: unknown, opts?: { auth?: boolean | string }) => Promise<Res>;

/** Requests by inject against one server, as the admin holding `token`. */
function injector(server: AppContext, token: string): Req {
  return async (method, url, body, opts = {}) => {
    const auth = opts.auth ?? true;
    return injectJson(server, {
      method,
      url,
      headers: auth === false ? {} : { authorization: `Bearer ${typeof auth === "string" ? auth : token}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
  };
}

async function loginTo(server: AppContext): Promise<string> {
  const login = await server.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: ADMIN_PASSWORD } });
  assert.equal(login.statusCode, 200);
  return login.json().access_token;
}

/** Binds a fresh dynamic node through the API and returns the profile's `mqtt` part (spec §2.6). */
async function bindProfile(req: Req): Promise<{ host: string; port: number; tls: boolean }> {
  const config = await req("POST", "/api/v1/configs", { name: `c-${Math.random().toString(36).slice(2, 8)}`, tunnel_protocol: "wireguard", network_cidr: "10.30.0.0/24" });
  assert.equal(config.status, 201, config.text);
  const node = await req("POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: "edge", mode: "dynamic" });
  assert.equal(node.status, 201, node.text);
  const cmd = await req("POST", `/api/v1/configs/${config.json.config_id}/nodes/${node.json.node_id}/bind-command`);
  assert.equal(cmd.status, 200, cmd.text);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  const res = await req(
    "POST",
    "/api/client/bind",
    { bind_token: token, server_url: "http://localhost:8080", client_version: "1.0.0", platform: "linux", hostname: "edge" },
    { auth: false },
  );
  assert.equal(res.status, 200, res.text);
  return res.json.mqtt;
}

/** Every secret the service holds for the broker (generated and stored at first start). */
function storedSecrets(h: Harness): string[] {
  const rows = sqliteOf(h.server.store)
    .prepare("SELECT value FROM settings_kv WHERE key IN ('mqtt_backend_password', 'broker_authz_shared_key')")
    .all() as Array<{ value: string }>;
  assert.equal(rows.length, 2, "both broker secrets exist");
  return rows.map((r) => r.value);
}

test("GET /api/v1/settings/mqtt answers the switch, broker, connection and profile endpoint from the environment, and no secret (DESIGN §5)", async (t) => {
  const h = await startHarness(t, { mqttPublicHost: "mqtt.example.net" });
  const res = await h.req("GET", PATH);
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(Object.keys(res.json).sort(), FIELDS, "a whitelist of fields");
  assert.equal(res.json.mqtt_enabled, true);
  assert.equal(res.json.broker, "embedded");
  assert.equal(res.json.broker_connected, true);
  assert.equal(res.json.public_host, "mqtt.example.net");
  assert.equal(res.json.public_port, h.server.mqtt.broker!.port, "the embedded broker's port when SVC_MQTT_PUBLIC_PORT is unset");
  assert.equal(res.json.public_tls_port, 8883, "DESIGN §6 default");
  assert.equal(res.json.tls_enabled, false);
  assert.equal(res.json.backend_username, "svc-backend");
  assert.deepEqual(res.json.sources, { public_host: "environment", public_port: "environment", public_tls_port: "environment" });
  for (const secret of storedSecrets(h)) assert.ok(!res.text.includes(secret), "no broker secret in the answer");
  assert.doesNotMatch(res.text, /password|secret|key"/i);
});

test("PUT /api/v1/settings/mqtt stores overrides, publishes settings.mqtt.updated after the write, and the next bind profile carries them (spec §2.6, §6.5)", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const before = await bind(s, configId, nodeId);
  assert.equal(before.mqtt.host, "localhost", "the host of SVC_PUBLIC_URL by default");

  // Which settings row existed at the moment the event was handed to the hub (spec §6.5 rule 6).
  const storedAtPublish: Array<string | undefined> = [];
  const publish = s.hub.publish.bind(s.hub);
  s.hub.publish = (type, payload) => {
    if (type === "settings.mqtt.updated") {
      const row = sqliteOf(s.server.store).prepare("SELECT value FROM settings_kv WHERE key = ?").get(STORED_KEY) as { value: string } | undefined;
      storedAtPublish.push(row?.value);
    }
    publish(type, payload);
  };
  const stream = await s.open();
  t.after(() => stream.destroy());
  await opening(stream);

  const put = await api(s, "PUT", PATH, { public_host: "mqtt.example.org", public_port: 18830, public_tls_port: 18883 });
  assert.equal(put.status, 200, JSON.stringify(put.json));
  assert.equal(put.json.public_host, "mqtt.example.org");
  assert.equal(put.json.public_port, 18830);
  assert.equal(put.json.public_tls_port, 18883);
  assert.deepEqual(put.json.sources, { public_host: "settings", public_port: "settings", public_tls_port: "settings" });
  assert.deepEqual((await api(s, "GET", PATH)).json, put.json);

  const frame = await stream.waitFor((f) => f.event === "settings.mqtt.updated");
  assert.equal(frame.json.type, "settings.mqtt.updated");
  assert.deepEqual(Object.keys(frame.json.payload), ["mqtt"], "spec §6.5 typical key: mqtt");
  assert.deepEqual(frame.json.payload.mqtt, put.json, "the payload is the settings answer");
  assert.deepEqual(
    storedAtPublish.map((v) => JSON.parse(v ?? "null")),
    [{ public_host: "mqtt.example.org", public_port: 18830, public_tls_port: 18883 }],
    "published once, after the write",
  );
  const secrets = sqliteOf(s.server.store)
    .prepare("SELECT value FROM settings_kv WHERE key IN ('mqtt_backend_password', 'broker_authz_shared_key')")
    .all() as Array<{ value: string }>;
  for (const { value } of secrets) assert.ok(!frame.data.includes(value), "no secret in the event");

  const after = await bind(s, configId, (await fresh(s, configId)).node_id);
  assert.equal(after.mqtt.host, "mqtt.example.org", "bind after PUT: the new host");
  assert.equal(after.mqtt.port, 18830, "bind after PUT: the new port");
  assert.equal(after.mqtt.tls, false);

  // Partial change: absent fields stay; null goes back to the environment.
  const back = await api(s, "PUT", PATH, { public_port: null });
  assert.equal(back.status, 200, JSON.stringify(back.json));
  assert.equal(back.json.public_host, "mqtt.example.org");
  assert.equal(back.json.public_port, s.server.mqtt.broker!.port);
  assert.deepEqual(back.json.sources, { public_host: "settings", public_port: "environment", public_tls_port: "settings" });
  assert.equal((await bind(s, configId, (await fresh(s, configId)).node_id)).mqtt.port, s.server.mqtt.broker!.port);
});

/** A new dynamic node in an existing config. */
async function fresh(s: SseServer, configId: string): Promise<{ node_id: string }> {
  const res = await api(s, "POST", `/api/v1/configs/${configId}/nodes`, { name: `n-${Math.random().toString(36).slice(2, 8)}`, mode: "dynamic" });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  return res.json;
}

test("MQTT settings overrides survive a restart and keep winning over the environment", async (t) => {
  const h = await startHarness(t, { mqttPublicHost: "env-host.example.net" });
  assert.equal((await h.req("PUT", PATH, { public_host: "203.0.113.9", public_port: 2883 })).status, 200);
  const dbFile = sqliteOf(h.server.store).name;
  await h.server.close();

  const again = await createServer(
    testSettings({ dataDir: h.dataDir, adminPassword: ADMIN_PASSWORD, mqttPublicHost: "env-host.example.net", mqttPublicPort: 1999 }),
    createLogger("silent"),
    { clock: h.clock, dbFile },
  );
  t.after(() => again.close());
  const req = injector(again, await loginTo(again));
  const res = await req("GET", PATH);
  assert.equal(res.json.public_host, "203.0.113.9");
  assert.equal(res.json.public_port, 2883, "the stored override beats SVC_MQTT_PUBLIC_PORT");
  assert.equal(res.json.public_tls_port, 8883);
  assert.deepEqual(res.json.sources, { public_host: "settings", public_port: "settings", public_tls_port: "environment" });
  const profile = await bindProfile(req);
  assert.equal(profile.host, "203.0.113.9");
  assert.equal(profile.port, 2883);
});

test("PUT /api/v1/settings/mqtt refuses unknown fields, bad hosts and ports, and an empty change with VALIDATION_FAILED and writes nothing", async (t) => {
  const h = await startHarness(t);
  const before = h.fingerprint();
  for (const body of [
    { public_host: "mqtt.example.org", password: "x" },
    { broker: "emqx" },
    { public_host: "not a host!" },
    { public_host: "" },
    { public_host: `${"a".repeat(64)}.example.org` },
    { public_host: "mqtt://mqtt.example.org" },
    { public_port: 0 },
    { public_port: 65536 },
    { public_port: 1883.5 },
    { public_port: "1883" },
    { public_tls_port: -1 },
    {},
  ]) {
    assertError(await h.req("PUT", PATH, body), "VALIDATION_FAILED", JSON.stringify(body));
  }
  assertError(await h.req("PUT", PATH, { public_port: 1883 }, { auth: false }), "UNAUTHORIZED");
  assert.equal(h.fingerprint(), before, "nothing written");
  // IPv6 literals and plain host names are fine.
  assert.equal((await h.req("PUT", PATH, { public_host: "2001:db8::1" })).status, 200);
  assert.equal((await h.req("PUT", PATH, { public_host: "broker" })).status, 200);
});

test("with MQTT services disabled, GET says so and PUT answers MQTT_DISABLED and writes nothing (spec §1.7, §4 rule 14)", async (t) => {
  const h = await startHarness(t, { mqttEnabled: false });
  const get = await h.req("GET", PATH);
  assert.equal(get.status, 200);
  assert.equal(get.json.mqtt_enabled, false);
  assert.equal(get.json.broker_connected, false);
  const before = h.fingerprint();
  assertError(await h.req("PUT", PATH, { public_host: "mqtt.example.org" }), "MQTT_DISABLED");
  assert.equal(h.fingerprint(), before);
});

test("both routes are in the OpenAPI document; PUT is marked as an MQTT write API", async (t) => {
  const h = await startHarness(t);
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  const ops = doc.paths[PATH];
  assert.ok(ops?.get && ops?.put, "GET and PUT documented");
  assert.equal(ops.put["x-mqtt-write"], true);
  assert.equal(ops.get["x-mqtt-write"], undefined);
  assert.ok(ops.put.requestBody, "the body is documented");
});
