import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import mqtt, { type MqttClient } from "mqtt";
import { isoTime } from "../../src/lib/clock.js";
import type { SseServer } from "../events/sse-harness.js";

/**
 * Helpers for control-channel tests: REST calls against the real service, and MQTT.js clients
 * acting as agents with the bind profile.
 */

export interface Profile {
  profile: { config_id: string; node_id: string; server_url: string };
  mqtt: { host: string; port: number; tls: boolean; username: string; password: string; client_id: string };
  topics: Record<string, string>;
}

/** One REST call over real HTTP with the admin token (any service handle with a base URL and token). */
export async function api(
  s: { baseUrl: string; token: string },
  method: string,
  path: string,
  body?: unknown,
  auth = true,
): Promise<{ status: number; json: any }> {
  const res = await fetch(`${s.baseUrl}${path}`, {
    method,
    headers: {
      ...(auth ? { authorization: `Bearer ${s.token}` } : {}),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** Waits for a real asynchronous outcome (MQTT delivery, a commit); bounded, never a timer in the code under test. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (let i = 0; i < 300; i++) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function dynamicNode(s: SseServer): Promise<{ configId: string; nodeId: string }> {
  const config = await api(s, "POST", "/api/v1/configs", { name: `c-${Math.random().toString(36).slice(2, 7)}`, tunnel_protocol: "wireguard", network_cidr: "10.77.0.0/24" });
  assert.equal(config.status, 201);
  const node = await api(s, "POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: "edge", mode: "dynamic", public_address: "192.0.2.7" });
  assert.equal(node.status, 201);
  return { configId: config.json.config_id, nodeId: node.json.node_id };
}

export async function bind(s: SseServer, configId: string, nodeId: string): Promise<Profile> {
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  assert.equal(cmd.status, 200);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  assert.ok(token);
  const res = await api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.2.3", platform: "linux", hostname: "edge-1" }, false);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json;
}

export function envelope(p: Profile, type: string, payload: Record<string, unknown>, requestId = ""): string {
  return JSON.stringify({
    type,
    request_id: requestId,
    config_id: p.profile.config_id,
    node_id: p.profile.node_id,
    boot_id: "boot-1",
    session_id: "session-1",
    sent_at: isoTime(Date.now()),
    payload,
  });
}

export async function connectAgent(s: SseServer, p: Profile, password = p.mqtt.password): Promise<MqttClient> {
  const client = mqtt.connect(`mqtt://127.0.0.1:${s.server.mqtt.broker!.port}`, {
    protocolVersion: 4,
    clientId: p.mqtt.client_id,
    username: p.mqtt.username,
    password,
    reconnectPeriod: 0,
    will: {
      topic: p.topics.event!,
      payload: Buffer.from(JSON.stringify({ type: "event", request_id: "", config_id: p.profile.config_id, node_id: p.profile.node_id, boot_id: "", session_id: "", sent_at: isoTime(Date.now()), payload: { level: "info", event: "offline", message: "lost" } })),
      qos: 1,
      retain: false,
    },
  });
  await new Promise<void>((resolve, reject) => {
    client.once("connect", () => resolve());
    client.once("error", reject);
  });
  await client.subscribeAsync([p.topics.config_push!, p.topics.control!, p.topics.detect!, p.topics.info!], { qos: 1 });
  return client;
}

export function nextMessage(client: MqttClient, topic: string): Promise<{ request_id: string; payload: any }> {
  return new Promise((resolve) => {
    const onMessage = (t: string, buf: Buffer) => {
      if (t !== topic) return;
      client.off("message", onMessage);
      resolve(JSON.parse(buf.toString()));
    };
    client.on("message", onMessage);
  });
}

export async function status(s: SseServer, configId: string, nodeId: string) {
  return (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/endpoint-status`)).json;
}


/**
 * A dynamic node with a bound agent connected (ended after the test); with `online`, the agent
 * has sent one heartbeat and the node is online.
 */
export async function boundAgent(
  s: SseServer,
  t: TestContext,
  opts: { online?: boolean; endAfter?: boolean } = {},
): Promise<{ configId: string; nodeId: string; p: Profile; agent: MqttClient }> {
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bind(s, configId, nodeId);
  const agent = await connectAgent(s, p);
  if (opts.endAfter !== false) t.after(() => agent.end(true));
  if (opts.online) {
    await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
    await eventually("online", async () => ((await status(s, configId, nodeId)).client_presence_state === "online" ? true : undefined));
  }
  return { configId, nodeId, p, agent };
}

/**
 * Has the node's host confirm its staged config (spec §3.5): a push over REST, ACKed `applied`
 * by `agent`, then waits for `latest`. Node online first. A start sent afterwards goes straight
 * out instead of waiting for a push (spec §3.8).
 */
export async function confirmConfig(s: SseServer, configId: string, nodeId: string, p: Profile, agent: MqttClient): Promise<void> {
  const pushed = nextMessage(agent, p.topics.config_push!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "push_config" });
  assert.equal(sent.status, 202);
  const push = await pushed;
  await agent.publishAsync(p.topics.config_push_ack!, envelope(p, "ack", { status: "applied", message: "", action: "push_config" }, push.request_id), { qos: 1 });
  await eventually("latest", async () => ((await status(s, configId, nodeId)).config_version_state === "latest" ? true : undefined));
}

/**
 * A delivery barrier for checking that no probe reached an agent: waits until every detect the
 * scheduler started has been handed to the broker link, then sends the node a `wg_show` through
 * the same link and waits for it at the agent. The broker delivers one link's messages to one
 * client in order, so a probe published before the barrier has arrived by the time it resolves.
 */
export async function probesDelivered(s: SseServer, node: { configId: string; nodeId: string; p: Profile; agent: MqttClient }): Promise<void> {
  await s.server.detect.whenIdle();
  const info = nextMessage(node.agent, node.p.topics.info!);
  const sent = await api(s, "POST", `/api/v1/configs/${node.configId}/nodes/${node.nodeId}/control`, { action: "wg_show" });
  assert.ok(sent.status < 300, JSON.stringify(sent.json));
  await info;
}
