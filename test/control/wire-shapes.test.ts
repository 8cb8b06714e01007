import assert from "node:assert/strict";
import { test } from "node:test";
import type { MqttClient } from "mqtt";
import {
  configPushPayloadSchema,
  controlPayloadSchema,
  detectPayloadSchema,
  envelopeSchema,
  infoPayloadSchema,
} from "../../src/protocol/envelope.schema.js";
import type { DropReason } from "../../src/mqtt/router.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { api, boundAgent, envelope, eventually, status, type Profile } from "./agent-harness.js";

/**
 * The wire shapes of spec §6.2 (envelope) and §6.3 (payloads) as they cross the real embedded
 * broker: what the backend publishes downstream, and which upstream envelopes it refuses.
 */

/** UTC ISO 8601 with milliseconds and `Z`, as `Date.prototype.toISOString` writes it. */
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** The next message on `topic`, whole (the harness's nextMessage keeps only two fields). */
function nextEnvelope(client: MqttClient, topic: string): Promise<Record<string, any>> {
  return new Promise((resolve) => {
    const onMessage = (t: string, buf: Buffer) => {
      if (t !== topic) return;
      client.off("message", onMessage);
      resolve(JSON.parse(buf.toString()) as Record<string, any>);
    };
    client.on("message", onMessage);
  });
}

/** The envelope fields every downstream message shares (spec §6.2), checked against the topic it came on. */
function assertDownstreamEnvelope(s: SseServer, env: Record<string, any>, p: Profile, type: string, sentAt: number): void {
  assert.deepEqual(Object.keys(env).sort(), ["boot_id", "config_id", "node_id", "payload", "request_id", "sent_at", "session_id", "type"]);
  assert.equal(env.type, type, "spec §6.2 type");
  assert.match(env.request_id, /^[0-9a-f-]{36}$/, "spec §6.2 request_id: a command carries one");
  assert.equal(env.config_id, p.profile.config_id, "spec §6.2 config_id: the topic's config");
  assert.equal(env.node_id, p.profile.node_id, "spec §6.2 node_id: the topic's node");
  assert.match(env.sent_at, ISO_UTC, "spec §6.2 sent_at: UTC, ISO 8601");
  assert.equal(env.sent_at, new Date(sentAt).toISOString(), "sent_at is the injected clock's time of sending");
  assert.equal(env.boot_id, "", "the backend is no agent process: no boot_id");
  assert.equal(env.session_id, "");
  assert.ok(envelopeSchema.safeParse(env).success, "the agent's own envelope schema accepts it");
  void s;
}

test("spec §6.2, §6.3, §2.6 note: control, config push, detect and info envelopes carry type, request_id, the topic's ids, sent_at in UTC ISO 8601 and the current tunnel_protocol", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const base = `/api/v1/configs/${configId}/nodes/${nodeId}`;
  s.clock.advance(1234);

  // control
  let next = nextEnvelope(agent, p.topics.control!);
  let sent = await api(s, "POST", `${base}/control`, { action: "stop" });
  let env = await next;
  assertDownstreamEnvelope(s, env, p, "control", s.clock.now());
  assert.equal(env.request_id, sent.json.request_id, "the request_id the REST answer and the control log show");
  assert.deepEqual(env.payload, { action: "stop", tunnel_protocol: "wireguard", interface_name: "svc0" });
  assert.ok(controlPayloadSchema.safeParse(env.payload).success);

  // config push (spec §6.3 push action)
  next = nextEnvelope(agent, p.topics.config_push!);
  sent = await api(s, "POST", `${base}/control`, { action: "push_config" });
  env = await next;
  assertDownstreamEnvelope(s, env, p, "config_push", s.clock.now());
  assert.equal(env.request_id, sent.json.request_id);
  assert.equal(env.payload.action, "push_config", "spec §6.3 config push payload action");
  assert.equal(env.payload.tunnel_protocol, "wireguard");
  assert.equal(env.payload.interface_name, "svc0");
  assert.deepEqual(Object.keys(env.payload).sort(), ["action", "config_sha256", "config_text", "config_version", "interface_name", "previous_tunnel_protocol", "tunnel_protocol"]);
  assert.ok(configPushPayloadSchema.safeParse(env.payload).success);

  // A hitless config's push names its mode (an extension an agent may ignore); nothing else changes.
  assert.equal((await api(s, "PATCH", `/api/v1/configs/${configId}`, { apply_mode: "hitless" })).status, 200);
  const restartPayload = env.payload;
  next = nextEnvelope(agent, p.topics.config_push!);
  await api(s, "POST", `${base}/control`, { action: "push_config" });
  env = await next;
  assert.deepEqual(env.payload, { ...restartPayload, apply_mode: "hitless" });
  assert.equal(configPushPayloadSchema.parse(env.payload).apply_mode, "hitless");
  assert.equal((await api(s, "PATCH", `/api/v1/configs/${configId}`, { apply_mode: "restart" })).status, 200);

  // info
  next = nextEnvelope(agent, p.topics.info!);
  sent = await api(s, "POST", `${base}/control`, { action: "wg_show" });
  env = await next;
  assertDownstreamEnvelope(s, env, p, "info", s.clock.now());
  assert.equal(env.request_id, sent.json.request_id);
  assert.deepEqual(env.payload, { action: "wg_show", tunnel_protocol: "wireguard", interface_name: "svc0" });
  assert.ok(infoPayloadSchema.safeParse(env.payload).success);

  // detect (sent by the scheduler once a console subscribes, spec §6.4 rule 8)
  next = nextEnvelope(agent, p.topics.detect!);
  const sse = await s.open();
  t.after(() => sse.destroy());
  env = await next;
  assertDownstreamEnvelope(s, env, p, "detect", s.clock.now());
  assert.deepEqual(env.payload, { tunnel_protocol: "wireguard", interface_name: "svc0" }, "spec §6.3 detect: the payload carries tunnel_protocol");
  assert.ok(detectPayloadSchema.safeParse(env.payload).success);
  await agent.publishAsync(
    p.topics.detect_ack!,
    envelope(p, "ack", { status: "applied", message: "", action: "detect", client_online: true, wg_online: true, platform: "linux", client_version: "1.2.3" }, env.request_id),
    { qos: 1 },
  );

  // spec §2.6 note: the protocol is not in the profile; every message carries the current one.
  assert.equal((await api(s, "PATCH", `/api/v1/configs/${configId}`, { tunnel_protocol: "awg_2" })).status, 200);
  next = nextEnvelope(agent, p.topics.info!);
  await api(s, "POST", `${base}/control`, { action: "wg_show" });
  assert.equal((await next).payload.tunnel_protocol, "awg_2", "info after the protocol change");
  next = nextEnvelope(agent, p.topics.control!);
  await api(s, "POST", `${base}/control`, { action: "stop" });
  assert.equal((await next).payload.tunnel_protocol, "awg_2", "control after the protocol change");
  next = nextEnvelope(agent, p.topics.detect!);
  s.clock.advance(2 * 60_000 + 12_001);
  assert.equal((await next).payload.tunnel_protocol, "awg_2", "detect after the protocol change");
});

test("spec §6.2: an upstream envelope whose config_id differs from its topic's, or whose sent_at is not ISO 8601, is dropped and changes nothing", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const other = await boundAgent(s, t);
  const router = s.server.router;
  const drops = (reason: DropReason) => router.dropped.get(reason) ?? 0;
  const hb = { client_online: true, wg_online: true };
  const raw = (fields: Record<string, unknown>) =>
    JSON.stringify({ ...JSON.parse(envelope(p, "heartbeat", hb)), ...fields });

  // Another real config's id (the envelope of the other node's config) on this node's topic.
  await agent.publishAsync(p.topics.heartbeat!, raw({ config_id: other.configId }), { qos: 1 });
  await eventually("id_mismatch", () => (drops("id_mismatch") === 1 ? true : undefined));
  for (const sentAt of ["25/11/2026 07:00", "2026-11-25 07:00:00", "yesterday", 1764054000000, "2026-11-25", ""]) {
    const before = drops("bad_envelope");
    await agent.publishAsync(p.topics.heartbeat!, raw({ sent_at: sentAt }), { qos: 1 });
    await eventually(`sent_at ${JSON.stringify(sentAt)} refused`, () => (drops("bad_envelope") === before + 1 ? true : undefined));
  }
  const stBefore = await status(s, configId, nodeId);
  assert.equal(stBefore.client_presence_state, "offline", "no dropped heartbeat counted as a signal");
  assert.equal((await status(s, other.configId, other.nodeId)).client_presence_state, "offline", "nor reached the other config's node");
  // The same heartbeat, well formed, is taken: the drops above were for the fields alone.
  await agent.publishAsync(p.topics.heartbeat!, raw({}), { qos: 1 });
  await eventually("online", async () => ((await status(s, configId, nodeId)).client_presence_state === "online" ? true : undefined));
});

test("spec §6.3: detect ACK client_online/platform/message, event level and common ACK action are typed; a wrong type drops the message and leaves the command open", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const router = s.server.router;
  const bad = () => router.dropped.get("bad_payload") ?? 0;
  const detected = new Promise<Record<string, any>>((resolve) => {
    agent.on("message", (topic, buf) => {
      if (topic === p.topics.detect) resolve(JSON.parse(buf.toString()));
    });
  });
  const sse = await s.open();
  t.after(() => sse.destroy());
  const detect = await detected;
  const good = { status: "applied", message: "", action: "detect", client_online: true, wg_online: false, platform: "windows", client_version: "9.9.9" };
  let n = 0;
  for (const wrong of [
    { client_online: "true" },
    { client_online: undefined },
    { platform: 7 },
    { platform: undefined },
    { message: ["x"] },
    { action: { name: "detect" } },
    { status: "done" },
  ]) {
    await agent.publishAsync(p.topics.detect_ack!, envelope(p, "ack", { ...good, ...wrong }, detect.request_id), { qos: 1 });
    n++;
    await eventually(`detect ACK ${JSON.stringify(wrong)} dropped`, () => (bad() === n ? true : undefined));
  }
  assert.equal((await status(s, configId, nodeId)).client_version, "1.2.3", "no dropped detect ACK was taken");
  // A well-typed one (message and action may be absent: they default to "") closes the detect.
  const { message: _m, action: _a, ...minimal } = good;
  await agent.publishAsync(p.topics.detect_ack!, envelope(p, "ack", minimal, detect.request_id), { qos: 1 });
  const st = await eventually("detect ACK taken", async () => {
    const x = await status(s, configId, nodeId);
    return x.client_version === "9.9.9" ? x : undefined;
  });
  assert.equal(st.runtime_state, "stopped");

  // event level: a string; an error event is stored with its message.
  for (const wrong of [{ level: 3 }, { level: undefined }]) {
    await agent.publishAsync(p.topics.event!, envelope(p, "event", { event: "privilege_error", message: "no root", ...wrong }), { qos: 1 });
    n++;
    await eventually(`event ${JSON.stringify(wrong)} dropped`, () => (bad() === n ? true : undefined));
  }
  const logsBefore = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs.length;
  assert.equal(logsBefore, 0, "the dropped events stored nothing");
  await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "error", event: "privilege_error", message: "the agent lacks privileges" }), { qos: 1 });
  const stored = await sse.waitFor((f) => f.event === "control.log.created");
  const log = stored.json.payload.log as { kind: string; message: string };
  assert.equal(log.kind, "event");
  assert.equal(log.message, "the agent lacks privileges");

  // Common ACK action: a non-string action drops the ACK; the command stays open until a good one.
  const control = new Promise<Record<string, any>>((resolve) => {
    agent.on("message", (topic, buf) => {
      if (topic === p.topics.control) resolve(JSON.parse(buf.toString()));
    });
  });
  await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
  const c = await control;
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "", action: 5 }, c.request_id), { qos: 1 });
  n++;
  await eventually("ACK with a bad action dropped", () => (bad() === n ? true : undefined));
  const logs = async () => (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs as Array<{ kind: string; status: string }>;
  assert.equal((await logs()).find((l) => l.kind === "command")?.status, "pending");
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "stopped", action: "stop" }, c.request_id), { qos: 1 });
  await eventually("closed", async () => ((await logs()).find((l) => l.kind === "command")?.status === "applied" ? true : undefined));
});
