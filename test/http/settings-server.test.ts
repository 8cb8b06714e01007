import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { testSettings } from "../../src/config.js";
import { artifactFilename } from "../../src/domain/artifact-name.js";
import { VERSION } from "../../src/lib/version.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { PUBLIC_URL_KEY } from "../../src/services/public-url.service.js";
import { sqliteOf } from "../../src/store/connection.js";
import { api, bind, dynamicNode } from "../control/agent-harness.js";
import { opening, startSseServer } from "../events/sse-harness.js";
import { ADMIN_PASSWORD, assertError, injectJson, startHarness, type Harness } from "./harness.js";

/**
 * `GET, PUT /api/v1/settings/server` (DESIGN §5 settings, the spec's `{base_url}`): the public
 * URL hosts are told, where it comes from, whether it is loopback; a stored value is what bind
 * commands (spec §4 rule 10), bind profiles (spec §2.6 `server_url`) and client download
 * commands (spec §4 rule 6) carry from then on; SVC_PUBLIC_URL wins over it.
 */

const PATH = "/api/v1/settings/server";
const FIELDS = ["loopback", "public_url", "source", "stored_public_url"];

/** The stored public URL row, or undefined. */
function storedRow(h: Harness): string | undefined {
  const row = sqliteOf(h.server.store).prepare("SELECT value FROM settings_kv WHERE key = ?").get(PUBLIC_URL_KEY) as { value: string } | undefined;
  return row?.value;
}

/** A dynamic node's bind command through the API. */
async function bindCommand(h: Harness): Promise<string> {
  const config = await h.req("POST", "/api/v1/configs", { name: `c-${Math.random().toString(36).slice(2, 8)}`, tunnel_protocol: "wireguard", network_cidr: "10.40.0.0/24" });
  assert.equal(config.status, 201, config.text);
  const node = await h.req("POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: "edge", mode: "dynamic" });
  assert.equal(node.status, 201, node.text);
  const cmd = await h.req("POST", `/api/v1/configs/${config.json.config_id}/nodes/${node.json.node_id}/bind-command`);
  assert.equal(cmd.status, 200, cmd.text);
  return cmd.json.command;
}

/**
 * The client download command of a local build (spec §4 rule 6). The zip is put in place
 * beforehand, so the grant finds it and builds nothing.
 */
async function clientDownloadCommand(h: Harness): Promise<string> {
  const target = { goos: "linux", goarch: "amd64" } as const;
  mkdirSync(join(h.dataDir, "artifacts"), { recursive: true });
  writeFileSync(join(h.dataDir, "artifacts", artifactFilename(target, VERSION)), "PK stand-in");
  const grant = await h.req("POST", "/api/v1/tools/download/client-artifacts/download-grant", { source: "local_build", ...target });
  assert.equal(grant.status, 200, grant.text);
  return grant.json.command;
}

test("GET /api/v1/settings/server: the default http://localhost:{port}, flagged loopback, and only the documented fields", async (t) => {
  const h = await startHarness(t);
  const res = await h.req("GET", PATH);
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(Object.keys(res.json).sort(), FIELDS, "a whitelist of fields");
  assert.deepEqual(res.json, { public_url: "http://localhost:8080", source: "default", loopback: true, stored_public_url: null });
  assert.match(await bindCommand(h), /^svcctl bind --server http:\/\/localhost:8080 --token \S+$/);
});

test("the settings/server routes need the admin session: 401 UNAUTHORIZED without or with an unknown token, nothing written", async (t) => {
  const h = await startHarness(t);
  const before = h.fingerprint();
  for (const auth of [false, "not-a-token"] as const) {
    assertError(await h.req("GET", PATH, undefined, { auth }), "UNAUTHORIZED", `GET auth=${String(auth)}`);
    assertError(await h.req("PUT", PATH, { public_url: "https://mesh.example.com" }, { auth }), "UNAUTHORIZED", `PUT auth=${String(auth)}`);
  }
  assert.equal(h.fingerprint(), before);
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  assert.equal(doc.paths[PATH].get.operationId, "getServerSettings");
  assert.equal(doc.paths[PATH].put.operationId, "updateServerSettings");
});

test("PUT /api/v1/settings/server stores the URL's origin; bind commands, bind profiles (server_url, broker host) client download commands and the OpenAPI document's servers carry it from then on; null goes back to the default", async (t) => {
  const h = await startHarness(t);
  const put = await h.req("PUT", PATH, { public_url: " https://Mesh.Example.com:8443/ " });
  assert.equal(put.status, 200, put.text);
  assert.deepEqual(put.json, { public_url: "https://mesh.example.com:8443", source: "stored", loopback: false, stored_public_url: "https://mesh.example.com:8443" });
  assert.deepEqual((await h.req("GET", PATH)).json, put.json);
  assert.equal(storedRow(h), "https://mesh.example.com:8443", "trailing slash trimmed, host lower-cased");

  assert.match(await bindCommand(h), /^svcctl bind --server https:\/\/mesh\.example\.com:8443 --token \S+$/);
  const command = await clientDownloadCommand(h);
  assert.match(command, /^curl -fL -o \S+ 'https:\/\/mesh\.example\.com:8443\/api\/v1\/tools\/download\/client-artifacts\/[^']+' && unzip/);
  const mqtt = await h.req("GET", "/api/v1/settings/mqtt");
  assert.equal(mqtt.json.public_host, "mesh.example.com", "without SVC_MQTT_PUBLIC_HOST the broker host follows the public URL");
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  assert.deepEqual(doc.servers, [{ url: "https://mesh.example.com:8443" }], "generated API clients resolve paths against the URL as it is now");

  const back = await h.req("PUT", PATH, { public_url: null });
  assert.equal(back.status, 200, back.text);
  assert.deepEqual(back.json, { public_url: "http://localhost:8080", source: "default", loopback: true, stored_public_url: null });
  assert.equal(storedRow(h), undefined);
  assert.match(await bindCommand(h), /^svcctl bind --server http:\/\/localhost:8080 --token /);
});

test("spec §2.6: a bind after PUT answers server_url = the stored URL, and settings.server.updated {server} goes out after the write", async (t) => {
  const s = await startSseServer(t);
  const stream = await s.open();
  t.after(() => stream.destroy());
  await opening(stream);
  const storedAtPublish: Array<string | undefined> = [];
  const publish = s.hub.publish.bind(s.hub);
  s.hub.publish = (type, payload) => {
    if (type === "settings.server.updated") {
      const row = sqliteOf(s.server.store).prepare("SELECT value FROM settings_kv WHERE key = ?").get(PUBLIC_URL_KEY) as { value: string } | undefined;
      storedAtPublish.push(row?.value);
    }
    publish(type, payload);
  };
  const put = await api(s, "PUT", PATH, { public_url: "http://192.0.2.10:8080" });
  assert.equal(put.status, 200, JSON.stringify(put.json));
  const frame = await stream.waitFor((f) => f.event === "settings.server.updated");
  assert.deepEqual(frame.json.payload, { server: put.json }, "the payload is the settings answer");
  assert.deepEqual(storedAtPublish, ["http://192.0.2.10:8080"], "published once, after the write");

  const { configId, nodeId } = await dynamicNode(s);
  const profile = await bind(s, configId, nodeId);
  assert.equal(profile.profile.server_url, "http://192.0.2.10:8080");
  assert.equal(profile.mqtt.host, "192.0.2.10");
});

test("PUT /api/v1/settings/server refuses what is not scheme, host and port with VALIDATION_FAILED naming the rule, and writes nothing", async (t) => {
  const h = await startHarness(t);
  const before = h.fingerprint();
  const cases: Array<[unknown, RegExp]> = [
    [{ public_url: "mesh.example.com" }, /must be a full URL such as https:\/\/mesh\.example\.com/],
    [{ public_url: "ftp://mesh.example.com" }, /must start with http:\/\/ or https:\/\//],
    [{ public_url: "https://mesh.example.com/svc" }, /without a path, query or fragment/],
    [{ public_url: "https://mesh.example.com/?a=1" }, /without a path, query or fragment/],
    [{ public_url: "https://mesh.example.com#x" }, /without a path, query or fragment/],
    [{ public_url: "https://admin:pw@mesh.example.com" }, /must not carry a user name or password/],
    [{ public_url: "" }, /must be a full URL/],
    [{ public_url: `https://${"a".repeat(2050)}.example.com` }, /.+/],
    [{ public_url: 8080 }, /.+/],
    [{}, /.+/],
    [{ public_url: "https://mesh.example.com", extra: 1 }, /.+/],
  ];
  for (const [body, message] of cases) {
    const res = await h.req("PUT", PATH, body);
    assertError(res, "VALIDATION_FAILED", JSON.stringify(body).slice(0, 80));
    assert.match(res.json.error.message, message);
  }
  assert.equal(h.fingerprint(), before);
});

test("SVC_PUBLIC_URL wins: GET says environment, PUT answers 409 SETTING_FROM_ENVIRONMENT naming the variable and writes nothing; a URL stored before is kept but not used", async (t) => {
  const first = await startHarness(t);
  assert.equal((await first.req("PUT", PATH, { public_url: "https://stored.example.com" })).status, 200);
  const dbFile = sqliteOf(first.server.store).name;
  await first.server.close();

  const env = await createServer(
    testSettings({ dataDir: first.dataDir, adminPassword: ADMIN_PASSWORD, publicUrl: "https://env.example.net", publicUrlSource: "environment" }),
    createLogger("silent"),
    { clock: first.clock, dbFile },
  );
  t.after(() => env.close());
  const login = await env.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: ADMIN_PASSWORD } });
  const h: Harness = {
    ...first,
    server: env,
    req: (method, url, body) =>
      injectJson(env, {
        method,
        url,
        headers: { authorization: `Bearer ${login.json().access_token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      }),
    fingerprint: () => sqliteOf(env.store).prepare("SELECT group_concat(key || '=' || value) AS kv FROM settings_kv").get() as unknown as string,
  };
  const res = await h.req("GET", PATH);
  assert.deepEqual(res.json, { public_url: "https://env.example.net", source: "environment", loopback: false, stored_public_url: "https://stored.example.com" });
  const before = JSON.stringify(h.fingerprint());
  const put = await h.req("PUT", PATH, { public_url: "https://other.example.com" });
  assertError(put, "SETTING_FROM_ENVIRONMENT");
  assert.match(put.json.error.message, /SVC_PUBLIC_URL/);
  assertError(await h.req("PUT", PATH, { public_url: null }), "SETTING_FROM_ENVIRONMENT");
  assert.equal(JSON.stringify(h.fingerprint()), before, "nothing written");
  assert.match(await bindCommand(h), /^svcctl bind --server https:\/\/env\.example\.net --token /);
});

test("a stored public URL survives a restart", async (t) => {
  const first = await startHarness(t);
  assert.equal((await first.req("PUT", PATH, { public_url: "https://mesh.example.org" })).status, 200);
  const dbFile = sqliteOf(first.server.store).name;
  await first.server.close();
  const again = await createServer(testSettings({ dataDir: first.dataDir, adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock: first.clock, dbFile });
  t.after(() => again.close());
  assert.equal(again.publicUrl.current(), "https://mesh.example.org");
  assert.equal(again.publicUrl.view().source, "stored");
});

test("spec §4 rule 9: the MCP tool write_export_snapshot hands out a download URL on the stored public URL", async (t) => {
  const h = await startHarness(t);
  assert.equal((await h.req("PUT", PATH, { public_url: "https://mesh.example.com" })).status, 200);
  const res = await h.req(
    "POST",
    "/api/v1/mcp",
    { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "write_export_snapshot", arguments: {} } },
    { headers: { accept: "application/json, text/event-stream" } },
  );
  assert.equal(res.status, 200, res.text);
  const out = res.json.result.structuredContent as { snapshot_id: string; download_url: string };
  assert.ok(out.download_url.startsWith(`https://mesh.example.com/api/v1/backups/export/${out.snapshot_id}?download_token=`), out.download_url);
});
