import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { ADMIN_PASSWORD, listenAndLogin, startSseServer, type SseServer } from "../events/sse-harness.js";
import { api, bind, connectAgent, dynamicNode, envelope, eventually, nextMessage, status, type Profile } from "../control/agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The flight recorder: real service over real HTTP, real SQLite file, the
 * embedded aedes broker on port 0, MQTT.js clients as agents, a ManualClock (nothing sleeps).
 */

type Row = {
  transition_id: number;
  at: string;
  event: string;
  source: string;
  request_id: string | null;
  route: string | null;
  before: Record<string, string> | null;
  after: Record<string, string>;
  changes: Record<string, [unknown, unknown]>;
};

const NODES = "/api/v1/configs/:config_id/nodes";

async function timeline(s: { baseUrl: string; token: string }, configId: string, nodeId: string, query = ""): Promise<{ transitions: Row[]; next_before: number | null }> {
  const res = await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/timeline${query}`);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json;
}

async function machine(s: { baseUrl: string; token: string }, configId: string, nodeId: string) {
  const res = await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/machine`);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json;
}

async function waitFor(s: SseServer, configId: string, nodeId: string, field: string, value: string): Promise<void> {
  await eventually(`${field}=${value}`, async () => ((await status(s, configId, nodeId))[field] === value ? true : undefined));
}

/** A row in the terms the issue names: event, source, request id, route, what moved. */
function compact(r: Row) {
  const moved: Record<string, string> = {};
  for (const [region, after] of Object.entries(r.after)) {
    const before = r.before?.[region];
    if (before !== after) moved[region] = `${before ?? "-"} → ${after}`;
  }
  return { event: r.event, source: r.source, request_id: r.request_id, route: r.route, moved, changed: Object.keys(r.changes).sort() };
}

function heartbeat(p: Profile, wgOnline: boolean): string {
  return envelope(p, "heartbeat", { client_online: true, wg_online: wgOnline });
}

/**
 * Bind → first heartbeat (wg running) → the same heartbeat again → stop (ACKed applied; a stop,
 * because a start before the host's first config waits for a push: spec §3.8) → will
 * (the agent's socket dies) → reconnect with a heartbeat. The clock moves 1 s before each step.
 */
async function lifeOfANode(s: SseServer, t: TestContext) {
  const { configId, nodeId } = await dynamicNode(s);
  s.clock.advance(1000);
  const p = await bind(s, configId, nodeId);
  const agent = await connectAgent(s, p);
  s.clock.advance(1000);
  await agent.publishAsync(p.topics.heartbeat!, heartbeat(p, true), { qos: 1 });
  await waitFor(s, configId, nodeId, "client_presence_state", "online");
  const afterFirst = (await timeline(s, configId, nodeId)).transitions.length;
  s.clock.advance(1000);
  const repeatAt = new Date(s.clock.now()).toISOString();
  await agent.publishAsync(p.topics.heartbeat!, heartbeat(p, true), { qos: 1 });
  await eventually("the repeated heartbeat is applied", async () => ((await machine(s, configId, nodeId)).context.last_signal_at === repeatAt ? true : undefined));
  const afterRepeat = (await timeline(s, configId, nodeId)).transitions.length;
  s.clock.advance(1000);
  const control = nextMessage(agent, p.topics.control!);
  const start = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
  assert.equal(start.status, 202, JSON.stringify(start.json));
  await control;
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "", action: "stop" }, start.json.request_id), { qos: 1 });
  await waitFor(s, configId, nodeId, "runtime_state", "stopped");
  s.clock.advance(1000);
  agent.stream.destroy(); // no DISCONNECT: the broker publishes the will
  await waitFor(s, configId, nodeId, "client_presence_state", "offline");
  s.clock.advance(1000);
  const again = await connectAgent(s, p);
  t.after(() => again.end(true));
  await again.publishAsync(p.topics.heartbeat!, heartbeat(p, true), { qos: 1 });
  await waitFor(s, configId, nodeId, "client_presence_state", "online");
  return { configId, nodeId, p, stopRequestId: start.json.request_id as string, afterFirst, afterRepeat };
}

test("spec §3.1 §3.2 §3.3 §6.4 rules 3 and 6: bind → first heartbeat → stop → will → reconnect records exactly these transitions, newest first, with their sources, request ids and routes; the repeated heartbeat records none", async (t) => {
  const s = await startSseServer(t);
  const life = await lifeOfANode(s, t);
  const { transitions } = await timeline(s, life.configId, life.nodeId);
  const BIND_COMMAND = `POST ${NODES}/:node_id/bind-command`;
  assert.deepEqual(
    transitions.map(compact),
    [
      { event: "mqtt.signal", source: "heartbeat", request_id: null, route: null, moved: { presence: "offline → online.fresh", runtime: "unknown → running" }, changed: [] },
      { event: "mqtt.will", source: "will", request_id: null, route: null, moved: { presence: "online.fresh → offline", runtime: "stopped → unknown" }, changed: [] },
      { event: "mqtt.signal", source: "ack", request_id: life.stopRequestId, route: null, moved: { runtime: "running → stopped" }, changed: [] },
      { event: "mqtt.signal", source: "heartbeat", request_id: null, route: null, moved: { presence: "offline → online.fresh", runtime: "unknown → running" }, changed: [] },
      {
        event: "client.bound",
        source: "rest",
        request_id: null,
        route: "POST /api/client/bind",
        moved: { initialization: "uninitialized → initialized", bindToken: "valid → used" },
        changed: ["client_version"],
      },
      { event: "bind_token.issued", source: "rest", request_id: null, route: BIND_COMMAND, moved: { bindToken: "none → valid" }, changed: ["bind_token_expires_at"] },
      { event: "config.staged", source: "rest", request_id: null, route: `POST ${NODES}`, moved: {}, changed: ["staged_sha256", "staged_version"] },
      {
        event: "xstate.init",
        source: "rest",
        request_id: null,
        route: `POST ${NODES}`,
        moved: { mode: "- → dynamic", initialization: "- → uninitialized", presence: "- → offline", runtime: "- → unknown", bindToken: "- → none", sync: "- → pending", probe: "- → idle" },
        changed: ["mode", "staged_version"],
      },
    ],
  );
  // Times are the events' own (the clock moved 1 s before each step), newest first.
  const t0 = Date.parse("2026-01-01T00:00:00.000Z");
  assert.deepEqual(
    transitions.map((r) => (Date.parse(r.at) - t0) / 1000),
    [6, 5, 4, 2, 1, 1, 0, 0],
  );
  assert.equal(life.afterRepeat, life.afterFirst, "a heartbeat that changes nothing records nothing");
  assert.deepEqual(transitions[0]?.changes, {});
  assert.deepEqual(transitions[4]?.changes, { client_version: [null, "1.2.3"] });
  assert.equal(transitions[0]?.after.presence, "online.fresh");
  const ids = transitions.map((r) => r.transition_id);
  assert.deepEqual(ids, [...ids].sort((a, b) => b - a), "newest first");
});

test("the timeline pages newest first by `before`, and a request for an unknown node or config answers NOT_FOUND", async (t) => {
  const s = await startSseServer(t);
  const life = await lifeOfANode(s, t);
  const all = (await timeline(s, life.configId, life.nodeId)).transitions.map((r) => r.transition_id);
  const first = await timeline(s, life.configId, life.nodeId, "?limit=3");
  assert.deepEqual(first.transitions.map((r) => r.transition_id), all.slice(0, 3));
  assert.equal(first.next_before, all[2]);
  const second = await timeline(s, life.configId, life.nodeId, `?limit=3&before=${first.next_before}`);
  assert.deepEqual(second.transitions.map((r) => r.transition_id), all.slice(3, 6));
  const last = await timeline(s, life.configId, life.nodeId, `?limit=3&before=${second.next_before}`);
  assert.deepEqual(last.transitions.map((r) => r.transition_id), all.slice(6));
  assert.equal(last.transitions.length, 2);
  assert.equal(last.next_before, null);
  for (const path of [
    `/api/v1/configs/${life.configId}/nodes/nd_00000000000000000000000000/timeline`,
    `/api/v1/configs/${life.configId}/nodes/nd_00000000000000000000000000/machine`,
    `/api/v1/configs/cf_00000000000000000000000000/nodes/${life.nodeId}/timeline`,
    `/api/v1/configs/cf_00000000000000000000000000/nodes/${life.nodeId}/machine`,
  ]) {
    const res = await api(s, "GET", path);
    assert.equal(res.status, 404, path);
    assert.equal(res.json.error.code, "NOT_FOUND", path);
  }
  const bad = await api(s, "GET", `/api/v1/configs/${life.configId}/nodes/${life.nodeId}/timeline?limit=0`);
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.code, "VALIDATION_FAILED");
  const anonymous = await api(s, "GET", `/api/v1/configs/${life.configId}/nodes/${life.nodeId}/timeline`, undefined, false);
  assert.equal(anonymous.status, 401, "admin auth");
});

test("a restart keeps the timeline and the live state (the restored node answers from its stored snapshot, and restarting records nothing)", async (t) => {
  const s = await startSseServer(t);
  const life = await lifeOfANode(s, t);
  const before = await timeline(s, life.configId, life.nodeId);
  const live = await machine(s, life.configId, life.nodeId);
  assert.equal(live.origin, "live");
  assert.equal(live.regions.presence, "online.fresh");
  const dbFile = sqliteOf(s.server.store).name;
  const dataDir = dbFile.slice(0, dbFile.lastIndexOf("/"));
  await s.close();

  const again = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock: new ManualClock(s.clock.now() + 1000), dbFile });
  t.after(() => again.close());
  const http = await listenAndLogin(again);
  assert.deepEqual(await timeline(http, life.configId, life.nodeId), before);
  const restored = await machine(http, life.configId, life.nodeId);
  assert.equal(restored.origin, "stored", "dormant until its next event");
  assert.deepEqual(restored.regions, live.regions);
  assert.deepEqual(restored.context, live.context);
});

test("the cap holds — each node keeps its newest SVC_TIMELINE_MAX_PER_NODE transitions, pruned in the background", async (t) => {
  const s = await startSseServer(t, {}, { settings: { timelineMaxPerNode: 3 } });
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bind(s, configId, nodeId);
  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  for (const wg of [true, false, true, false, true]) {
    s.clock.advance(1000);
    await agent.publishAsync(p.topics.heartbeat!, heartbeat(p, wg), { qos: 1 });
    await waitFor(s, configId, nodeId, "runtime_state", wg ? "running" : "stopped");
  }
  await s.server.timelineRetention.idle();
  const stored = sqliteOf(s.server.store).prepare("SELECT count(*) AS n FROM node_transitions WHERE node_id = ?").get(nodeId) as { n: number };
  assert.equal(stored.n, 3);
  const { transitions } = await timeline(s, configId, nodeId);
  assert.deepEqual(
    transitions.map((r) => `${r.before?.runtime} → ${r.after.runtime}`),
    ["stopped → running", "running → stopped", "stopped → running"],
    "the newest three are kept",
  );
});

test("/machine answers the active state per region and the context summary from the live actor", async (t) => {
  const s = await startSseServer(t);
  const life = await lifeOfANode(s, t);
  const m = await machine(s, life.configId, life.nodeId);
  assert.deepEqual(m.regions, {
    mode: "dynamic",
    initialization: "initialized",
    presence: "online.fresh",
    runtime: "running",
    bindToken: "used",
    sync: "pending",
    probe: "idle",
  });
  assert.ok(m.active_states.includes("node.presence.online") && m.active_states.includes("node.presence.online.fresh"));
  assert.equal(m.context.client_version, "1.2.3");
  assert.equal(m.context.last_signal_at, new Date(s.clock.now()).toISOString());
  assert.equal(m.context.staged_version, 1);
  assert.equal(m.context.mode, "dynamic");
});
