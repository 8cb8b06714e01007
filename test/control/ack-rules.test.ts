import assert from "node:assert/strict";
import { test } from "node:test";
import { startSseServer } from "../events/sse-harness.js";
import { api, boundAgent, envelope, eventually, nextMessage, status } from "./agent-harness.js";

/**
 * spec §6.4 rule 1 (which messages need an ACK) and §6.3 detect ACK status, end to end over the
 * real embedded broker, on an injected clock (DESIGN §3: command timeout 60 s, detect 20 s).
 */

const MINUTE = 60_000;

test("spec §6.4 rule 1: an unanswered config push and an unanswered info command each end timed_out after 60 s; an event or heartbeat opens no command", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const logs = async () =>
    (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs as Array<{ request_id: string; kind: string; action: string; status: string }>;
  const open = s.server.commands.openCount;
  const push = nextMessage(agent, p.topics.config_push!);
  const pushSent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "push_config" });
  await push;
  const info = nextMessage(agent, p.topics.info!);
  const infoSent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "wg_show" });
  await info;
  assert.equal(s.server.commands.openCount, open + 2);
  // Passive messages need no ACK and open nothing.
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: false }), { qos: 1 });
  await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "info", event: "mqtt_connected", message: "" }), { qos: 1 });
  await eventually("online", async () => ((await status(s, configId, nodeId)).client_presence_state === "online" ? true : undefined));
  assert.equal(s.server.commands.openCount, open + 2);
  s.clock.advance(MINUTE - 1);
  const byId = async (id: string) => (await logs()).find((l) => l.kind === "command" && l.request_id === id)?.status;
  assert.equal(await byId(pushSent.json.request_id), "pending");
  assert.equal(await byId(infoSent.json.request_id), "pending");
  s.clock.advance(1);
  assert.equal(await byId(pushSent.json.request_id), "timed_out", "config/push needs an ACK");
  assert.equal(await byId(infoSent.json.request_id), "timed_out", "info needs an ACK");
  assert.equal((await status(s, configId, nodeId)).config_version_state, "pending", "an unconfirmed push confirms nothing");
});

test("spec §6.3 detect ACK status: accepted keeps the node online past the detect timeout; failed drops it at once and still refreshes last_reachable_at (§6.4 rule 3)", async (t) => {
  const s = await startSseServer(t);
  const a = await boundAgent(s, t, { online: true });
  const b = await boundAgent(s, t, { online: true });
  const detectA = nextMessage(a.agent, a.p.topics.detect!);
  const detectB = nextMessage(b.agent, b.p.topics.detect!);
  s.clock.advance(1000); // the probe comes after the last heartbeat
  const sse = await s.open();
  t.after(() => sse.destroy());
  const [da, db] = await Promise.all([detectA, detectB]);
  s.clock.advance(5000);
  const ackAt = new Date(s.clock.now()).toISOString();
  const fields = { message: "", action: "detect", client_online: true, wg_online: true, platform: "linux", client_version: "1.2.3" };
  await a.agent.publishAsync(a.p.topics.detect_ack!, envelope(a.p, "ack", { status: "accepted", ...fields }, da.request_id), { qos: 1 });
  await b.agent.publishAsync(b.p.topics.detect_ack!, envelope(b.p, "ack", { status: "failed", ...fields, message: "wg not found" }, db.request_id), { qos: 1 });
  const failed = await eventually("failed → dropped", async () => {
    const x = await status(s, b.configId, b.nodeId);
    return x.client_presence_state === "dropped" ? x : undefined;
  });
  assert.equal(failed.last_reachable_at, ackAt, "a failed ACK is still an ACK");
  assert.equal(failed.runtime_state, "unknown");
  const accepted = await eventually("accepted → reachable", async () => {
    const x = await status(s, a.configId, a.nodeId);
    return x.last_reachable_at === ackAt ? x : undefined;
  });
  assert.equal(accepted.client_presence_state, "online");
  s.clock.advance(20_000);
  const later = await status(s, a.configId, a.nodeId);
  assert.equal(later.client_presence_state, "online", "the accepted ACK is a signal after the probe: its timeout drops nothing");
  assert.equal(later.runtime_state, "running", "accepted carries no runtime report");
});
