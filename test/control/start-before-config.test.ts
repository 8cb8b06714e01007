import assert from "node:assert/strict";
import { test } from "node:test";
import type { MqttClient } from "mqtt";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { api, bind, boundAgent, connectAgent, dynamicNode, envelope, eventually, type Profile } from "./agent-harness.js";

/**
 * A start for a node whose host has not confirmed the staged config (spec §3.5) goes out only
 * after a config push's `applied` ACK (spec §3.8 writes the file the start needs), as one
 * operation in the control log (spec §2.8); each command keeps its own request_id and is closed
 * only by its own ACK (spec §6.4 rule 2). The ManualClock never moves past the automatic push's
 * debounce here, so every push seen is the start's own.
 */

interface Downstream {
  topic: string;
  request_id: string;
  payload: Record<string, unknown>;
}

/** Every downstream message the agent receives, in order. */
function record(agent: MqttClient): Downstream[] {
  const seen: Downstream[] = [];
  agent.on("message", (topic, buf) => {
    const env = JSON.parse(buf.toString()) as { request_id: string; payload: Record<string, unknown> };
    seen.push({ topic, request_id: env.request_id, payload: env.payload });
  });
  return seen;
}

const controlPath = (configId: string, nodeId: string) => `/api/v1/configs/${configId}/nodes/${nodeId}/control`;

async function commandRows(s: SseServer, configId: string, nodeId: string) {
  const logs = (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs as Array<{
    log_id: number;
    kind: string;
    action: string;
    request_id: string;
    status: string;
    message: string;
  }>;
  return logs.filter((l) => l.kind === "command").sort((a, b) => a.log_id - b.log_id);
}

async function ack(agent: MqttClient, p: Profile, topic: "config_push_ack" | "control_ack", requestId: string, status: string, action: string, message = "") {
  await agent.publishAsync(p.topics[topic]!, envelope(p, "ack", { status, message, action }, requestId), { qos: 1 });
}

test("spec §3.5/§3.8: a start for a node that never confirmed a config sends the push first and the start only after its applied ACK", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const seen = record(agent);

  const sent = await api(s, "POST", controlPath(configId, nodeId), { action: "start" });
  assert.equal(sent.status, 202, "spec §4: the control endpoint answers at once");
  assert.equal(sent.json.log.action, "start");
  assert.equal(sent.json.log.status, "pending");
  assert.match(sent.json.log.message, /^waiting for the first config: sent when config push \S+ is applied$/);

  const push = await eventually("the config push", () => seen.find((m) => m.topic === p.topics.config_push));
  assert.equal(push.payload.action, "push_config");
  assert.ok(!seen.some((m) => m.topic === p.topics.control), "no start before the push is applied");
  assert.ok(sent.json.log.message.includes(push.request_id), "the start's row names the push it waits for");

  await ack(agent, p, "config_push_ack", push.request_id, "accepted", "push_config");
  await eventually("push accepted", async () => ((await commandRows(s, configId, nodeId))[0]?.status === "accepted" ? true : undefined));
  assert.ok(!seen.some((m) => m.topic === p.topics.control), "an accepted push does not release the start");

  await ack(agent, p, "config_push_ack", push.request_id, "applied", "push_config");
  const start = await eventually("the start", () => seen.find((m) => m.topic === p.topics.control));
  assert.equal(start.request_id, sent.json.request_id, "the start goes out under the request_id the endpoint answered");
  assert.deepEqual(start.payload, { action: "start", tunnel_protocol: "wireguard", interface_name: "svc0" });
  assert.deepEqual(
    seen.map((m) => m.topic),
    [p.topics.config_push, p.topics.control],
  );
  await ack(agent, p, "control_ack", start.request_id, "applied", "start", "started");

  const rows = await eventually("both closed", async () => {
    const r = await commandRows(s, configId, nodeId);
    return r.length === 2 && r[1]?.status === "applied" ? r : undefined;
  });
  assert.deepEqual(
    rows.map((r) => [r.action, r.status, r.request_id]),
    [
      ["push_config", "applied", push.request_id],
      ["start", "applied", sent.json.request_id],
    ],
    "spec §2.8: one operation in the control log, the push before the start",
  );

  // Once the host confirmed the staged config, a start goes straight out.
  await eventually("latest", async () => ((await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/endpoint-status`)).json.config_version_state === "latest" ? true : undefined));
  const again = await api(s, "POST", controlPath(configId, nodeId), { action: "start" });
  assert.equal(again.json.log.message, "");
  await eventually("the second start", () => seen.find((m) => m.request_id === again.json.request_id));
  assert.equal(seen.length, 3, "no second push");
});

test("spec §3.4, §7: a failed config push closes the start it holds as failed, and the start is never sent", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const seen = record(agent);

  const sent = await api(s, "POST", controlPath(configId, nodeId), { action: "start" });
  const push = await eventually("the config push", () => seen.find((m) => m.topic === p.topics.config_push));
  await ack(agent, p, "config_push_ack", push.request_id, "failed", "push_config", "stopping svc0 failed");
  const rows = await eventually("the start closed", async () => {
    const r = await commandRows(s, configId, nodeId);
    return r.find((l) => l.request_id === sent.json.request_id)?.status === "failed" ? r : undefined;
  });
  assert.equal(rows[0]?.status, "failed");
  assert.equal(rows[1]?.message, `not sent: push_config ${push.request_id} ended failed: stopping svc0 failed`);
  // A detect-free round trip through the broker: anything the service had sent would be here by now.
  const probe = await api(s, "POST", controlPath(configId, nodeId), { action: "wg_show" });
  await eventually("the wg_show", () => seen.find((m) => m.request_id === probe.json.request_id));
  assert.deepEqual(
    seen.map((m) => m.topic),
    [p.topics.config_push, p.topics.info],
    "the start was never published",
  );
});

test("spec §3.1, §3.8: a start right after the bind, before the agent connects, holds its push until the node is online", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bind(s, configId, nodeId);

  const sent = await api(s, "POST", controlPath(configId, nodeId), { action: "start" });
  assert.equal(sent.status, 202);
  let rows = await commandRows(s, configId, nodeId);
  assert.deepEqual(
    rows.map((r) => [r.action, r.status, r.message]),
    [
      ["push_config", "pending", "waiting for the host to connect"],
      ["start", "pending", sent.json.log.message],
    ],
  );
  assert.match(sent.json.log.message, /^waiting for the first config/);

  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  const seen = record(agent);
  await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "info", event: "mqtt_connected", message: "agent connected" }), { qos: 1 });
  // Online → the held push goes at once (the clock never reaches the debounce).
  const push = await eventually("the held push", () => seen.find((m) => m.topic === p.topics.config_push));
  assert.equal(push.request_id, rows[0]?.request_id);
  await ack(agent, p, "config_push_ack", push.request_id, "applied", "push_config");
  const start = await eventually("the start", () => seen.find((m) => m.topic === p.topics.control));
  assert.equal(start.request_id, sent.json.request_id);
  await ack(agent, p, "control_ack", start.request_id, "applied", "start");
  rows = await eventually("both applied", async () => {
    const r = await commandRows(s, configId, nodeId);
    return r.every((l) => l.status === "applied") ? r : undefined;
  });
  assert.deepEqual(rows.map((r) => r.action), ["push_config", "start"]);
});

test("a push held for a host that never comes online ends timed_out after the command timeout, and its start failed", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  await bind(s, configId, nodeId);
  const sent = await api(s, "POST", controlPath(configId, nodeId), { action: "start" });
  s.clock.advance(s.server.settings.commandTimeoutMs);
  const rows = await commandRows(s, configId, nodeId);
  assert.deepEqual(
    rows.map((r) => [r.action, r.status]),
    [
      ["push_config", "timed_out"],
      ["start", "failed"],
    ],
  );
  assert.equal(rows[0]?.message, "not sent: the host did not come online in time");
  assert.match(rows[1]?.message ?? "", new RegExp(`^not sent: push_config ${rows[0]?.request_id} ended timed_out`));
  assert.equal(rows[1]?.request_id, sent.json.request_id);
});

test("spec §3.5: the automatic push whose debounce runs out while a start's push of the same config is open is not sent a second time", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const seen = record(agent);
  await api(s, "POST", controlPath(configId, nodeId), { action: "start" });
  const push = await eventually("the start's push", () => seen.find((m) => m.topic === p.topics.config_push));
  // Coming online asked for an automatic push; its debounce runs out now, the start's push still open.
  s.clock.advance(s.server.settings.configPushDebounceMs);
  // A round trip through the broker after it: an automatic push would have been published first.
  const probe = await api(s, "POST", controlPath(configId, nodeId), { action: "wg_show" });
  await eventually("the wg_show", () => seen.find((m) => m.request_id === probe.json.request_id));
  assert.deepEqual(seen.map((m) => m.request_id), [push.request_id, probe.json.request_id], "one push only");
  assert.deepEqual((await commandRows(s, configId, nodeId)).map((r) => r.action), ["push_config", "start", "wg_show"]);
});
