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

test("spec §3.1 transition 2, §6.4 rules 3 and 6: a dropped node answering the next probe with a failed detect ACK is online again (any ACK restores online)", async (t) => {
  const s = await startSseServer(t);
  const b = await boundAgent(s, t, { online: true });
  const firstProbe = nextMessage(b.agent, b.p.topics.detect!);
  s.clock.advance(1000);
  const sse = await s.open();
  t.after(() => sse.destroy());
  const d1 = await firstProbe;
  const failedAck = (requestId: string) =>
    envelope(b.p, "ack", { status: "failed", message: "wg not found", action: "detect", client_online: true, wg_online: true, platform: "linux", client_version: "1.2.3" }, requestId);
  await b.agent.publishAsync(b.p.topics.detect_ack!, failedAck(d1.request_id), { qos: 1 });
  await eventually("failed → dropped", async () => ((await status(s, b.configId, b.nodeId)).client_presence_state === "dropped" ? true : undefined));
  // A dropped node is still probed: the next round (2 min plus at most 10 % jitter) reaches it.
  const secondProbe = nextMessage(b.agent, b.p.topics.detect!);
  s.clock.advance(s.server.settings.detectIntervalMs * 1.1 + 1);
  const d2 = await secondProbe;
  s.clock.advance(3000);
  const ackAt = new Date(s.clock.now()).toISOString();
  await b.agent.publishAsync(b.p.topics.detect_ack!, failedAck(d2.request_id), { qos: 1 });
  const back = await eventually("failed ACK of a dropped node → online", async () => {
    const x = await status(s, b.configId, b.nodeId);
    return x.last_reachable_at === ackAt ? x : undefined;
  });
  assert.equal(back.client_presence_state, "online", "an ACK, failed or not, is a reachable signal received after the drop");
  assert.equal(back.runtime_state, "unknown", "a failed detect reports no runtime");
  // The online TTL runs from that ACK (not from the heartbeat before the drop): with no viewer
  // left (no more probes), it is still online 1 s before the ACK's TTL ends, and dropped at it.
  sse.destroy();
  await eventually("probing stops", () => (s.server.detect.active ? undefined : true));
  s.clock.advance(s.server.settings.onlineTtlMs - 1000);
  assert.equal((await status(s, b.configId, b.nodeId)).client_presence_state, "online");
  s.clock.advance(1000);
  await eventually("TTL of the ACK → dropped", async () => ((await status(s, b.configId, b.nodeId)).client_presence_state === "dropped" ? true : undefined));
});
