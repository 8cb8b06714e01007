import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test, type TestContext } from "node:test";
import { bumpStagedVersions } from "../../src/store/nodes.repository.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { api, bind, boundAgent, confirmConfig, connectAgent, dynamicNode, envelope, eventually, nextMessage, status } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The control channel end to end inside one process: the real service (embedded aedes on a free
 * port, real SQLite, real HTTP), and MQTT.js clients acting as agents with the bind profile.
 */

test("bind → connect with the profile → heartbeat → online; control start → accepted, applied → running; will → offline (spec §3.1, §4 rule 11, §6.4)", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const before = await status(s, configId, nodeId);
  assert.equal(before.client_initialized, false);
  assert.equal(before.client_presence_state, "offline", "spec §3.1: never bound → offline");

  const p = await bind(s, configId, nodeId);
  assert.equal(p.mqtt.username, `n:${configId}:${nodeId}`);
  assert.equal(p.mqtt.client_id, `svc-${configId}-${nodeId}`);
  assert.equal(p.mqtt.tls, false);
  assert.equal(p.topics.control, `svc/${configId}/${nodeId}/control`);
  const bound = await status(s, configId, nodeId);
  assert.equal(bound.client_initialized, true, "spec §3.2: bind → client_initialized=true");
  assert.equal(bound.client_presence_state, "offline", "spec §3.1: offline until the first signal");
  assert.equal(bound.client_version, "1.2.3");

  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: false }), { qos: 1 });
  const online = await eventually("online", async () => {
    const st = await status(s, configId, nodeId);
    return st.client_presence_state === "online" ? st : undefined;
  });
  assert.equal(online.runtime_state, "stopped", "the heartbeat reported wg_online=false");
  // The host confirms its config first: a start for a host without one waits for a push (spec §3.8).
  await confirmConfig(s, configId, nodeId, p, agent);

  // spec §6.4 rule 2: the log is written before publish; only the ACK with the same request_id closes it.
  const controlMsg = nextMessage(agent, p.topics.control!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "start" });
  assert.equal(sent.status, 202);
  assert.equal(sent.json.log.status, "pending");
  const msg = await controlMsg;
  assert.equal(msg.request_id, sent.json.request_id);
  assert.deepEqual(msg.payload, { action: "start", tunnel_protocol: "wireguard", interface_name: "svc0" });
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "accepted", message: "", action: "start" }, msg.request_id), { qos: 1 });
  await eventually("accepted", async () => {
    const logs = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs;
    return logs[0].status === "accepted" ? true : undefined;
  });
  // An ACK with another request_id changes nothing.
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "", action: "start" }, "not-the-request"), { qos: 1 });
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "started", action: "start" }, msg.request_id), { qos: 1 });
  const running = await eventually("running", async () => {
    const st = await status(s, configId, nodeId);
    return st.runtime_state === "running" ? st : undefined;
  });
  assert.notEqual(running.last_reachable_at, null, "spec §6.4 rule 3: an ACK refreshes last_reachable_at");
  const logs = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs;
  assert.equal(logs.length, 2, "the push, then the start");
  assert.equal(logs[0].status, "applied");
  assert.equal(logs[0].message, "started");

  // A duplicate final ACK is ignored.
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "failed", message: "late", action: "start" }, msg.request_id), { qos: 1 });

  // spec §6.4 rule 6: the will (an abrupt drop) → offline.
  agent.stream.destroy();
  const offline = await eventually("offline", async () => {
    const st = await status(s, configId, nodeId);
    return st.client_presence_state === "offline" ? st : undefined;
  });
  assert.equal(offline.runtime_state, "unknown", "spec §3.3: client offline → unknown");
  assert.equal(offline.client_initialized, true, "spec §3.2: a disconnect leaves the flag");
  const after = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs;
  // (The newest row is the will itself, stored as an event: spec §6.4 rule 9.)
  assert.equal(after.find((l: { kind: string }) => l.kind === "command").status, "applied", "the late failed ACK changed nothing");
});

test("reset-client kicks the live connection and the old password is refused at once (spec §4 rule 12)", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bind(s, configId, nodeId);
  const agent = await connectAgent(s, p);
  const closed = new Promise<void>((resolve) => agent.once("close", () => resolve()));
  const reset = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/reset-client`);
  assert.equal(reset.status, 200);
  assert.equal(reset.json.client_initialized, false);
  assert.equal(reset.json.client_presence_state, "offline");
  await closed;
  await assert.rejects(connectAgent(s, p), (err: Error & { code?: number }) => err.code === 4 || /Bad username or password|Not authorized/i.test(err.message));
});

test("16 concurrent redemptions of one bind token: exactly one succeeds (spec §3.6, §4 rule 11)", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  const results = await Promise.all(
    Array.from({ length: 16 }, () =>
      api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1", platform: "linux", hostname: "h" }, false),
    ),
  );
  assert.equal(results.filter((r) => r.status === 200).length, 1);
  for (const r of results.filter((x) => x.status !== 200)) assert.equal(r.json.error.code, "BIND_TOKEN_USED");
});

test("malformed upstream messages are logged, counted and dropped; the node's state is untouched", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const hb = p.topics.heartbeat!;
  await agent.publishAsync(hb, "{not json", { qos: 1 });
  await agent.publishAsync(hb, JSON.stringify({ type: "heartbeat" }), { qos: 1 });
  await agent.publishAsync(hb, envelope({ ...p, profile: { ...p.profile, node_id: "node-other" } }, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await agent.publishAsync(hb, envelope(p, "heartbeat", { client_online: "yes" }), { qos: 1 });
  const router = s.server.router;
  await eventually("four drops", () => ([...router.dropped.values()].reduce((a, b) => a + b, 0) >= 4 ? true : undefined));
  assert.equal(router.dropped.get("bad_json"), 1);
  assert.equal(router.dropped.get("bad_envelope"), 1);
  assert.equal(router.dropped.get("id_mismatch"), 1);
  assert.equal(router.dropped.get("bad_payload"), 1);
  assert.equal((await status(s, configId, nodeId)).client_presence_state, "offline");
});

/** A bound agent that comes online, and the automatic push its pending config gets after the debounce. */
async function onlineWithFirstPush(s: SseServer, t: TestContext) {
  const bound = await boundAgent(s, t);
  const { configId, nodeId, p, agent } = bound;
  const autoPush = nextMessage(agent, p.topics.config_push!);
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("online", async () => ((await status(s, configId, nodeId)).client_presence_state === "online" ? true : undefined));
  s.clock.advance(2000);
  return { ...bound, push: await autoPush };
}

test("push_config carries the staged config; the applied ACK makes it latest (spec §3.5, §6.3)", async (t) => {
  const s = await startSseServer(t);
  // Coming online with a pending config triggers the automatic push after the debounce.
  const { configId, nodeId, p, agent, push } = await onlineWithFirstPush(s, t);
  const staged = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/config`)).json;
  assert.equal(push.payload.config_sha256, staged.config_sha256);
  assert.equal(push.payload.config_version, staged.config_version);
  assert.equal(push.payload.config_text, staged.config_text);
  assert.equal(push.payload.tunnel_protocol, "wireguard");
  assert.equal(push.payload.previous_tunnel_protocol, "wireguard");
  assert.equal((await status(s, configId, nodeId)).config_version_state, "pending");
  await agent.publishAsync(p.topics.config_push_ack!, envelope(p, "ack", { status: "applied", message: "", action: "push_config" }, push.request_id), { qos: 1 });
  const latest = await eventually("latest", async () => {
    const st = await status(s, configId, nodeId);
    return st.config_version_state === "latest" ? st : undefined;
  });
  assert.equal(latest.confirmed_config.config_sha256, staged.config_sha256);
});

test("spec §3.5, §6.3: a manual push of a node a large write staged lazily (not rendered yet) renders it now: the push carries the new version and a text whose SHA-256 is its sha, and its applied ACK makes the node latest", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent, push: first } = await onlineWithFirstPush(s, t);
  await agent.publishAsync(p.topics.config_push_ack!, envelope(p, "ack", { status: "applied", message: "", action: "push_config" }, first.request_id), { qos: 1 });
  await eventually("latest", async () => ((await status(s, configId, nodeId)).config_version_state === "latest" ? true : undefined));

  // What a large write does before its rendering after commit: an input of the text changes, the
  // version moves, the sha is unknown.
  sqliteOf(s.server.store).prepare("UPDATE nodes SET listen_port = 51999 WHERE node_id = ?").run(nodeId);
  await bumpStagedVersions(s.server.store.db, [nodeId], s.clock.now());
  const manual = nextMessage(agent, p.topics.config_push!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "push_config" });
  assert.equal(sent.status, 202, JSON.stringify(sent.json));
  const push = await manual;
  assert.equal(push.payload.config_version, first.payload.config_version + 1);
  assert.equal(push.payload.config_sha256, createHash("sha256").update(push.payload.config_text).digest("hex"));
  assert.notEqual(push.payload.config_sha256, first.payload.config_sha256);
  assert.match(push.payload.config_text, /ListenPort = 51999/);
  const staged = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/config`)).json;
  assert.equal(staged.config_sha256, push.payload.config_sha256, "the rendering pushed is the one stored");
  await agent.publishAsync(p.topics.config_push_ack!, envelope(p, "ack", { status: "applied", message: "", action: "push_config" }, push.request_id), { qos: 1 });
  const latest = await eventually("latest again", async () => {
    const st = await status(s, configId, nodeId);
    return st.config_version_state === "latest" && st.confirmed_config.config_version === push.payload.config_version ? st : undefined;
  });
  assert.equal(latest.confirmed_config.config_sha256, push.payload.config_sha256);
  // The node's actor learned the rendering before the ACK, so it is latest too (no push again).
  await eventually("the actor latest", async () => (s.server.registry.projection(configId, nodeId)?.sync === "latest" ? true : undefined));
});

test("wg_show goes to the info topic; command output arrives as an event, is stored as a log and reaches SSE as control.log.created (spec §6.5 diagnostics flow)", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  const info = nextMessage(agent, p.topics.info!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "wg_show" });
  assert.equal(sent.status, 202);
  const msg = await info;
  assert.equal(msg.payload.action, "wg_show");
  await agent.publishAsync(
    p.topics.event!,
    envelope(p, "event", { level: "info", event: "command_output", message: "", request_id: msg.request_id, action: "wg_show", stream: "stdout", output: "interface: svc0" }),
    { qos: 1 },
  );
  const frame = await sse.waitFor((f) => f.event === "control.log.created" && (f.json.payload.log as { kind: string }).kind === "output");
  const log = frame.json.payload.log as { output: string; stream: string; request_id: string };
  assert.equal(log.output, "interface: svc0");
  assert.equal(log.stream, "stdout");
  assert.equal(log.request_id, msg.request_id);
  // The ACK only marks completion; it carries no output (spec §6.4 rule 4).
  await agent.publishAsync(p.topics.info_ack!, envelope(p, "ack", { status: "applied", message: "", action: "wg_show" }, msg.request_id), { qos: 1 });
  await sse.waitFor((f) => f.event === "control.log.updated" && (f.json.payload.log as { status: string }).status === "applied");
});

test("endpoint.status.updated reaches an SSE subscriber only after the state is committed (spec §6.5 rule 6)", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  const frame = await sse.waitFor((f) => f.event === "endpoint.status.updated" && (f.json.payload.status as { client_presence_state: string }).client_presence_state === "online");
  // The frame left the server: the row must already say so.
  const row = sqliteOf(s.server.store).prepare("SELECT client_presence_state, runtime_state FROM node_client_state WHERE node_id = ?").get(nodeId);
  assert.deepEqual(row, { client_presence_state: "online", runtime_state: "running" });
  assert.equal(frame.json.payload.node_id, nodeId);
});
