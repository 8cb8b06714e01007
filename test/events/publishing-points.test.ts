import assert from "node:assert/strict";
import { test } from "node:test";
import { api } from "../control/agent-harness.js";
import { startSseServer, type SseFrame } from "./sse-harness.js";

/** spec §6.5 "Publishing points" and "Emission rules" for mesh writes, through real HTTP. */

function payload(f: SseFrame): Record<string, any> {
  return f.json.payload;
}

test("mesh writes publish config.list, config.overview, node.workspace, node.apply, mesh.workspace (endpoint and affected peers) and system.status, after the write (spec §6.5)", async (t) => {
  const s = await startSseServer(t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  await sse.waitFor((f) => f.event === "system.clock.sync");

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
  const forPeer = frames.find((f) => payload(f).node_id === b.json.node_id);
  assert.ok(forPeer, "the affected peer's workspace is published too");
  const connections = payload(forPeer).workspace.connections as Array<{ integrity: { status: string } }>;
  assert.equal(connections.length, 1);
  assert.equal(connections[0]!.integrity.status, "ok");
  // Published after the write: the row already holds the new endpoint.
  const row = s.server.store.sqlite.prepare("SELECT public_address FROM nodes WHERE node_id = ?").get(a.json.node_id);
  assert.deepEqual(row, { public_address: "192.0.2.9" });
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
