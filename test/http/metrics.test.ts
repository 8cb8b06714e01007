import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { test } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { api, bind, connectAgent, dynamicNode, envelope, eventually, nextMessage } from "../control/agent-harness.js";
import { startSseServer, subscribers, type SseServer } from "../events/sse-harness.js";
import { familyType, sampleValue } from "../helpers/prometheus.js";
import { ADMIN_PASSWORD, assertError, startHarness } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * `GET /api/v1/metrics` and its root alias `GET /metrics`: Prometheus text format from the service's own prom-client
 * registry, values read from live state at scrape time. Driven through real HTTP, a real aedes
 * broker and an MQTT.js agent.
 */

async function scrape(s: SseServer, path = "/api/v1/metrics"): Promise<string> {
  const res = await fetch(`${s.baseUrl}${path}`, { headers: { authorization: `Bearer ${s.token}` } });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return text;
}

const node = (mode: string, presence: string, runtime: string) => ({
  effective_mode: mode,
  client_presence_state: presence,
  runtime_state: runtime,
});

/** Commands whose publish the broker took: every non-detect command is logged (spec §2.8). */
function publishedCommands(s: SseServer): number {
  const row = sqliteOf(s.server.store)
    .prepare("SELECT count(*) AS n FROM control_logs WHERE kind = 'command' AND message NOT LIKE 'publish to the broker failed%'")
    .get() as { n: number };
  return row.n;
}

test("GET /api/v1/metrics: every family with its labels, values following real nodes, commands, MQTT messages, drops and SSE", async (t) => {
  const s = await startSseServer(t);
  let text = await scrape(s);
  assert.equal(familyType(await scrape(s, "/metrics"), "svc_nodes"), "gauge", "the root alias serves the same registry");
  for (const [name, type] of [
    ["svc_nodes", "gauge"],
    ["svc_commands_total", "counter"],
    ["svc_mqtt_messages_total", "counter"],
    ["svc_mqtt_envelopes_dropped_total", "counter"],
    ["svc_sse_subscribers", "gauge"],
    ["svc_mqtt_broker_connected", "gauge"],
    ["svc_mqtt_enabled", "gauge"],
    ["process_cpu_user_seconds_total", "counter"],
  ] as const) {
    assert.equal(familyType(text, name), type, `${name} is a ${type}`);
  }
  assert.equal(sampleValue(text, "svc_mqtt_enabled"), 1);
  assert.equal(sampleValue(text, "svc_mqtt_broker_connected"), 1, "spec §1.8: the backend is connected to the broker");
  assert.equal(sampleValue(text, "svc_nodes", node("dynamic", "offline", "unknown")), 0, "empty series are present at 0");
  assert.equal(sampleValue(text, "svc_mqtt_messages_total", { direction: "in" }), 0);
  assert.equal(sampleValue(text, "svc_mqtt_messages_total", { direction: "out" }), 0);
  assert.equal(sampleValue(text, "svc_sse_subscribers"), 0);

  // Nodes: a dynamic node never bound is offline/unknown (spec §3.1, §3.3); a static one counts as static.
  const { configId, nodeId } = await dynamicNode(s);
  assert.equal((await api(s, "POST", `/api/v1/configs/${configId}/nodes`, { name: "plain", mode: "static" })).status, 201);
  text = await scrape(s);
  assert.equal(sampleValue(text, "svc_nodes", node("dynamic", "offline", "unknown")), 1);
  assert.equal(sampleValue(text, "svc_nodes", node("static", "offline", "unknown")), 1);

  // An agent binds, connects and heartbeats with its tunnel up: online and running.
  const p = await bind(s, configId, nodeId);
  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  text = await eventually("online in metrics", async () => {
    const now = await scrape(s);
    return sampleValue(now, "svc_nodes", node("dynamic", "online", "running")) === 1 ? now : undefined;
  });
  assert.equal(sampleValue(text, "svc_nodes", node("dynamic", "offline", "unknown")), 0);
  assert.equal(sampleValue(text, "svc_mqtt_messages_total", { direction: "in" }), 1, "the heartbeat");

  // A command closed by its ACK: applied (spec §3.4), and one message out per published command.
  const controlMsg = nextMessage(agent, p.topics.info!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "wg_show" });
  assert.equal(sent.status, 202);
  const msg = await controlMsg;
  await agent.publishAsync(p.topics.info_ack!, envelope(p, "ack", { status: "applied", message: "", action: "wg_show" }, msg.request_id), { qos: 1 });
  text = await eventually("applied counted", async () => {
    const now = await scrape(s);
    return sampleValue(now, "svc_commands_total", { action: "wg_show", status: "applied" }) === 1 ? now : undefined;
  });
  assert.equal(sampleValue(text, "svc_mqtt_messages_total", { direction: "in" }), 2, "heartbeat and ACK");
  assert.equal(sampleValue(text, "svc_mqtt_messages_total", { direction: "out" }), publishedCommands(s));

  // A command without an ACK: timed_out once the command timeout passes on the injected clock.
  const stopMsg = nextMessage(agent, p.topics.control!);
  assert.equal((await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" })).status, 202);
  await stopMsg;
  s.clock.advance(testSettings().commandTimeoutMs);
  text = await scrape(s);
  assert.equal(sampleValue(text, "svc_commands_total", { action: "stop", status: "timed_out" }), 1);
  assert.equal(sampleValue(text, "svc_commands_total", { action: "wg_show", status: "applied" }), 1);
  // The clock also fired the automatic push of the node's pending config (spec §3.5); its
  // PUBACK arrives over the socket.
  text = await eventually("every publish counted", async () => {
    const now = await scrape(s);
    return sampleValue(now, "svc_mqtt_messages_total", { direction: "out" }) === publishedCommands(s) ? now : undefined;
  });
  assert.ok(publishedCommands(s) >= 3, "start, stop and the automatic push");

  // A malformed envelope is dropped by reason (and still counted as received).
  const inBefore = sampleValue(text, "svc_mqtt_messages_total", { direction: "in" })!;
  await agent.publishAsync(p.topics.heartbeat!, "{not json", { qos: 1 });
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: "yes" }), { qos: 1 });
  text = await eventually("drops counted", async () => {
    const now = await scrape(s);
    return sampleValue(now, "svc_mqtt_envelopes_dropped_total", { reason: "bad_payload" }) === 1 ? now : undefined;
  });
  assert.equal(sampleValue(text, "svc_mqtt_envelopes_dropped_total", { reason: "bad_json" }), 1);
  assert.equal(sampleValue(text, "svc_mqtt_messages_total", { direction: "in" }), inBefore + 2);

  // SSE subscribers (spec §6.5).
  const stream = await s.open();
  await subscribers(s.hub, 1);
  assert.equal(sampleValue(await scrape(s), "svc_sse_subscribers"), 1);
  stream.destroy();
  await subscribers(s.hub, 0);
  assert.equal(sampleValue(await scrape(s), "svc_sse_subscribers"), 0);

  // The agent drops: its will makes it offline (spec §6.4 rule 6), still bound.
  agent.stream.destroy();
  await eventually("offline in metrics", async () => {
    const now = await scrape(s);
    return sampleValue(now, "svc_nodes", node("dynamic", "offline", "unknown")) === 1 ? true : undefined;
  });
});

test("svc_mqtt_broker_connected falls to 0 when the broker goes away (spec §1.8)", async (t) => {
  const s = await startSseServer(t);
  assert.equal(sampleValue(await scrape(s), "svc_mqtt_broker_connected"), 1);
  await s.server.mqtt.broker!.close();
  await eventually("disconnected in metrics", async () =>
    sampleValue(await scrape(s), "svc_mqtt_broker_connected") === 0 ? true : undefined,
  );
});

test("GET /api/v1/metrics and /metrics accept SVC_METRICS_TOKEN or an admin session and nothing else; the token is never logged", async (t) => {
  const metricsToken = "scrape-token-0123456789abcdef";
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString("utf8"));
      done();
    },
  });
  const dataDir = mkdtempSync(join(tmpdir(), "svc-metrics-"));
  const server = await createServer(
    testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, metricsToken }),
    createLogger("trace", sink),
    { clock: new ManualClock() },
  );
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const get = (authorization?: string, url = "/api/v1/metrics") =>
    server.app.inject({ method: "GET", url, headers: authorization === undefined ? {} : { authorization } });

  const ok = await get(`Bearer ${metricsToken}`);
  assert.equal(ok.statusCode, 200);
  assert.match(ok.body, /^# HELP svc_nodes /m);
  const alias = await get(`Bearer ${metricsToken}`, "/metrics");
  assert.equal(alias.statusCode, 200, "the root alias takes the scrape token too");
  assert.match(alias.body, /^# HELP svc_nodes /m);
  const login = await server.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: ADMIN_PASSWORD } });
  assert.equal((await get(`Bearer ${login.json().access_token}`)).statusCode, 200, "an admin session works too");

  for (const [authorization, why] of [
    [undefined, "no header"],
    [`Bearer ${metricsToken}x`, "longer token"],
    [`Bearer ${metricsToken.slice(0, -1)}`, "shorter token"],
    [`Bearer ${"A".repeat(43)}`, "unknown token"],
    [`Basic ${Buffer.from(`x:${metricsToken}`).toString("base64")}`, "another scheme"],
  ] as const) {
    for (const url of ["/api/v1/metrics", "/metrics"]) {
      const res = await get(authorization, url);
      assert.equal(res.statusCode, 401, `${url}: ${why}`);
      assert.equal(res.json().error.code, "UNAUTHORIZED", `${url}: ${why}`);
    }
  }
  assert.ok(lines.length > 0, "the service logged at trace level");
  assert.ok(!lines.join("").includes(metricsToken.slice(0, 16)), "the metrics token is never logged");
});

test("spec §9 rule 1: GET /api/v1/metrics is in the OpenAPI document behind the bearer scheme; the root alias /metrics answers the same and is not documented; without SVC_METRICS_TOKEN only admin sessions pass", async (t) => {
  const h = await startHarness(t);
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  const op = doc.paths["/api/v1/metrics"]?.get;
  assert.ok(op, "GET /api/v1/metrics is documented");
  assert.ok(!(Array.isArray(op.security) && op.security.length === 0), "not public");
  assert.equal(doc.paths["/metrics"], undefined, "the Prometheus-convention alias is not documented");
  for (const path of ["/api/v1/metrics", "/metrics"]) {
    const ok = await h.req("GET", path);
    assert.equal(ok.status, 200, path);
    assert.match(String(ok.headers["content-type"]), /^text\/plain; version=0\.0\.4/, path);
    assert.match(ok.text, /^# HELP svc_nodes /m, path);
    assertError(await h.req("GET", path, undefined, { auth: "scrape-token-0123456789abcdef" }), "UNAUTHORIZED", path);
    assertError(await h.req("GET", path, undefined, { auth: false }), "UNAUTHORIZED", path);
  }
});
