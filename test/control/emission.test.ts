import assert from "node:assert/strict";
import { test } from "node:test";
import { startSseServer, type SseClient, type SseFrame, type SseServer } from "../events/sse-harness.js";
import { api, boundAgent, envelope, eventually, nextMessage, status } from "./agent-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * spec §6.5 emission rules and publishing points, end to end: the real service (embedded aedes,
 * SQLite, HTTP), MQTT.js clients acting as agents, and an SSE subscriber over real HTTP. Each
 * frame is checked against the committed row at the moment it is read (rule 6), so a frame
 * published before the write, or not at all, fails the test.
 */

const MINUTE = 60_000;

type Status = {
  client_presence_state: string;
  runtime_state: string;
  client_initialized: boolean;
  config_version_state: string | null;
  last_reachable_at: string | null;
  client_version: string | null;
};

function payload(f: SseFrame): Record<string, any> {
  return f.json.payload;
}

/** The next `endpoint.status.updated` of `nodeId` whose status matches. */
async function statusFrame(sse: SseClient, nodeId: string, match: (st: Status) => boolean): Promise<Status> {
  const f = await sse.waitFor((x) => x.event === "endpoint.status.updated" && payload(x).node_id === nodeId && match(payload(x).status as Status));
  return payload(f).status as Status;
}

/** The node's `node_client_state` row as committed now. */
function row(s: SseServer, nodeId: string): { client_presence_state: string; runtime_state: string; client_initialized: number } {
  return sqliteOf(s.server.store)
    .prepare("SELECT client_presence_state, runtime_state, client_initialized FROM node_client_state WHERE node_id = ?")
    .get(nodeId) as { client_presence_state: string; runtime_state: string; client_initialized: number };
}

test("spec §6.5 emit 1, §3.1 transition 3: a detect ACK and a detect timeout each publish endpoint.status.updated after the commit", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const detect = nextMessage(agent, p.topics.detect!);
  const sse = await s.open();
  t.after(() => sse.destroy());
  const d1 = await detect;
  s.clock.advance(1000);
  const ackAt = new Date(s.clock.now()).toISOString();
  await agent.publishAsync(
    p.topics.detect_ack!,
    envelope(p, "ack", { status: "applied", message: "", action: "detect", client_online: true, wg_online: false, platform: "linux", client_version: "3.1.4" }, d1.request_id),
    { qos: 1 },
  );
  const afterAck = await statusFrame(sse, nodeId, (st) => st.client_version === "3.1.4");
  assert.equal(afterAck.runtime_state, "stopped", "the detect ACK's wg_online=false");
  assert.equal(afterAck.last_reachable_at, ackAt, "the detect ACK is an ACK (spec §6.4 rule 3)");
  assert.equal(row(s, nodeId).runtime_state, "stopped", "published after the commit");

  // The next round goes unanswered: the timeout drops the node and says so on the stream.
  const d2 = nextMessage(agent, p.topics.detect!);
  s.clock.advance(2 * MINUTE + 12_001);
  await d2;
  s.clock.advance(20_000);
  const dropped = await statusFrame(sse, nodeId, (st) => st.client_presence_state === "dropped");
  assert.equal(dropped.runtime_state, "unknown");
  assert.equal(dropped.client_initialized, true, "spec §3.2: the console stays on the control page");
  assert.equal(row(s, nodeId).client_presence_state, "dropped", "published after the commit");
  assert.equal((await status(s, configId, nodeId)).client_presence_state, "dropped");
});

test("spec §6.5 emit 1, §3.1 reachable signals: control, info and config-push ACKs and a non-offline client event each publish endpoint.status.updated and bring a silent node online", async (t) => {
  const s = await startSseServer(t);
  const sse = await s.open();
  t.after(() => sse.destroy());

  // A control ACK: stop applied → stopped, last_reachable_at = the ACK's time (a stop, because a
  // start for a host without a confirmed config waits for a push first: spec §3.8).
  {
    const { configId, nodeId, p, agent } = await boundAgent(s, t);
    assert.equal((await status(s, configId, nodeId)).client_presence_state, "offline", "bound, never heard from");
    const msg = nextMessage(agent, p.topics.control!);
    await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
    const m = await msg;
    s.clock.advance(1000);
    const at = new Date(s.clock.now()).toISOString();
    await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "stopped", action: "stop" }, m.request_id), { qos: 1 });
    const st = await statusFrame(sse, nodeId, (x) => x.runtime_state === "stopped");
    assert.equal(st.client_presence_state, "online");
    assert.equal(st.last_reachable_at, at);
    assert.equal(row(s, nodeId).runtime_state, "stopped");
  }
  // An info ACK.
  {
    const { configId, nodeId, p, agent } = await boundAgent(s, t);
    const msg = nextMessage(agent, p.topics.info!);
    await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "wg_show" });
    const m = await msg;
    s.clock.advance(1000);
    const at = new Date(s.clock.now()).toISOString();
    await agent.publishAsync(p.topics.info_ack!, envelope(p, "ack", { status: "applied", message: "", action: "wg_show" }, m.request_id), { qos: 1 });
    const st = await statusFrame(sse, nodeId, (x) => x.client_presence_state === "online");
    assert.equal(st.last_reachable_at, at, "an info ACK refreshes last_reachable_at");
    assert.equal(st.runtime_state, "unknown", "an info ACK reports no runtime");
  }
  // A config-push ACK (the operator's push_config goes to config/push): online and latest.
  {
    const { configId, nodeId, p, agent } = await boundAgent(s, t);
    const msg = nextMessage(agent, p.topics.config_push!);
    await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "push_config" });
    const m = await msg;
    s.clock.advance(1000);
    const at = new Date(s.clock.now()).toISOString();
    await agent.publishAsync(p.topics.config_push_ack!, envelope(p, "ack", { status: "applied", message: "", action: "push_config" }, m.request_id), { qos: 1 });
    const st = await statusFrame(sse, nodeId, (x) => x.client_presence_state === "online" && x.config_version_state === "latest");
    assert.equal(st.last_reachable_at, at, "a config-push ACK refreshes last_reachable_at");
  }
  // A non-offline event (mqtt_connected) after the will: offline → online, published both ways.
  {
    const { nodeId, p, agent } = await boundAgent(s, t, { online: true });
    await statusFrame(sse, nodeId, (x) => x.client_presence_state === "online");
    await agent.publishAsync(
      p.topics.event!,
      envelope(p, "event", { level: "info", event: "offline", message: "lost" }),
      { qos: 1 },
    );
    await statusFrame(sse, nodeId, (x) => x.client_presence_state === "offline");
    assert.equal(row(s, nodeId).client_presence_state, "offline");
    s.clock.advance(1000);
    await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "info", event: "mqtt_connected", message: "agent connected" }), { qos: 1 });
    const st = await statusFrame(sse, nodeId, (x) => x.client_presence_state === "online");
    assert.equal(st.runtime_state, "unknown", "an event carries no runtime report");
    assert.equal(row(s, nodeId).client_presence_state, "online");
  }
});

test("spec §6.5 emit 1, §3.1 transitions 4 and 5, §4 rule 12: reset-client and dynamic → static each publish endpoint.status.updated (offline, not initialized, runtime unknown) after the commit", async (t) => {
  const s = await startSseServer(t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  for (const how of ["reset", "static"] as const) {
    const { configId, nodeId } = await boundAgent(s, t, { online: true });
    await statusFrame(sse, nodeId, (x) => x.client_presence_state === "online" && x.runtime_state === "running");
    if (how === "reset") {
      assert.equal((await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/reset-client`)).status, 200);
    } else {
      assert.equal((await api(s, "PATCH", `/api/v1/configs/${configId}/nodes/${nodeId}`, { mode: "static" })).status, 200);
    }
    const st = await statusFrame(sse, nodeId, (x) => x.client_initialized === false);
    assert.equal(st.client_presence_state, "offline", how);
    assert.equal(st.runtime_state, "unknown", how);
    assert.deepEqual(row(s, nodeId), { client_presence_state: "offline", runtime_state: "unknown", client_initialized: 0 }, `${how}: published after the commit`);
  }
});

test("spec §6.5 publishing points (sync state changes), §3.3 note: the applied push ACK publishes config_version_state latest; command output leaves the runtime as it was", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const sse = await s.open();
  t.after(() => sse.destroy());
  const msg = nextMessage(agent, p.topics.config_push!);
  await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "push_config" });
  const m = await msg;
  await agent.publishAsync(p.topics.config_push_ack!, envelope(p, "ack", { status: "applied", message: "", action: "push_config" }, m.request_id), { qos: 1 });
  const latest = await statusFrame(sse, nodeId, (x) => x.config_version_state === "latest");
  assert.equal(latest.runtime_state, "running");
  const committed = sqliteOf(s.server.store).prepare("SELECT confirmed_config_sha256 AS sha FROM nodes WHERE node_id = ?").get(nodeId) as { sha: string };
  assert.equal(committed.sha, m.payload.config_sha256, "the frame left after the confirmed pair was stored");

  // spec §3.3: raw output is diagnostic only, even when it says the interface is down.
  const info = nextMessage(agent, p.topics.info!);
  await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "wg_show" });
  const i = await info;
  await agent.publishAsync(
    p.topics.event!,
    envelope(p, "event", { level: "info", event: "command_output", message: "", request_id: i.request_id, action: "wg_show", stream: "stderr", output: "Unable to access interface: No such device" }),
    { qos: 1 },
  );
  await sse.waitFor((f) => f.event === "control.log.created" && (payload(f).log as { kind: string }).kind === "output");
  assert.equal((await status(s, configId, nodeId)).runtime_state, "running");
  assert.equal(row(s, nodeId).runtime_state, "running");
});

test("spec §6.5 emit 3, 4, 5: listen-port, public-address and mesh-pair writes publish mesh.workspace.updated for the endpoint and its peers, node.apply.updated, config.list.updated and system.status.updated, after the write", async (t) => {
  const s = await startSseServer(t);
  const config = (await api(s, "POST", "/api/v1/configs", { name: "emit", tunnel_protocol: "wireguard", network_cidr: "10.66.0.0/24" })).json;
  const cid = config.config_id as string;
  const a = (await api(s, "POST", `/api/v1/configs/${cid}/nodes`, { name: "a", mode: "static", public_address: "192.0.2.1" })).json;
  const b = (await api(s, "POST", `/api/v1/configs/${cid}/nodes`, { name: "b", mode: "static", public_address: "192.0.2.2" })).json;
  const c = (await api(s, "POST", `/api/v1/configs/${cid}/nodes`, { name: "c", mode: "static", public_address: "192.0.2.3", auto_pair: false })).json;
  const sse = await s.open();
  t.after(() => sse.destroy());
  await sse.waitFor((f) => f.event === "system.clock.sync");

  /**
   * Collects the frames one write publishes, up to its system.status.updated (the notifier's
   * last), and checks each against the store as the frame is read.
   */
  const framesOf = async (write: () => Promise<{ status: number }>, expected: number): Promise<SseFrame[]> => {
    const res = await write();
    assert.ok(res.status < 300, String(res.status));
    const frames: SseFrame[] = [];
    await sse.waitFor((f) => {
      frames.push(f);
      return f.event === "system.status.updated";
    });
    const list = frames.find((f) => f.event === "config.list.updated");
    assert.ok(list, "spec §6.5 emit 4: the config list is refreshed");
    const sys = frames.at(-1)!;
    assert.equal(payload(sys).topology.mesh_pairs, expected, "spec §6.5 emit 4: the system status is refreshed, with the committed pair count");
    return frames;
  };
  const mesh = (frames: SseFrame[]) => new Map(frames.filter((f) => f.event === "mesh.workspace.updated").map((f) => [payload(f).node_id as string, payload(f)]));
  const apply = (frames: SseFrame[]) => new Map(frames.filter((f) => f.event === "node.apply.updated").map((f) => [payload(f).node_id as string, payload(f)]));
  const staged = async (nodeId: string) => (await api(s, "GET", `/api/v1/configs/${cid}/nodes/${nodeId}/config`)).json;

  // Listen port of a: a and its peer b (c is not paired with a), with their connections' integrity.
  let frames = await framesOf(() => api(s, "PATCH", `/api/v1/configs/${cid}/nodes/${a.node_id}`, { listen_port: 41000 }), 1);
  let ws = mesh(frames);
  assert.deepEqual([...ws.keys()].sort(), [a.node_id, b.node_id].sort(), "the endpoint and its affected peer, not c");
  assert.equal(ws.get(b.node_id)!.workspace.connections[0].integrity.status, "ok");
  assert.deepEqual(
    (ws.get(a.node_id)!.nodes as Array<{ node_id: string }>).map((n) => n.node_id).sort(),
    [a.node_id, b.node_id, c.node_id].sort(),
    "spec §6.5 mesh.workspace.updated `nodes`: every node of the config",
  );
  const peerB = (ws.get(b.node_id)!.nodes as Array<{ node_id: string; listen_port: number }>).find((n) => n.node_id === a.node_id);
  assert.equal(peerB?.listen_port, 41000, "the frame carries the committed port");
  const ap = apply(frames);
  const stagedB = await staged(b.node_id);
  assert.match(stagedB.config_text, /:41000$/m, "b's staged config points at the new port");
  assert.deepEqual(
    ap.get(b.node_id),
    { config_id: cid, node_id: b.node_id, sync_status: "static", preview: { config_version: stagedB.config_version, config_sha256: stagedB.config_sha256 }, applied: false },
    "spec §6.5 node.apply.updated: sync_status, preview (the staged pair), applied",
  );

  // Public address of b: b and a.
  frames = await framesOf(() => api(s, "PATCH", `/api/v1/configs/${cid}/nodes/${b.node_id}`, { public_address: "192.0.2.22" }), 1);
  assert.deepEqual([...mesh(frames).keys()].sort(), [a.node_id, b.node_id].sort());

  // Mesh pair create (a–c), disable, enable, delete: both ends each time, the pair count moving.
  const created = await api(s, "POST", `/api/v1/configs/${cid}/mesh-pairs`, { node_a: a.node_id, node_b: c.node_id });
  assert.equal(created.status, 201);
  frames = [];
  await sse.waitFor((f) => {
    frames.push(f);
    return f.event === "system.status.updated";
  });
  assert.equal(payload(frames.at(-1)!).topology.mesh_pairs, 2);
  ws = mesh(frames);
  assert.ok(ws.has(a.node_id) && ws.has(c.node_id), "pair create: both ends");
  assert.ok(!ws.has(b.node_id), "b's config did not change");
  assert.ok(ws.get(c.node_id)!.workspace.connections.some((p: { pair_id: string }) => p.pair_id === created.json.pair_id));
  const pairUrl = `/api/v1/configs/${cid}/mesh-pairs/${created.json.pair_id}`;
  frames = await framesOf(() => api(s, "PATCH", pairUrl, { enabled: false }), 2);
  ws = mesh(frames);
  assert.ok(ws.has(a.node_id) && ws.has(c.node_id), "pair disable: both ends");
  assert.equal(ws.get(c.node_id)!.workspace.connections[0].integrity.status, "disabled", "the committed integrity");
  frames = await framesOf(() => api(s, "PATCH", pairUrl, { enabled: true }), 2);
  assert.equal(mesh(frames).get(c.node_id)!.workspace.connections[0].integrity.status, "ok", "pair enable");
  frames = await framesOf(() => api(s, "DELETE", pairUrl), 1);
  ws = mesh(frames);
  assert.ok(ws.has(a.node_id) && ws.has(c.node_id), "pair delete: both ends");
  assert.deepEqual(ws.get(c.node_id)!.workspace.connections, [], "c has no connection left");
});

test("spec §6.5 publishing points: tag writes and port-forward create/disable/enable/delete publish config.overview.updated (tags), node.workspace.updated and node.apply.updated after the write", async (t) => {
  const s = await startSseServer(t);
  const cid = (await api(s, "POST", "/api/v1/configs", { name: "pp", tunnel_protocol: "wireguard", network_cidr: "10.67.0.0/24" })).json.config_id as string;
  const gw = (await api(s, "POST", `/api/v1/configs/${cid}/nodes`, { name: "gw", mode: "static", public_address: "192.0.2.1" })).json;
  const sse = await s.open();
  t.after(() => sse.destroy());
  await sse.waitFor((f) => f.event === "system.clock.sync");
  const untilStatus = async () => {
    const frames: SseFrame[] = [];
    await sse.waitFor((f) => {
      frames.push(f);
      return f.event === "system.status.updated";
    });
    return frames;
  };

  // A tag write.
  assert.equal((await api(s, "PATCH", `/api/v1/configs/${cid}/nodes/${gw.node_id}`, { tags: ["edge"] })).status, 200);
  let frames = await untilStatus();
  const overview = frames.find((f) => f.event === "config.overview.updated");
  assert.deepEqual(payload(overview!).tags, [{ tag: "edge", node_ids: [gw.node_id] }]);
  const workspace = frames.find((f) => f.event === "node.workspace.updated" && payload(f).node_id === gw.node_id);
  assert.deepEqual(payload(workspace!).workspace.tags, ["edge"]);

  // Port forwards: each write re-stages the gateway's config; node.apply.updated carries the new pair.
  const base = `/api/v1/configs/${cid}/nodes/${gw.node_id}/port-forwards`;
  const writes: Array<[string, () => Promise<{ status: number; json: any }>]> = [];
  let forwardId = "";
  writes.push([
    "create",
    async () => {
      const r = await api(s, "POST", base, { protocol: "tcp", listen_port: 8443, target_address: "10.67.0.9", target_port: 443 });
      forwardId = r.json.forward_id;
      return r;
    },
  ]);
  writes.push(["disable", () => api(s, "PATCH", `${base}/${forwardId}`, { enabled: false })]);
  writes.push(["enable", () => api(s, "PATCH", `${base}/${forwardId}`, { enabled: true })]);
  writes.push(["delete", () => api(s, "DELETE", `${base}/${forwardId}`)]);
  const shas = new Set<string>();
  for (const [what, write] of writes) {
    const res = await write();
    assert.ok(res.status < 300, `${what}: ${res.status}`);
    frames = await untilStatus();
    const applyFrame = frames.find((f) => f.event === "node.apply.updated" && payload(f).node_id === gw.node_id);
    assert.ok(applyFrame, `port forward ${what}: node.apply.updated`);
    const staged = (await api(s, "GET", `/api/v1/configs/${cid}/nodes/${gw.node_id}/config`)).json;
    assert.deepEqual(payload(applyFrame).preview, { config_version: staged.config_version, config_sha256: staged.config_sha256 }, `port forward ${what}: the committed pair`);
    shas.add(staged.config_sha256);
    assert.ok(frames.some((f) => f.event === "config.overview.updated"), `port forward ${what}: config.overview.updated`);
  }
  assert.ok(shas.size >= 2, "the forward changed the rendered config");
});

test("spec §6.5 node.apply.updated: `applied` is true when a re-stage returns a bound node to the config it confirmed", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const peer = (await api(s, "POST", `/api/v1/configs/${configId}/nodes`, { name: "peer", mode: "static", public_address: "192.0.2.50" })).json;
  const push = nextMessage(agent, p.topics.config_push!);
  await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "push_config" });
  const m = await push;
  await agent.publishAsync(p.topics.config_push_ack!, envelope(p, "ack", { status: "applied", message: "", action: "push_config" }, m.request_id), { qos: 1 });
  await eventually("latest", async () => ((await status(s, configId, nodeId)).config_version_state === "latest" ? true : undefined));
  const sse = await s.open();
  t.after(() => sse.destroy());
  const applyOf = () => sse.waitFor((f) => f.event === "node.apply.updated" && payload(f).node_id === nodeId);
  await api(s, "PATCH", `/api/v1/configs/${configId}/nodes/${peer.node_id}`, { public_address: "192.0.2.51" });
  const moved = payload(await applyOf());
  assert.equal(moved.sync_status, "pending");
  assert.equal(moved.applied, false);
  assert.notEqual(moved.preview.config_sha256, m.payload.config_sha256);
  await api(s, "PATCH", `/api/v1/configs/${configId}/nodes/${peer.node_id}`, { public_address: "192.0.2.50" });
  const back = payload(await applyOf());
  assert.equal(back.preview.config_sha256, m.payload.config_sha256, "the same text as the confirmed push");
  assert.equal(back.sync_status, "latest");
  assert.equal(back.applied, true);
});
