/**
 * The rule engine on node state (docs/alerts.md "Rules"): stand-in agents (MQTT.js with the
 * agent's will) on the real embedded broker, a real receiver on loopback, the service on a
 * ManualClock at the wall clock's time. A node's will → one signed `node.offline`; its return →
 * one `node.online` naming the alert it resolves; `for_s` holds an alert back and a flap inside
 * it sends nothing; a failed command's alert carries the agent's message.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { Webhook } from "standardwebhooks";
import { ManualClock } from "../../src/lib/clock.js";
import { api, boundAgent, connectAgent, envelope, eventually, nextMessage, status } from "../control/agent-harness.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { ALERT_TEST_SETTINGS, startReceiver, until, type Receiver } from "./harness.js";

const WINDOW_MS = 30_000;

async function setup(t: Parameters<typeof startSseServer>[0], rule: Record<string, unknown>) {
  const rx = await startReceiver(t);
  const dataDir = mkdtempSync(join(tmpdir(), "svc-alert-rules-"));
  const s = await startSseServer(t, {}, { settings: ALERT_TEST_SETTINGS, clock: new ManualClock(Date.now()), dataDir });
  const ch = await api(s, "POST", "/api/v1/alerts/channels", { name: "ops", kind: "webhook", url: rx.url });
  assert.equal(ch.status, 201);
  const r = await api(s, "POST", "/api/v1/alerts/rules", { name: "rule", channel_ids: [ch.json.channel_id], ...rule });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  const restart = async () => {
    await s.close();
    return startSseServer(t, {}, { settings: ALERT_TEST_SETTINGS, clock: s.clock, dataDir });
  };
  return { rx, s, secret: ch.json.secret as string, restart };
}

/** The received alerts, verified with the standardwebhooks library. */
function verified(rx: Receiver, secret: string) {
  return rx.received.map((r) => ({ id: r.headers["webhook-id"], ...(new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as { type: string; data: Record<string, any> }) }));
}

async function presence(s: SseServer, configId: string, nodeId: string, want: string) {
  await eventually(want, async () => ((await status(s, configId, nodeId)).client_presence_state === want ? true : undefined));
}

/** Lets the engine's and worker's turns run after the clock moved. */
async function advance(s: SseServer, ms: number) {
  s.clock.advance(ms);
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

test("spec §3.1 will → one signed node.offline at once; the node back → one node.online naming the alert it resolves (after the channel's group window)", async (t) => {
  const { rx, s, secret } = await setup(t, { event: "node.offline" });
  const node = await boundAgent(s, t, { online: true });
  node.agent.stream.destroy(); // the connection dies: the broker publishes the will
  await presence(s, node.configId, node.nodeId, "offline");
  await until(() => rx.received.length === 1, "node.offline delivered");
  const [offline] = verified(rx, secret);
  assert.equal(offline?.type, "node.offline");
  assert.equal(offline?.data.node_id, node.nodeId);
  assert.match(String(offline?.data.alert_id), /^alr-/);

  const again = await connectAgent(s, node.p);
  t.after(() => again.end(true));
  await again.publishAsync(node.p.topics.heartbeat!, envelope(node.p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await presence(s, node.configId, node.nodeId, "online");
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 1, "the resolution waits for the window the offline alert opened");
  await advance(s, WINDOW_MS);
  await until(() => rx.received.length === 2, "node.online delivered");
  const online = verified(rx, secret)[1];
  assert.equal(online?.type, "node.online");
  assert.equal(online?.data.resolves, offline?.data.alert_id);
  assert.notEqual(online?.id, offline?.id);
  await advance(s, WINDOW_MS);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 2, "nothing more");
});

test("for_s 10: down and back within it sends nothing; down past it sends node.offline once though the backend restarted in between; back, node.online names it", async (t) => {
  const { rx, s, secret, restart } = await setup(t, { event: "node.offline", for_s: 10 });
  const node = await boundAgent(s, t, { online: true });
  node.agent.stream.destroy();
  await presence(s, node.configId, node.nodeId, "offline");
  await advance(s, 3_000);
  const again = await connectAgent(s, node.p);
  t.after(() => again.end(true));
  await again.publishAsync(node.p.topics.heartbeat!, envelope(node.p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await presence(s, node.configId, node.nodeId, "online");
  await advance(s, 60_000);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 0, "a flap inside for_s sends nothing");

  again.stream.destroy();
  await presence(s, node.configId, node.nodeId, "offline");
  await advance(s, 9_000);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 0, "held for 10 s");
  const s2 = await restart(); // the held alert is stored: the new process arms it again
  await advance(s2, 1_000);
  await until(() => rx.received.length === 1, "node.offline after for_s");
  const [offline] = verified(rx, secret);
  assert.equal(offline?.type, "node.offline");
  assert.equal(offline?.data.node_id, node.nodeId);
  await advance(s2, 120_000);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 1, "fired once");

  const back = await connectAgent(s2, node.p);
  t.after(() => back.end(true));
  await back.publishAsync(node.p.topics.heartbeat!, envelope(node.p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await presence(s2, node.configId, node.nodeId, "online");
  await until(() => rx.received.length === 2, "node.online delivered");
  const online = verified(rx, secret)[1];
  assert.deepEqual([online?.type, online?.data.resolves], ["node.online", offline?.data.alert_id]);
});

test("command.failed: a config push the agent ACKs failed alerts the rule's channel with the agent's message", async (t) => {
  const { rx, s, secret } = await setup(t, { event: "command.failed" });
  const node = await boundAgent(s, t, { online: true });
  const pushed = nextMessage(node.agent, node.p.topics.config_push!);
  const sent = await api(s, "POST", `/api/v1/configs/${node.configId}/nodes/${node.nodeId}/control`, { action: "push_config" });
  assert.equal(sent.status, 202);
  const push = await pushed;
  await node.agent.publishAsync(node.p.topics.config_push_ack!, envelope(node.p, "ack", { status: "failed", message: "wg-quick: line 3: bad key", action: "push_config" }, push.request_id), { qos: 1 });
  await until(() => rx.received.length === 1, "command.failed delivered");
  const [failed] = verified(rx, secret);
  assert.equal(failed?.type, "command.failed");
  assert.deepEqual([failed?.data.action, failed?.data.status, failed?.data.message, failed?.data.request_id], ["push_config", "failed", "wg-quick: line 3: bad key", push.request_id]);
});

test("a node.offline alert while the receiver answers 503, the backend restarted, the receiver back: delivered exactly once with one webhook-id, both attempts in the delivery log", async (t) => {
  const { rx, s, restart } = await setup(t, { event: "node.offline" });
  rx.script.push({ status: 503 });
  const node = await boundAgent(s, t, { online: true });
  node.agent.stream.destroy();
  await presence(s, node.configId, node.nodeId, "offline");
  await until(() => rx.received.length === 1, "the first attempt (503)");
  // Stopping aborts an attempt still in flight, unrecorded (sent again at start): restart once the 503 is recorded.
  await until(async () => (await api(s, "GET", "/api/v1/alerts/deliveries")).json.items[0]?.attempts === 1, "the 503 recorded");
  const s2 = await restart();
  await advance(s2, 1_100); // the schedule's first retry, jitter included
  await until(() => rx.received.length === 2, "the retry after the restart");
  await advance(s2, 60_000);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 2, "delivered once: never again after the 200");
  assert.equal(rx.received[0]?.headers["webhook-id"], rx.received[1]?.headers["webhook-id"]);
  const log = (await api(s2, "GET", "/api/v1/alerts/deliveries")).json.items;
  assert.equal(log.length, 1);
  assert.deepEqual([log[0].type, log[0].status, log[0].attempts, log[0].delivery_id], ["node.offline", "delivered", 2, rx.received[0]?.headers["webhook-id"]]);
  assert.deepEqual(log[0].history.map((a: { http_status: number }) => a.http_status), [503, 200]);
});
