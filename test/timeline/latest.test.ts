import assert from "node:assert/strict";
import { test } from "node:test";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { api, bind, connectAgent, dynamicNode, envelope, eventually, status } from "../control/agent-harness.js";

/**
 * Watching a whole config: `GET /api/v1/configs/{config_id}/timeline/latest`
 * answers the newest flight-recorder row of each node of the config. Real service over real
 * HTTP, real SQLite file, the embedded aedes broker on port 0, an MQTT.js client as the agent,
 * a ManualClock.
 */

type Row = { node_id: string; transition_id: number; event: string; source: string; after: Record<string, string> };

async function latest(s: SseServer, configId: string): Promise<Row[]> {
  const res = await api(s, "GET", `/api/v1/configs/${configId}/timeline/latest`);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json.transitions;
}

async function newest(s: SseServer, configId: string, nodeId: string): Promise<Row> {
  const res = await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/timeline?limit=1`);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return { node_id: nodeId, ...res.json.transitions[0] };
}

test("spec §3.1 §6.4 rule 3: /timeline/latest answers exactly one row per node of the config, the newest, and none of another config", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId: bound } = await dynamicNode(s);
  s.clock.advance(1000);
  const second = await api(s, "POST", `/api/v1/configs/${configId}/nodes`, { name: "quiet", mode: "dynamic", public_address: "192.0.2.8" });
  assert.equal(second.status, 201, JSON.stringify(second.json));
  const quiet: string = second.json.node_id;
  // Another config's node, with newer rows than any of the first config's.
  const other = await dynamicNode(s);

  s.clock.advance(1000);
  const p = await bind(s, configId, bound);
  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  s.clock.advance(1000);
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("online", async () => ((await status(s, configId, bound)).client_presence_state === "online" ? true : undefined));
  s.clock.advance(1000);
  await bind(s, other.configId, other.nodeId);

  const rows = await latest(s, configId);
  assert.deepEqual(rows.map((r) => r.node_id).sort(), [bound, quiet].sort(), "one row per node of this config, no other config's node");
  const byNode = new Map(rows.map((r) => [r.node_id, r]));
  for (const nodeId of [bound, quiet]) {
    const expected = await newest(s, configId, nodeId);
    assert.deepEqual(byNode.get(nodeId), expected, `the newest row of ${nodeId}`);
  }
  assert.equal(byNode.get(bound)?.event, "mqtt.signal");
  assert.equal(byNode.get(bound)?.source, "heartbeat");
  assert.equal(byNode.get(bound)?.after.presence, "online.fresh");

  const otherRows = await latest(s, other.configId);
  assert.deepEqual(otherRows.map((r) => [r.node_id, r.event]), [[other.nodeId, "client.bound"]]);
});

test("/timeline/latest of an unknown config answers NOT_FOUND; without a token 401", async (t) => {
  const s = await startSseServer(t);
  const { configId } = await dynamicNode(s);
  const res = await api(s, "GET", "/api/v1/configs/cf_00000000000000000000000000/timeline/latest");
  assert.equal(res.status, 404);
  assert.equal(res.json.error.code, "NOT_FOUND");
  const anonymous = await api(s, "GET", `/api/v1/configs/${configId}/timeline/latest`, undefined, false);
  assert.equal(anonymous.status, 401, "admin auth");
});
