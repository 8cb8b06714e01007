import assert from "node:assert/strict";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { connect, createServer as createTcpServer, type Server as TcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import Database from "better-sqlite3";
import mqtt from "mqtt";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings, type Settings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import { openStream, opening } from "../events/sse-harness.js";
import { sampleValue } from "../helpers/prometheus.js";
import { injectJson } from "../http/harness.js";
import { envelope, eventually, type Profile } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The feature switch `SVC_ENABLE_MQTT_SERVICES=false`: one test per bullet of spec §1.7
 * (one test per §1.7 bullet).
 *
 * Every test starts from the same stored state, built once with MQTT on: a config with a dynamic
 * node (bound, its agent online with the tunnel running and its config confirmed `latest`, an
 * unredeemed bind token issued) and a static node. Each test copies that data directory and
 * starts the real service over the copy with the switch off (real SQLite file, real HTTP by
 * inject or a listening socket, a ManualClock).
 */

const ADMIN_PASSWORD = "feature-switch-password";
const MINUTE = 60_000;

interface Fixture {
  dir: string;
  /** The clock's time when the fixture was closed. */
  now: number;
  configId: string;
  dynamicId: string;
  staticId: string;
  /** A valid, unredeemed bind token of the dynamic node. */
  bindToken: string;
  profile: Profile;
  staged: { config_version: number; config_sha256: string };
}

interface Booted {
  server: AppContext;
  clock: ManualClock;
  dataDir: string;
  req(method: string, url: string, body?: unknown, opts?: { auth?: boolean }): Promise<{ status: number; json: any; text: string }>;
  /** Closes the service (once; safe to call again, e.g. from t.after). */
  close(): Promise<void>;
}

const roots: string[] = [];
let fixture: Fixture;

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  roots.push(dir);
  return dir;
}

/** Starts the real service over `dataDir` and logs in. */
async function boot(dataDir: string, mqttEnabled: boolean, now: number, extra: Partial<Settings> = {}): Promise<Booted> {
  const clock = new ManualClock(now);
  const server = await createServer(
    testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, mqttEnabled, ...extra }),
    createLogger("silent"),
    { clock },
  );
  const login = await server.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: ADMIN_PASSWORD } });
  assert.equal(login.statusCode, 200, login.body);
  const token = login.json().access_token as string;
  let closing: Promise<void> | undefined;
  return {
    server,
    clock,
    dataDir,
    close: () => (closing ??= server.close()),
    req: (method, url, body, opts = {}) =>
      injectJson(server, {
        method,
        url,
        headers: opts.auth === false ? {} : { authorization: `Bearer ${token}` },
        ...(body === undefined ? {} : { payload: body as object }),
      }),
  };
}

/** A copy of the fixture's data directory, for one test. */
function copyOfFixture(): string {
  const dir = tempDir("svc-switch-");
  cpSync(fixture.dir, dir, { recursive: true });
  return dir;
}

/**
 * Every stored row except admin sessions (a login writes one) and the audit log (every request
 * that changes state or is refused appends an entry by design), table by table, as the database
 * file holds them: what "stored data is unchanged" compares.
 */
function storedRows(dataDir: string): Record<string, unknown[]> {
  const db = new Database(join(dataDir, "svc.db"), { readonly: true });
  try {
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('admin_sessions', 'audit_log') ORDER BY name")
      .all() as Array<{ name: string }>;
    return Object.fromEntries(tables.map(({ name }) => [name, db.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all()]));
  } finally {
    db.close();
  }
}

function controlLogCount(s: Booted): number {
  return (sqliteOf(s.server.store).prepare("SELECT count(*) AS n FROM control_logs").get() as { n: number }).n;
}

const disabled = (res: { status: number; json: any; text: string }, what: string) => {
  assert.equal(res.status, 409, `${what}: ${res.text}`);
  assert.equal(res.json.error.code, "MQTT_DISABLED", what);
};

before(async () => {
  const dir = tempDir("svc-switch-fixture-");
  const s = await boot(dir, true, Date.parse("2026-03-01T00:00:00.000Z"));
  try {
    const config = await s.req("POST", "/api/v1/configs", { name: "mesh", tunnel_protocol: "wireguard", network_cidr: "10.61.0.0/24" });
    assert.equal(config.status, 201, config.text);
    const configId = config.json.config_id as string;
    const dyn = await s.req("POST", `/api/v1/configs/${configId}/nodes`, { name: "edge", mode: "dynamic", public_address: "192.0.2.7", listen_port: 51820 });
    assert.equal(dyn.status, 201, dyn.text);
    const stat = await s.req("POST", `/api/v1/configs/${configId}/nodes`, { name: "hub", mode: "static", public_address: "192.0.2.8", listen_port: 51820 });
    assert.equal(stat.status, 201, stat.text);
    const dynamicId = dyn.json.node_id as string;
    const base = `/api/v1/configs/${configId}/nodes/${dynamicId}`;

    const cmd = await s.req("POST", `${base}/bind-command`);
    const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
    const bound = await s.req("POST", "/api/client/bind", { bind_token: token, server_url: "http://localhost:8080", client_version: "1.2.3", platform: "linux", hostname: "edge-1" }, { auth: false });
    assert.equal(bound.status, 200, bound.text);
    const profile = bound.json as Profile;

    const agent = await mqtt.connectAsync(`mqtt://127.0.0.1:${s.server.mqtt.broker!.port}`, {
      protocolVersion: 4,
      clientId: profile.mqtt.client_id,
      username: profile.mqtt.username,
      password: profile.mqtt.password,
      reconnectPeriod: 0,
    });
    await agent.subscribeAsync(profile.topics.config_push!, { qos: 1 });
    const pushed = new Promise<{ request_id: string }>((resolve) => agent.once("message", (_t, buf) => resolve(JSON.parse(buf.toString()))));
    await agent.publishAsync(profile.topics.heartbeat!, envelope(profile, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
    // Committed, not just decided: the automatic push is requested after the commit.
    const stored = sqliteOf(s.server.store).prepare("SELECT client_presence_state FROM node_client_state WHERE node_id = ?");
    await eventually("online", () => ((stored.get(dynamicId) as { client_presence_state: string }).client_presence_state === "online" ? true : undefined));
    s.clock.advance(testSettings().configPushDebounceMs); // the automatic push of the pending config
    const push = await pushed;
    await agent.publishAsync(profile.topics.config_push_ack!, envelope(profile, "ack", { status: "applied", message: "", action: "push_config" }, push.request_id), { qos: 1 });
    await eventually("latest", async () => ((await s.req("GET", `${base}/endpoint-status`)).json.config_version_state === "latest" ? true : undefined));
    await agent.endAsync(); // a clean disconnect: no will, the node stays online in the store

    const again = await s.req("POST", `${base}/bind-command`);
    const bindToken = /--token (\S+)$/.exec(again.json.command)?.[1];
    assert.ok(bindToken);
    const staged = (await s.req("GET", `${base}/config`)).json;
    fixture = {
      dir,
      now: s.clock.now(),
      configId,
      dynamicId,
      staticId: stat.json.node_id,
      bindToken,
      profile,
      staged: { config_version: staged.config_version, config_sha256: staged.config_sha256 },
    };
  } finally {
    await s.close();
  }
});

after(() => {
  for (const dir of roots) rmSync(dir, { recursive: true, force: true });
});

test("spec §1.7 bullet 1 (client binding is unavailable): bind-command and POST /api/client/bind answer MQTT_DISABLED; a token issued before stays unredeemed", async (t) => {
  const dir = copyOfFixture();
  const s = await boot(dir, false, fixture.now);
  t.after(() => s.close());
  const base = `/api/v1/configs/${fixture.configId}/nodes/${fixture.dynamicId}`;
  disabled(await s.req("POST", `${base}/bind-command`), "bind-command of the stored dynamic node");
  disabled(
    await s.req("POST", "/api/client/bind", { bind_token: fixture.bindToken, server_url: "http://localhost:8080", client_version: "1.2.3", platform: "linux", hostname: "edge-1" }, { auth: false }),
    "redeeming a token issued while MQTT was on",
  );
  const tokens = sqliteOf(s.server.store).prepare("SELECT state FROM bind_tokens WHERE node_id = ? ORDER BY created_at").all(fixture.dynamicId);
  assert.deepEqual(tokens, [{ state: "used" }, { state: "valid" }], "nothing redeemed, nothing invalidated");
});

test("spec §1.7 bullet 2 (endpoint control is unavailable): control (every action) and reset-client answer MQTT_DISABLED and change nothing", async (t) => {
  const dir = copyOfFixture();
  const s = await boot(dir, false, fixture.now);
  t.after(() => s.close());
  const base = `/api/v1/configs/${fixture.configId}/nodes/${fixture.dynamicId}`;
  for (const action of ["start", "stop", "push_config", "wg_show"]) {
    disabled(await s.req("POST", `${base}/control`, { action }), `control ${action}`);
  }
  disabled(await s.req("POST", `${base}/reset-client`), "reset-client");
  assert.equal(controlLogCount(s), 1, "only the fixture's push is logged");
  await s.close();
  assert.deepEqual(storedRows(dir), storedRows(fixture.dir), "credentials and client state kept");
  t.diagnostic("reads stay available: endpoint-status and control-logs answer 200 (see bullet 4)");
});

test("spec §1.7 bullet 3 (creating a new dynamic endpoint is rejected): POST and PATCH to dynamic answer MQTT_DISABLED; static nodes are still created", async (t) => {
  // Also proven in test/http/nodes.test.ts ("a new dynamic node is refused ..."); here over the fixture.
  const dir = copyOfFixture();
  const s = await boot(dir, false, fixture.now);
  t.after(() => s.close());
  const nodes = `/api/v1/configs/${fixture.configId}/nodes`;
  const before = storedRows(dir);
  disabled(await s.req("POST", nodes, { name: "new-edge", mode: "dynamic" }), "new dynamic node");
  disabled(await s.req("PATCH", `${nodes}/${fixture.staticId}`, { mode: "dynamic" }), "static → dynamic");
  assert.deepEqual(storedRows(dir), before, "nothing written");
  const ok = await s.req("POST", nodes, { name: "another-static", mode: "static" });
  assert.equal(ok.status, 201, ok.text);
  assert.equal(ok.json.effective_mode, "static");
});

test("spec §1.7 bullet 4 (existing dynamic endpoints are treated as static, stored data unchanged): every answer projects static; restarted with MQTT on they are dynamic again", async (t) => {
  const dir = copyOfFixture();
  const stored = storedRows(dir);
  const off = await boot(dir, false, fixture.now);
  t.after(() => off.close());
  const { configId, dynamicId } = fixture;
  const base = `/api/v1/configs/${configId}/nodes/${dynamicId}`;
  const staticClient = {
    client_initialized: false,
    client_presence_state: "offline",
    runtime_state: "unknown",
    config_version_state: null,
  };
  const node = (await off.req("GET", base)).json;
  assert.equal(node.mode, "dynamic", "the stored kind is shown as stored");
  assert.equal(node.effective_mode, "static");
  assert.deepEqual({ ...node.client, last_reachable_at: undefined, client_version: undefined }, { ...staticClient, last_reachable_at: undefined, client_version: undefined });
  const listed = (await off.req("GET", `/api/v1/configs/${configId}/nodes`)).json;
  const inList = (Array.isArray(listed) ? listed : listed.nodes).find((n: any) => n.node_id === dynamicId);
  assert.equal(inList.effective_mode, "static", "node list");
  const detail = (await off.req("GET", `/api/v1/configs/${configId}`)).json;
  assert.equal(detail.nodes.find((n: any) => n.node_id === dynamicId).effective_mode, "static", "config detail");
  const status = (await off.req("GET", `${base}/endpoint-status`)).json;
  assert.equal(status.effective_mode, "static", "endpoint status");
  assert.equal(status.client_presence_state, "offline");
  assert.equal(status.mqtt_enabled, false);
  const system = (await off.req("GET", "/api/v1/system/status")).json;
  assert.equal(system.summary.dynamic_nodes, 0, "system status counts no dynamic node");
  assert.equal(system.summary.online, 0);
  const metrics = (await off.req("GET", "/metrics")).text;
  assert.equal(sampleValue(metrics, "svc_nodes", { effective_mode: "static", client_presence_state: "offline", runtime_state: "unknown" }), 2, "metrics");
  assert.equal(sampleValue(metrics, "svc_nodes", { effective_mode: "dynamic", client_presence_state: "online", runtime_state: "running" }), 0);
  await off.close();
  assert.deepEqual(storedRows(dir), stored, "stored data unchanged, row by row");

  const on = await boot(dir, true, fixture.now + MINUTE);
  t.after(() => on.close());
  const back = (await on.req("GET", base)).json;
  assert.equal(back.effective_mode, "dynamic", "dynamic again with MQTT on");
  assert.equal(back.client.client_initialized, true);
  assert.equal(back.client.client_presence_state, "online", "the stored presence is back");
  assert.equal(back.client.runtime_state, "running");
  assert.equal(back.client.config_version_state, "latest");
});

test(
  "spec §1.7 bullet 4, continued: time passing while MQTT is off ages nothing in the store (no presence sweep, no re-armed timers)",
  async (t) => {
    const dir = copyOfFixture();
    const stored = storedRows(dir);
    const off = await boot(dir, false, fixture.now);
    t.after(() => off.close());
    off.clock.advance(testSettings().onlineTtlMs + MINUTE);
    await off.close();
    assert.deepEqual(storedRows(dir).node_client_state, stored.node_client_state, "no presence or runtime aged while off");
  },
);

test("spec §1.7 bullet 5 (MQTT write APIs return MQTT_DISABLED): every route the OpenAPI document marks x-mqtt-write answers it, whatever its body, and writes nothing", async (t) => {
  const dir = copyOfFixture();
  const s = await boot(dir, false, fixture.now);
  t.after(() => s.close());
  const doc = (await s.req("GET", "/api/v1/openapi.json")).json;
  const marked: Array<{ method: string; path: string }> = [];
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(ops)) if (op["x-mqtt-write"] === true) marked.push({ method: method.toUpperCase(), path });
  }
  // The MQTT write APIs of spec §4 (rules 10–12, 14) and DESIGN §5; a new one is marked where it is declared.
  const known = [
    "POST /api/v1/configs/{config_id}/nodes/{node_id}/bind-command",
    "POST /api/client/bind",
    "POST /api/v1/configs/{config_id}/nodes/{node_id}/reset-client",
    "POST /api/v1/configs/{config_id}/nodes/{node_id}/control",
    "PUT /api/v1/settings/mqtt",
  ];
  const names = marked.map((r) => `${r.method} ${r.path}`);
  for (const k of known) assert.ok(names.includes(k), `${k} is marked x-mqtt-write`);
  for (const r of marked) assert.notEqual(r.method, "GET", `${r.path}: reads are not write APIs`);
  const before = storedRows(dir);
  const ids: Record<string, string> = { config_id: fixture.configId, node_id: fixture.dynamicId };
  for (const r of marked) {
    const url = r.path.replace(/\{(\w+)\}/g, (_, name: string) => ids[name] ?? `${name.split("_")[0]}-unknown`);
    const isPublic = Array.isArray(doc.paths[r.path][r.method.toLowerCase()].security) && doc.paths[r.path][r.method.toLowerCase()].security.length === 0;
    for (const body of [undefined, {}, { unexpected_field: 1 }]) {
      disabled(await s.req(r.method, url, body, { auth: !isPublic }), `${r.method} ${r.path} body ${JSON.stringify(body)}`);
    }
  }
  // Auth is still checked first on admin routes (an anonymous caller learns nothing).
  const res = await s.req("POST", `/api/v1/configs/${fixture.configId}/nodes/${fixture.dynamicId}/control`, { action: "start" }, { auth: false });
  assert.equal(res.json.error.code, "UNAUTHORIZED");
  await s.close();
  const afterRows = storedRows(dir);
  assert.deepEqual(afterRows, before, "nothing written");
});

test("spec §1.7 bullet 6 (sync stops at the staged state, nothing is pushed): a change is staged; no push, no detect, no broker; with MQTT on again it is pending", async (t) => {
  const dir = copyOfFixture();
  const trap = await tcpTrap();
  t.after(() => trap.close());
  const s = await boot(dir, false, fixture.now, { embeddedBrokerPort: trap.port });
  t.after(() => s.close());
  const { configId, dynamicId, staticId } = fixture;
  const base = `/api/v1/configs/${configId}/nodes/${dynamicId}`;
  // An SSE subscriber would start detects while MQTT is on (spec §6.4 rule 8).
  await s.server.app.listen({ host: "127.0.0.1", port: 0 });
  const address = s.server.app.server.address();
  assert.ok(address !== null && typeof address === "object");
  const token = (await s.server.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: ADMIN_PASSWORD } })).json().access_token;
  const stream = await openStream(`http://127.0.0.1:${address.port}/api/v1/events/stream`, { authorization: `Bearer ${token}` });
  await opening(stream);

  // The peer's endpoint moves: the dynamic node's staged config changes (spec §3.5).
  const patch = await s.req("PATCH", `/api/v1/configs/${configId}/nodes/${staticId}`, { public_address: "192.0.2.99" });
  assert.equal(patch.status, 200, patch.text);
  const staged = (await s.req("GET", `${base}/config`)).json;
  assert.equal(staged.config_version, fixture.staged.config_version + 1, "staged on the server");
  assert.match(staged.config_text, /192\.0\.2\.99/);
  const node = (await s.req("GET", base)).json;
  assert.deepEqual(node.staged_config, { config_version: staged.config_version, config_sha256: staged.config_sha256 });
  assert.equal(node.client.config_version_state, null, "projected static: no sync state");
  // The SSE refresh of the affected endpoint projects it as static too (bullet 4, spec §6.5).
  const frame = await stream.waitFor((f) => f.event === "mesh.workspace.updated" && f.json.payload.node_id === dynamicId);
  const workspace = frame.json.payload.workspace as { node: { effective_mode: string; client: { config_version_state: unknown } } };
  assert.equal(workspace.node.effective_mode, "static");
  assert.equal(workspace.node.client.config_version_state, null);

  // Past the push debounce, the detect interval and the command timeout: nothing went out.
  s.clock.advance(testSettings().configPushDebounceMs + testSettings().detectIntervalMs + testSettings().commandTimeoutMs);
  stream.destroy();
  assert.equal(controlLogCount(s), 1, "no push was logged");
  assert.equal(s.server.commands.published, 0, "nothing was published");
  assert.equal(s.server.commands.openCount, 0, "no command (push or detect) is open");
  assert.equal(s.server.mqtt.broker, null, "no broker");
  assert.equal(trap.connections(), 0, "no connection to the broker port");
  const confirmed = sqliteOf(s.server.store).prepare("SELECT confirmed_config_version AS v, confirmed_config_sha256 AS sha FROM nodes WHERE node_id = ?").get(dynamicId);
  assert.deepEqual(confirmed, { v: fixture.staged.config_version, sha: fixture.staged.config_sha256 }, "confirmed stays where the agent left it");
  await s.close();
  await trap.close();

  // With MQTT on again the staged config is pending: sync resumes from the staged state.
  const on = await boot(dir, true, fixture.now + MINUTE);
  t.after(() => on.close());
  const st = (await on.req("GET", `${base}/endpoint-status`)).json;
  assert.equal(st.config_version_state, "pending");
  assert.equal(st.staged_config.config_version, fixture.staged.config_version + 1);
  assert.equal(st.confirmed_config.config_version, fixture.staged.config_version);
});

test("spec §1.7 bullet 7 (the console keeps its MQTT layout with controls disabled): everything the console reads says MQTT is disabled", async (t) => {
  // The console pages arrive with the console issue; this proves what they will read.
  const dir = copyOfFixture();
  const s = await boot(dir, false, fixture.now);
  t.after(() => s.close());
  const disabledMqtt = { enabled: false, broker: "disabled", connected: false };
  assert.deepEqual((await s.req("GET", "/api/v1/system/status")).json.services.mqtt, disabledMqtt, "system status");
  const settings = (await s.req("GET", "/api/v1/settings/mqtt")).json;
  assert.equal(settings.mqtt_enabled, false, "MQTT settings page");
  assert.equal(settings.broker_connected, false);
  const st = (await s.req("GET", `/api/v1/configs/${fixture.configId}/nodes/${fixture.dynamicId}/endpoint-status`)).json;
  assert.equal(st.mqtt_enabled, false, "the control page's status source");
  // The SSE stream opens with the same system status (spec §6.5 rule 1).
  await s.server.app.listen({ host: "127.0.0.1", port: 0 });
  const address = s.server.app.server.address();
  assert.ok(address !== null && typeof address === "object");
  const token = (await s.server.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: ADMIN_PASSWORD } })).json().access_token;
  const stream = await openStream(`http://127.0.0.1:${address.port}/api/v1/events/stream`, { authorization: `Bearer ${token}` });
  t.after(() => stream.destroy());
  const [status] = await opening(stream);
  assert.deepEqual((status.json.payload as any).services.mqtt, disabledMqtt, "system.status.updated");
});

test("spec §1.7 bullet 8 (the backend does not depend on the broker to start): no listener, no connection, for every broker kind", async (t) => {
  // A closed port: nothing may listen on the configured broker port after start.
  const closedPort = await freePort();
  const plain = await boot(tempDir("svc-switch-empty-"), false, fixture.now, { embeddedBrokerPort: closedPort });
  t.after(() => plain.close());
  assert.equal(plain.server.mqtt.broker, null);
  assert.equal(await refused(closedPort), true, "nothing listens on the embedded broker port");
  assert.equal((await plain.req("GET", "/api/v1/health")).status, 200);
  assert.deepEqual((await plain.req("GET", "/api/v1/system/status")).json.services.mqtt, { enabled: false, broker: "disabled", connected: false });
  const metrics = (await plain.req("GET", "/metrics")).text;
  assert.equal(sampleValue(metrics, "svc_mqtt_enabled"), 0);
  assert.equal(sampleValue(metrics, "svc_mqtt_broker_connected"), 0);

  // A trap where each broker kind would connect (its MQTT URL, its management API): untouched.
  const trap = await tcpTrap();
  const api = await httpTrap();
  t.after(async () => {
    await trap.close();
    await api.close();
  });
  const kinds: Array<Partial<Settings>> = [
    { mqttBroker: "embedded", embeddedBrokerPort: trap.port },
    { mqttBroker: "emqx", mqttUrl: `mqtt://127.0.0.1:${trap.port}`, emqxApiUrl: api.url, emqxApiKey: "key", emqxApiSecret: "secret-secret-secret" },
    { mqttBroker: "mosquitto", mqttUrl: `mqtt://127.0.0.1:${trap.port}`, mosquittoAdminPassword: "admin-password-123" },
  ] as Array<Partial<Settings>>;
  for (const kind of kinds) {
    const s = await boot(tempDir("svc-switch-kind-"), false, fixture.now, kind);
    t.after(() => s.close());
    assert.equal(s.server.mqtt.broker, null, `${kind.mqttBroker}: no embedded broker`);
    assert.equal((await s.req("GET", "/api/v1/configs")).status, 200, `${kind.mqttBroker}: REST serves`);
    s.clock.advance(10 * MINUTE);
    await s.close();
  }
  assert.equal(trap.connections(), 0, "no MQTT connection was attempted");
  assert.equal(api.requests(), 0, "no broker management call was made");
});

// ---- small real servers ---------------------------------------------------------------------

async function freePort(): Promise<number> {
  const srv = createTcpServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** True when a TCP connection to 127.0.0.1:port is refused. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code === "ECONNREFUSED"));
  });
}

/** A TCP listener that counts connections and closes them. */
async function tcpTrap(): Promise<{ port: number; connections(): number; close(): Promise<void> }> {
  let count = 0;
  const srv: TcpServer = createTcpServer((socket) => {
    count++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  let closing: Promise<void> | undefined;
  return {
    port: (srv.address() as { port: number }).port,
    connections: () => count,
    close: () => (closing ??= new Promise<void>((resolve) => srv.close(() => resolve()))),
  };
}

/** An HTTP server that counts requests and answers 503. */
async function httpTrap(): Promise<{ url: string; requests(): number; close(): Promise<void> }> {
  let count = 0;
  const srv = createHttpServer((_req, res) => {
    count++;
    res.writeHead(503).end();
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`,
    requests: () => count,
    close: () => new Promise<void>((resolve) => srv.close(() => resolve())),
  };
}
