import assert from "node:assert/strict";
import { countStore } from "../../src/store/summary.repository.js";
import { test } from "node:test";
import { api, boundAgent, envelope, nextMessage } from "../control/agent-harness.js";
import { startSseServer, watchCommits, type CommittedCheck, type SseFrame } from "./sse-harness.js";

/**
 * spec §6.5 "Publishing points" and "Emission rules" through real HTTP and MQTT, and rule 6
 * ("events are published after database writes") checked frame by frame at the moment each frame
 * is handed to the hub, against what a second SQLite connection sees committed (see
 * {@link watchCommits}).
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- SSE payloads are checked field by field
function payload(f: SseFrame): Record<string, any> {
  return f.json.payload;
}

const byId = <T extends Record<string, unknown>>(key: keyof T) => (a: T, b: T) => String(a[key]).localeCompare(String(b[key]));

/** Each mesh frame against the rows it describes. */
const meshChecks: Partial<Record<SseFrame["json"]["type"], CommittedCheck>> = {
  "config.list.updated": (db, f) => {
    const rows = db.prepare("SELECT config_id, name FROM configs ORDER BY config_id").all();
    const sent = (f.payload.configs as Array<{ config_id: string; name: string }>).map(({ config_id, name }) => ({ config_id, name }));
    assert.deepEqual(sent.sort(byId("config_id")), rows);
  },
  "config.overview.updated": (db, f) => {
    const rows = db.prepare("SELECT node_id, name, public_address FROM nodes WHERE config_id = ? ORDER BY node_id").all(f.payload.config_id);
    const sent = (f.payload.overview.nodes as Array<{ node_id: string; name: string; public_address: string | null }>).map(
      ({ node_id, name, public_address }) => ({ node_id, name, public_address }),
    );
    assert.deepEqual(sent.sort(byId("node_id")), rows);
  },
  "node.workspace.updated": (db, f) => {
    const row = db.prepare("SELECT name, public_address FROM nodes WHERE node_id = ?").get(f.payload.node_id);
    assert.deepEqual({ name: f.payload.workspace.name, public_address: f.payload.workspace.public_address }, row);
  },
  "node.apply.updated": (db, f) => {
    const row = db.prepare("SELECT staged_config_version AS config_version, staged_config_sha256 AS config_sha256 FROM nodes WHERE node_id = ?").get(f.payload.node_id);
    assert.deepEqual(f.payload.preview, row);
  },
  "mesh.workspace.updated": (db, f) => {
    const node = db.prepare("SELECT public_address FROM nodes WHERE node_id = ?").get(f.payload.node_id);
    assert.deepEqual({ public_address: f.payload.workspace.node.public_address }, node);
    // The node's stored pairs, then its full-mesh policy pairs no row or removal takes over.
    const pairs = db
      .prepare(
        `SELECT pair_id FROM mesh_pairs WHERE node_a = :id OR node_b = :id
         UNION ALL
         SELECT printf('pair-%010d-%010d', min(n.mesh_seq, v.mesh_seq), max(n.mesh_seq, v.mesh_seq)) FROM nodes v JOIN nodes n ON n.config_id = v.config_id
          WHERE v.node_id = :id AND ((n.mesh_seq < v.mesh_seq AND v.auto_pair = 1) OR (n.mesh_seq > v.mesh_seq AND n.auto_pair = 1))
            AND NOT EXISTS (SELECT 1 FROM mesh_pairs p WHERE p.node_a = min(n.node_id, v.node_id) AND p.node_b = max(n.node_id, v.node_id))
            AND NOT EXISTS (SELECT 1 FROM mesh_pair_removals r WHERE r.node_a = min(n.node_id, v.node_id) AND r.node_b = max(n.node_id, v.node_id))
         ORDER BY pair_id`,
      )
      .all({ id: f.payload.node_id });
    const sent = (f.payload.workspace.connections as Array<{ pair_id: string }>).map(({ pair_id }) => ({ pair_id }));
    assert.deepEqual(sent.sort(byId("pair_id")), pairs);
  },
  "system.status.updated": (db, f) => {
    const count = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    assert.deepEqual(
      { configs: f.payload.summary.configs, nodes: f.payload.summary.nodes, mesh_pairs: f.payload.topology.mesh_pairs },
      { configs: count("configs"), nodes: count("nodes"), mesh_pairs: countStore(db).mesh_pairs },
    );
  },
};

test("spec §6.5 rule 6: mesh writes publish config.list, config.overview, node.workspace, node.apply, mesh.workspace (endpoint and affected peers) and system.status, each frame matching the committed rows when it is published", async (t) => {
  const s = await startSseServer(t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  await sse.waitFor((f) => f.event === "system.clock.sync");
  const watch = watchCommits(t, s, meshChecks);

  const config = await api(s, "POST", "/api/v1/configs", { name: "hq", tunnel_protocol: "wireguard", network_cidr: "10.88.0.0/24" });
  const list = await sse.waitFor((f) => f.event === "config.list.updated");
  assert.deepEqual(payload(list).configs.map((c: { config_id: string }) => c.config_id), [config.json.config_id]);
  await sse.waitFor((f) => f.event === "system.status.updated" && payload(f).summary.configs === 1);

  const a = await api(s, "POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: "a", mode: "static", public_address: "192.0.2.1" });
  const b = await api(s, "POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: "b", mode: "static", public_address: "192.0.2.2" });
  const overview = await sse.waitFor((f) => f.event === "config.overview.updated" && payload(f).overview.nodes.length === 2);
  assert.equal(payload(overview).config_id, config.json.config_id);
  assert.ok(Array.isArray(payload(overview).tags));
  const workspace = await sse.waitFor((f) => f.event === "node.workspace.updated" && payload(f).node_id === b.json.node_id);
  assert.equal(payload(workspace).workspace.name, "b");

  // b's creation re-staged both nodes (a gained a peer): node.apply for each, mesh.workspace for each.
  const seen = new Map<string, Set<string>>();
  await sse.waitFor((f) => {
    if (f.event === "node.apply.updated" || f.event === "mesh.workspace.updated") {
      const set = seen.get(f.event) ?? new Set();
      set.add(payload(f).node_id as string);
      seen.set(f.event, set);
    }
    return (seen.get("node.apply.updated")?.size ?? 0) >= 2 && (seen.get("mesh.workspace.updated")?.size ?? 0) >= 2;
  });
  assert.deepEqual([...seen.get("mesh.workspace.updated")!].sort(), [a.json.node_id, b.json.node_id].sort());

  // An endpoint change: mesh.workspace.updated for the endpoint and its peer, connections included.
  await api(s, "PATCH", `/api/v1/configs/${config.json.config_id}/nodes/${a.json.node_id}`, { public_address: "192.0.2.9" });
  const frames: SseFrame[] = [];
  await sse.waitFor((f) => {
    if (f.event === "mesh.workspace.updated") frames.push(f);
    return frames.length >= 2;
  });
  const forA = frames.find((f) => payload(f).node_id === a.json.node_id);
  assert.equal(forA && payload(forA).workspace.node.public_address, "192.0.2.9");
  const forPeer = frames.find((f) => payload(f).node_id === b.json.node_id);
  assert.ok(forPeer, "the affected peer's workspace is published too");
  const connections = payload(forPeer).workspace.connections as Array<{ integrity: { status: string } }>;
  assert.equal(connections.length, 1);
  assert.equal(connections[0]!.integrity.status, "ok");
  await sse.waitFor((f) => f.event === "system.status.updated" && payload(f).topology.mesh_pairs === 1);

  assert.deepEqual(watch.failures, [], "every frame matched the committed rows when it was published");
  for (const type of Object.keys(meshChecks)) assert.ok((watch.checked.get(type) ?? 0) > 0, `${type} was checked`);
});

test("spec §6.5 rule 6: runtime state and control log changes publish endpoint.status.updated, control.log.created and control.log.updated only after their rows committed", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  const logCheck: CommittedCheck = (db, f) => {
    const log = f.payload.log as { log_id: number; kind: string; status: string | null; message: string | null; event: string | null };
    const row = db.prepare("SELECT log_id, kind, status, message, event FROM control_logs WHERE log_id = ?").get(log.log_id);
    assert.deepEqual({ log_id: log.log_id, kind: log.kind, status: log.status, message: log.message, event: log.event }, row);
  };
  const watch = watchCommits(t, s, {
    "endpoint.status.updated": (db, f) => {
      const st = f.payload.status as { client_presence_state: string; runtime_state: string; last_reachable_at: string | null };
      const row = db.prepare("SELECT client_presence_state, runtime_state, last_reachable_at FROM node_client_state WHERE node_id = ?").get(f.payload.node_id) as {
        last_reachable_at: number | null;
      };
      assert.deepEqual(
        { client_presence_state: st.client_presence_state, runtime_state: st.runtime_state, last_reachable_at: st.last_reachable_at },
        { ...row, last_reachable_at: row.last_reachable_at === null ? null : new Date(row.last_reachable_at).toISOString() },
      );
    },
    "control.log.created": logCheck,
    "control.log.updated": logCheck,
  });

  // A passive heartbeat: client runtime state change.
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await sse.waitFor((f) => f.event === "endpoint.status.updated" && payload(f).status.client_presence_state === "online");
  // A client event: stored as a control log (spec §6.4 rule 9).
  await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "warn", event: "interface_missing", message: "svc0 is down" }), { qos: 1 });
  await sse.waitFor((f) => f.event === "control.log.created" && payload(f).log.event === "interface_missing");
  // A command: created (pending), then updated by its ACKs; the applied stop changes the runtime.
  const control = nextMessage(agent, p.topics.control!);
  const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
  assert.equal(sent.status, 202);
  const msg = await control;
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "accepted", message: "", action: "stop" }, msg.request_id), { qos: 1 });
  await sse.waitFor((f) => f.event === "control.log.updated" && payload(f).log.status === "accepted");
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "applied", message: "stopped", action: "stop" }, msg.request_id), { qos: 1 });
  await sse.waitFor((f) => f.event === "control.log.updated" && payload(f).log.status === "applied");
  await sse.waitFor((f) => f.event === "endpoint.status.updated" && payload(f).status.runtime_state === "stopped");

  assert.deepEqual(watch.failures, [], "every frame matched the committed rows when it was published");
  assert.ok((watch.checked.get("endpoint.status.updated") ?? 0) >= 2);
  assert.ok((watch.checked.get("control.log.created") ?? 0) >= 2, "the event and the command");
  assert.ok((watch.checked.get("control.log.updated") ?? 0) >= 2);
});

test("with no subscriber, mesh writes generate nothing (spec §6.5 rule 5)", async (t) => {
  const s = await startSseServer(t);
  const before = s.hub.metrics();
  const config = await api(s, "POST", "/api/v1/configs", { name: "quiet", tunnel_protocol: "wireguard", network_cidr: "10.89.0.0/24" });
  await api(s, "POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: "a", mode: "static" });
  const after = s.hub.metrics();
  assert.equal(after.lastEventId, before.lastEventId);
  assert.equal(after.published, before.published);
});

test("a node's config download publishes node.apply.updated for it (its staged version, static), after the download is recorded", async (t) => {
  const s = await startSseServer(t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  await sse.waitFor((f) => f.event === "system.clock.sync");
  const config = await api(s, "POST", "/api/v1/configs", { name: "dl", tunnel_protocol: "wireguard", network_cidr: "10.89.0.0/24" });
  const node = await api(s, "POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: "a", mode: "static", public_address: "192.0.2.1" });
  // The node's creation ends with the system status: every frame of it is taken before the download.
  await sse.waitFor((f) => f.event === "system.status.updated" && payload(f).summary.nodes === 1);
  const staged = (await api(s, "GET", `/api/v1/configs/${config.json.config_id}/nodes/${node.json.node_id}/config`)).json;
  const grant = (await api(s, "POST", `/api/v1/configs/${config.json.config_id}/nodes/${node.json.node_id}/download-token`)).json;

  const res = await fetch(new URL(grant.download_path, s.baseUrl));
  assert.equal(res.status, 200);
  const frame = await sse.waitFor((f) => f.event === "node.apply.updated" && payload(f).node_id === node.json.node_id);
  assert.deepEqual(payload(frame), {
    config_id: config.json.config_id,
    node_id: node.json.node_id,
    sync_status: "static",
    preview: { config_version: staged.config_version, config_sha256: staged.config_sha256 },
    applied: false,
  });
  // The frame is sent after the download is recorded: the staged config answer already says so.
  const after = (await api(s, "GET", `/api/v1/configs/${config.json.config_id}/nodes/${node.json.node_id}/config`)).json;
  assert.equal(after.last_download.config_version, staged.config_version);
});
