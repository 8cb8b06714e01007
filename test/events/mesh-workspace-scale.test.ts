import assert from "node:assert/strict";
import { test } from "node:test";
import { api } from "../control/agent-harness.js";
import { startSseServer, type SseClient, type SseFrame } from "./sse-harness.js";

/**
 * Workspace events at scale: `mesh.workspace.updated` is published for the endpoint a
 * write changed and for its affected peers (spec §6.5 emission rules), in work linear in what
 * changed (docs/history/decisions-2026.md "pairs and workspace events at scale"): the endpoint's
 * event carries all its connections and every node; a peer's event carries its connections with
 * that endpoint and the nodes they name, not the whole mesh again. Real HTTP, real SQLite, a real
 * SSE stream; the frames of one write are read up to its `system.status.updated` (the notifier's last).
 */

type Payload = {
  node_id: string;
  workspace: { node: { node_id: string }; connections: Array<{ pair_id: string; node_a: string; node_b: string; integrity: { status: string } }> };
  nodes: Array<{ node_id: string }>;
};

async function framesOfWrite(sse: SseClient): Promise<SseFrame[]> {
  const frames: SseFrame[] = [];
  await sse.waitFor((f) => {
    frames.push(f);
    return f.event === "system.status.updated";
  });
  return frames;
}

const meshEvents = (frames: SseFrame[]) =>
  new Map(frames.filter((f) => f.event === "mesh.workspace.updated").map((f) => [(f.json.payload as Payload).node_id, f.json.payload as Payload]));

test("spec §6.5 emission rules at scale: a node joining a full mesh of 50 (staged lazily) publishes its workspace with all 50 connections and every node, and each peer's with its one new connection and the two nodes it names", async (t) => {
  const s = await startSseServer(t);
  const cid = (await api(s, "POST", "/api/v1/configs", { name: "big", tunnel_protocol: "wireguard", network_cidr: "10.70.0.0/24" })).json.config_id as string;
  const peers: string[] = [];
  for (let i = 0; i < 50; i++) {
    peers.push((await s.server.mesh.createNode(cid, { name: `p${i}`, mode: "static", public_address: `192.0.2.${i + 1}` })).node_id);
  }
  const sse = await s.open();
  t.after(() => sse.destroy());
  await sse.waitFor((f) => f.event === "system.clock.sync");

  const created = await api(s, "POST", `/api/v1/configs/${cid}/nodes`, { name: "new", mode: "static" });
  assert.equal(created.status, 201);
  const newId = created.json.node_id as string;
  const events = meshEvents(await framesOfWrite(sse));
  assert.deepEqual([...events.keys()].sort(), [newId, ...peers].sort(), "the endpoint and every affected peer, once each");
  const own = events.get(newId)!;
  assert.equal(own.workspace.connections.length, 50, "the endpoint's connections: all of them");
  assert.ok(own.workspace.connections.every((p) => p.integrity.status === "ok"));
  assert.equal(own.nodes.length, 51, "the endpoint's event: every node of the config");
  for (const peer of peers) {
    const e = events.get(peer)!;
    assert.equal(e.workspace.node.node_id, peer);
    assert.equal(e.workspace.connections.length, 1, "a peer's event: its connection with the endpoint written");
    const [c] = e.workspace.connections;
    assert.deepEqual([c!.node_a, c!.node_b].sort(), [peer, newId].sort());
    assert.equal(c!.integrity.status, "ok", "with its committed integrity");
    assert.deepEqual(e.nodes.map((n) => n.node_id).sort(), [peer, newId].sort(), "a peer's event names the nodes of its connections, not the whole mesh");
  }
});

test("spec §6.5 emission rules: a mesh pair no side can initiate (no config changes) still publishes both ends' workspaces with the broken integrity; a protocol switch (no endpoint, no pair changed) publishes none", async (t) => {
  const s = await startSseServer(t);
  const cid = (await api(s, "POST", "/api/v1/configs", { name: "nat", tunnel_protocol: "wireguard", network_cidr: "10.71.0.0/24" })).json.config_id as string;
  const a = (await s.server.mesh.createNode(cid, { name: "a", mode: "static", auto_pair: false })).node_id;
  const b = (await s.server.mesh.createNode(cid, { name: "b", mode: "static", auto_pair: false })).node_id;
  const sse = await s.open();
  t.after(() => sse.destroy());
  await sse.waitFor((f) => f.event === "system.clock.sync");

  const pair = await api(s, "POST", `/api/v1/configs/${cid}/mesh-pairs`, { node_a: a, node_b: b });
  assert.equal(pair.status, 201);
  const events = meshEvents(await framesOfWrite(sse));
  assert.deepEqual([...events.keys()].sort(), [a, b].sort(), "spec §6.5: a mesh pair change publishes both ends");
  for (const e of events.values()) {
    assert.deepEqual(e.workspace.connections.map((p) => [p.pair_id, p.integrity.status]), [[pair.json.pair_id, "broken"]], "the broken-link indicator comes from the event");
  }

  assert.equal((await api(s, "PATCH", `/api/v1/configs/${cid}`, { tunnel_protocol: "awg_2" })).status, 200);
  const frames = await framesOfWrite(sse);
  assert.equal(meshEvents(frames).size, 0, "nothing of the mesh workspace changed");
  assert.ok(frames.some((f) => f.event === "config.overview.updated"), "the write was reported");
});

test("spec §6.5 emission rules at scale: deleting a node of a full mesh of 50 (its peers staged lazily) publishes each peer's workspace, with no connection left to the deleted node", async (t) => {
  const s = await startSseServer(t);
  const cid = (await api(s, "POST", "/api/v1/configs", { name: "del", tunnel_protocol: "wireguard", network_cidr: "10.72.0.0/24" })).json.config_id as string;
  const ids: string[] = [];
  for (let i = 0; i < 50; i++) ids.push((await s.server.mesh.createNode(cid, { name: `p${i}`, mode: "static", public_address: `192.0.2.${i + 1}` })).node_id);
  const sse = await s.open();
  t.after(() => sse.destroy());
  await sse.waitFor((f) => f.event === "system.clock.sync");

  const [gone, ...peers] = ids;
  assert.equal((await api(s, "DELETE", `/api/v1/configs/${cid}/nodes/${gone}`)).status, 204);
  const events = meshEvents(await framesOfWrite(sse));
  assert.deepEqual([...events.keys()].sort(), [...peers].sort(), "every peer that lost its pair, once each");
  for (const e of events.values()) {
    assert.deepEqual(e.workspace.connections, [], "its connections with the deleted node: none left");
    assert.deepEqual(e.nodes.map((n) => n.node_id), [e.node_id]);
  }
});
