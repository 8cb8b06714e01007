import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { startSseServer } from "../events/sse-harness.js";
import { api, bind, boundAgent, connectAgent, dynamicNode, envelope, eventually, nextMessage, probesDelivered, status } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

const MINUTE = 60_000;

test("spec §3.1: node changed from dynamic to static → offline, client kicked, credentials and bind tokens gone", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true, endAfter: false });
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  const closed = new Promise<void>((resolve) => agent.once("close", () => resolve()));
  const patched = await api(s, "PATCH", `/api/v1/configs/${configId}/nodes/${nodeId}`, { mode: "static" });
  assert.equal(patched.status, 200);
  await closed;
  const st = await status(s, configId, nodeId);
  assert.equal(st.effective_mode, "static");
  assert.equal(st.client_initialized, false);
  assert.equal(st.client_presence_state, "offline");
  assert.equal(st.runtime_state, "unknown");
  const row = sqliteOf(s.server.store).prepare("SELECT mqtt_username, mqtt_password_hash FROM node_client_state WHERE node_id = ?").get(nodeId);
  assert.deepEqual(row, { mqtt_username: null, mqtt_password_hash: null });
  // spec §3.6: making the node static invalidated the outstanding bind token.
  await api(s, "PATCH", `/api/v1/configs/${configId}/nodes/${nodeId}`, { mode: "dynamic" });
  const redeem = await api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1", platform: "linux", hostname: "h" }, false);
  assert.equal(redeem.json.error.code, "INVALID_BIND_TOKEN");
  await assert.rejects(connectAgent(s, p));
});

test("spec §3.6: a bind token expires after 5 minutes (injected clock) and a regenerated one replaces it", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const first = /--token (\S+)$/.exec((await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`)).json.command)?.[1];
  const second = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  assert.equal(second.json.expires_at, new Date(s.clock.now() + 5 * MINUTE).toISOString());
  const body = (token: string | undefined) => ({ bind_token: token, server_url: s.baseUrl, client_version: "1", platform: "linux", hostname: "h" });
  assert.equal((await api(s, "POST", "/api/client/bind", body(first), false)).json.error.code, "INVALID_BIND_TOKEN", "regenerating invalidates");
  s.clock.advance(5 * MINUTE);
  const token = /--token (\S+)$/.exec(second.json.command)?.[1];
  assert.equal((await api(s, "POST", "/api/client/bind", body(token), false)).json.error.code, "INVALID_BIND_TOKEN", "expired");
  assert.equal((await status(s, configId, nodeId)).client_initialized, false);
});

test("spec §6.4 rule 8: detect is sent only while SSE subscribers exist; a detect ACK refreshes client_version; a timeout drops the node", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const detects: Array<{ request_id: string }> = [];
  agent.on("message", (topic, buf) => {
    if (topic === p.topics.detect) detects.push(JSON.parse(buf.toString()));
  });
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("online", async () => ((await status(s, configId, nodeId)).client_presence_state === "online" ? true : undefined));
  const rounds = s.server.detect.rounds;
  s.clock.advance(10 * MINUTE);
  assert.equal(s.server.detect.active, false, "no viewers, no probe");
  assert.equal(s.server.detect.rounds, rounds, "no probing round ran (rounds start synchronously on the clock)");
  await probesDelivered(s, { configId, nodeId, p, agent });
  assert.equal(detects.length, 0);

  const sse = await s.open();
  await eventually("first detect", () => (detects.length === 1 ? true : undefined));
  const d1 = detects[0]!;
  await agent.publishAsync(
    p.topics.detect_ack!,
    envelope(p, "ack", { status: "applied", message: "", action: "detect", client_online: true, wg_online: false, platform: "linux", client_version: "2.0.0" }, d1.request_id),
    { qos: 1 },
  );
  const st = await eventually("detect ack", async () => {
    const x = await status(s, configId, nodeId);
    return x.client_version === "2.0.0" ? x : undefined;
  });
  assert.equal(st.runtime_state, "stopped", "the detect ACK's wg_online");

  // The next round comes about 2 minutes later (with jitter); this one goes unanswered.
  s.clock.advance(2 * MINUTE + 12_001);
  await eventually("second detect", () => (detects.length === 2 ? true : undefined));
  s.clock.advance(20_000); // DESIGN §3: detect ACK timeout 20 s
  const dropped = await eventually("dropped", async () => {
    const x = await status(s, configId, nodeId);
    return x.client_presence_state === "dropped" ? x : undefined;
  });
  assert.equal(dropped.runtime_state, "unknown", "spec §3.3: detect timeout → unknown");
  assert.equal(dropped.client_initialized, true, "spec §3.2: the console stays on the control page");

  sse.destroy();
  await eventually("scheduler stops", () => (s.server.detect.active ? undefined : true));
  await probesDelivered(s, { configId, nodeId, p, agent });
  const count = detects.length;
  const roundsBefore = s.server.detect.rounds;
  s.clock.advance(10 * MINUTE);
  assert.equal(s.server.detect.rounds, roundsBefore, "no probing round ran");
  await probesDelivered(s, { configId, nodeId, p, agent });
  assert.equal(detects.length, count, "no subscribers, no probes");
});

test("a command without a final ACK ends as timed_out after 60 s (injected clock)", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const msg = nextMessage(agent, p.topics.control!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
  await msg;
  s.clock.advance(59_999);
  assert.equal((await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs[0].status, "pending");
  s.clock.advance(1);
  const log = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs[0];
  assert.equal(log.request_id, sent.json.request_id);
  assert.equal(log.status, "timed_out");
  // A late ACK changes no command (nor the runtime state), but as an ACK from the node it still
  // proves reachability (spec §6.4 rule 3): the never-heard-from node comes online.
  assert.equal((await status(s, configId, nodeId)).client_presence_state, "offline");
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "", action: "stop" }, sent.json.request_id), { qos: 1 });
  const st = await eventually("late ACK handled", async () => {
    const x = await status(s, configId, nodeId);
    return x.client_presence_state === "online" ? x : undefined;
  });
  assert.equal(st.runtime_state, "unknown", "a late stop ACK does not set the runtime");
  assert.notEqual(st.last_reachable_at, null);
  assert.equal((await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs[0].status, "timed_out");
});

test("login and bind are rate-limited per source address (RATE_LIMITED)", async (t) => {
  const s = await startSseServer(t);
  let last = 0;
  for (let i = 0; i < 21; i++) {
    last = (await api(s, "POST", "/api/v1/auth/login", { password: "wrong" }, false)).status;
  }
  assert.equal(last, 429);
  const limited = await api(s, "POST", "/api/v1/auth/login", { password: "wrong" }, false);
  assert.equal(limited.json.error.code, "RATE_LIMITED");
  const bodies = { bind_token: "x".repeat(43), server_url: s.baseUrl, client_version: "1", platform: "linux", hostname: "h" };
  const codes: string[] = [];
  for (let i = 0; i < 21; i++) codes.push((await api(s, "POST", "/api/client/bind", bodies, false)).json.error.code);
  assert.equal(codes[0], "INVALID_BIND_TOKEN");
  assert.equal(codes[20], "RATE_LIMITED");
});

test("spec §1.7: with MQTT services disabled no broker starts and every MQTT write API answers MQTT_DISABLED", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-off-"));
  const server = await createServer(
    testSettings({ dataDir, adminPassword: "mqtt-off-password", mqttEnabled: false }),
    createLogger("silent"),
    { clock: new ManualClock() },
  );
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  assert.equal(server.mqtt.broker, null, "the backend does not depend on a broker to start");
  const login = await server.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: "mqtt-off-password" } });
  const auth = { authorization: `Bearer ${login.json().access_token}` };
  const config = await server.app.inject({ method: "POST", url: "/api/v1/configs", headers: auth, payload: { name: "c", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/24" } });
  const node = await server.app.inject({ method: "POST", url: `/api/v1/configs/${config.json().config_id}/nodes`, headers: auth, payload: { name: "n", mode: "static" } });
  const base = `/api/v1/configs/${config.json().config_id}/nodes/${node.json().node_id}`;
  for (const [url, payload] of [
    [`${base}/bind-command`, undefined],
    [`${base}/reset-client`, undefined],
    [`${base}/control`, { action: "start" }],
    ["/api/client/bind", { bind_token: "x".repeat(43), server_url: "http://x", client_version: "1", platform: "linux", hostname: "h" }],
  ] as const) {
    const res = await server.app.inject({ method: "POST", url, headers: auth, ...(payload ? { payload } : {}) });
    assert.equal(res.statusCode, 409, url);
    assert.equal(res.json().error.code, "MQTT_DISABLED", url);
  }
  const st = await server.app.inject({ method: "GET", url: "/api/v1/system/status", headers: auth });
  assert.deepEqual(st.json().services.mqtt, { enabled: false, broker: "disabled", connected: false });
});

test("restart: a second server over the same database resumes every node, TTL timers re-armed with the time left", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-restart-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const settings = testSettings({ dataDir, adminPassword: "restart-password" });
  const s = await startSseServer(t);
  // The SSE harness owns its own data dir; run the scenario there, then reopen it.
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true, endAfter: false });
  const onlineAt = s.clock.now();
  await agent.endAsync(); // a clean DISCONNECT sends no will: the node stays online until its TTL
  const dbFile = join(sqliteOf(s.server.store).name);
  await s.close();

  const clock = new ManualClock(onlineAt + 30 * MINUTE);
  const again = await createServer({ ...settings, dataDir }, createLogger("silent"), { clock, dbFile });
  t.after(() => again.close());
  assert.equal(again.registry.size, 1);
  assert.deepEqual(
    again.registry.stats(),
    { nodes: 1, liveActors: 0, sweepTracked: 1, sweepNextAt: onlineAt + 45 * MINUTE, coalescedHeartbeats: 0 },
    "restored dormant: no XState actor yet, its TTL deadline under the presence sweep",
  );
  const p1 = again.registry.projection(configId, nodeId);
  assert.equal(p1?.presence, "online");
  assert.equal(p1?.runtime, "running");
  assert.equal(p1?.clientInitialized, true);
  // The online TTL (45 min) counts from the last signal, not from the restart.
  clock.advance(15 * MINUTE - 1);
  assert.equal(again.registry.projection(configId, nodeId)?.presence, "online");
  clock.advance(1);
  assert.equal(again.registry.projection(configId, nodeId)?.presence, "dropped");
  assert.deepEqual(again.registry.stats().liveActors, 1, "the sweep's TTL check woke the actor");
  assert.equal(again.registry.stats().sweepTracked, 0);
  await eventually("dropped persisted", () => {
    const row = sqliteOf(again.store).prepare("SELECT client_presence_state FROM node_client_state WHERE node_id = ?").get(nodeId) as { client_presence_state: string };
    return row.client_presence_state === "dropped" ? true : undefined;
  });
});

test("spec §3.1 TTL across a restart: a heartbeat that changes nothing else writes only last_signal_at, and the restored node's TTL counts from it", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-restart-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const settings = testSettings({ dataDir, adminPassword: "restart-password" });
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true, endAfter: false });
  const row = () =>
    sqliteOf(s.server.store).prepare("SELECT machine_snapshot, last_signal_at FROM node_client_state WHERE node_id = ?").get(nodeId) as {
      machine_snapshot: string;
      last_signal_at: number;
    };
  const before = row();
  s.clock.advance(20 * MINUTE);
  const heartbeatAt = s.clock.now();
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("heartbeat persisted", () => (row().last_signal_at === heartbeatAt ? true : undefined));
  assert.equal(row().machine_snapshot, before.machine_snapshot, "no snapshot rewrite for a heartbeat that changes nothing visible");
  await agent.endAsync(); // clean DISCONNECT: no will
  const dbFile = join(sqliteOf(s.server.store).name);
  await s.close();

  // Restarted 40 min after the heartbeat: the stored snapshot alone would say 60 min since the
  // last signal (dropped at once); the column says 40 (online for 5 more minutes).
  const clock = new ManualClock(heartbeatAt + 40 * MINUTE);
  const again = await createServer({ ...settings, dataDir }, createLogger("silent"), { clock, dbFile });
  t.after(() => again.close());
  assert.equal(again.registry.projection(configId, nodeId)?.presence, "online");
  clock.advance(5 * MINUTE - 1);
  assert.equal(again.registry.projection(configId, nodeId)?.presence, "online");
  clock.advance(1);
  assert.equal(again.registry.projection(configId, nodeId)?.presence, "dropped", "45 min after the heartbeat");
});

test("deleting a dynamic node cuts its agent's live session and its credentials stop working", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bind(s, configId, nodeId);
  const agent = await connectAgent(s, p);
  const closed = new Promise<void>((resolve) => agent.once("close", () => resolve()));
  assert.equal((await api(s, "DELETE", `/api/v1/configs/${configId}/nodes/${nodeId}`)).status, 204);
  await closed;
  assert.equal(s.server.registry.has(configId, nodeId), false);
  await assert.rejects(connectAgent(s, p));
});
