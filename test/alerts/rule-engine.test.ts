/**
 * The rule engine's decisions (docs/alerts.md "Rules"), driven through its own entry points over
 * the real service and store: which rules a node's scope matches (config, tag, node), the
 * sync-stuck hold-off and its resolution, the backend's broker link, a commit without a
 * transition costing nothing, and a fault of the engine never failing the write it rides on.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { NodeProjection } from "../../src/actors/projection.js";
import { createLogger } from "../../src/logger.js";
import { AlertRuleEngine } from "../../src/services/alerts/rule-engine.js";
import { sqliteOf } from "../../src/store/connection.js";
import { advance, createChannel, startAlerts, startReceiver, until, type AlertsHarness } from "./harness.js";

const WINDOW_MS = 30_000;

const projection = (p: Partial<NodeProjection>): NodeProjection => ({
  mode: "dynamic", clientInitialized: true, presence: "online", runtime: "running", bindToken: "used", sync: "latest",
  lastReachableAt: null, lastSignalAt: null, clientVersion: "1.2.3", confirmedVersion: 1, confirmedSha: null, confirmedProtocol: null, stagedVersion: 1, stagedSha: null, ...p,
});

async function mesh(h: AlertsHarness) {
  const node = async (configId: string, name: string, tags: string[]) => {
    const res = await h.req("POST", `/api/v1/configs/${configId}/nodes`, { name, mode: "static", tags });
    assert.equal(res.status, 201, res.text);
    return { configId, nodeId: res.json.node_id as string };
  };
  const cfg = async (name: string, cidr: string) => (await h.req("POST", "/api/v1/configs", { name, tunnel_protocol: "wireguard", network_cidr: cidr })).json.config_id as string;
  const a = await cfg("a", "10.61.0.0/24");
  const b = await cfg("b", "10.62.0.0/24");
  return { edge: await node(a, "edge", ["edge"]), core: await node(a, "core", []), far: await node(b, "far", ["edge"]) };
}

/** Runs the engine's hook as the group commit does: inside a write, then what it answers after. */
function commit(h: AlertsHarness, changes: Parameters<AlertRuleEngine["nodeChanges"]>[0]): boolean {
  const after = h.server.alertEngine.nodeChanges(changes);
  after?.();
  return after !== undefined;
}

test("scope: a rule covers the nodes of its config, carrying its tag, or that node; an empty scope covers all", async (t) => {
  const h = await startAlerts(t);
  const rx = await startReceiver(t);
  const { edge, core, far } = await mesh(h);
  const rules: Array<[string, Record<string, string>]> = [["all", {}], ["config", { config_id: edge.configId }], ["tag", { tag: "edge" }], ["node", { node_id: core.nodeId }]];
  const channelOf: Record<string, string> = {};
  for (const [name, scope] of rules) {
    channelOf[name] = (await createChannel(h, { name, kind: "webhook", url: `${rx.url}?${name}` })).channel_id;
    assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name, event: "node.dropped", scope, channel_ids: [channelOf[name]] })).status, 201);
  }
  const drop = (n: { configId: string; nodeId: string }) => commit(h, [{ ...n, before: projection({}), after: projection({ presence: "dropped" }) }]);
  const reached = async () => {
    const items = (await h.req("GET", "/api/v1/alerts/deliveries?limit=100")).json.items as Array<{ channel_id: string; type: string }>;
    return Object.entries(channelOf).filter(([, id]) => items.some((d) => d.channel_id === id && d.type === "node.dropped")).map(([name]) => name).sort();
  };
  assert.ok(drop(far));
  assert.deepEqual(await reached(), ["all", "tag"]);
  assert.ok(drop(core));
  assert.deepEqual(await reached(), ["all", "config", "node", "tag"]);
  await until(() => rx.received.length === 4, "each channel's first alert at once");
  assert.ok(!commit(h, [{ ...edge, before: projection({ lastSignalAt: 1 }), after: projection({ lastSignalAt: 2, runtime: "stopped" }) }]), "no presence or sync transition: nothing written");
  assert.ok(!commit(h, [{ ...edge, before: undefined, after: projection({ presence: "offline" }) }]), "a node's first projection is never an alert");
});

test("node.sync_stuck: pending while online for for_s alerts; applied, the resolved message names it; pending shorter sends nothing", async (t) => {
  const h = await startAlerts(t);
  const rx = await startReceiver(t);
  const { edge } = await mesh(h);
  const ch = await createChannel(h, { name: "sync", kind: "webhook", url: rx.url });
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "stuck", event: "node.sync_stuck", for_s: 600, channel_ids: [ch.channel_id] })).status, 201);
  commit(h, [{ ...edge, before: projection({}), after: projection({ sync: "pending" }) }]);
  await advance(h, 300_000);
  commit(h, [{ ...edge, before: projection({ sync: "pending" }), after: projection({}) }]);
  await advance(h, 600_000);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 0, "applied within for_s: nothing");

  commit(h, [{ ...edge, before: projection({}), after: projection({ sync: "pending" }) }]);
  await advance(h, 600_000);
  await until(() => rx.received.length === 1, "node.sync_stuck");
  const stuck = JSON.parse(rx.received[0]?.body ?? "{}");
  assert.deepEqual([stuck.type, stuck.data.node_id, stuck.data.node_name], ["node.sync_stuck", edge.nodeId, "edge"]);
  commit(h, [{ ...edge, before: projection({ sync: "pending" }), after: projection({ sync: "pending", presence: "offline" }) }]);
  await advance(h, WINDOW_MS);
  await until(() => rx.received.length === 2, "resolved");
  const resolved = JSON.parse(rx.received[1]?.body ?? "{}");
  assert.deepEqual([resolved.type, resolved.data.resolves], ["node.sync_stuck.resolved", stuck.data.alert_id]);
});

test("broker.disconnected: the backend's broker link down alerts at once; back, broker.connected resolves it", async (t) => {
  const h = await startAlerts(t);
  const rx = await startReceiver(t);
  const ch = await createChannel(h, { name: "broker", kind: "webhook", url: rx.url });
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "link", event: "broker.disconnected", channel_ids: [ch.channel_id] })).status, 201);
  let up = true;
  // A second engine over the service's store and events, with a broker link the test moves.
  const engine = new AlertRuleEngine({ store: h.server.store, clock: h.clock, log: createLogger("silent"), events: h.server.events, groupWindowMs: WINDOW_MS, brokerConnected: () => up });
  engine.start();
  t.after(() => engine.stop());
  up = false;
  h.server.events.emit("broker.connection_changed");
  await until(() => rx.received.length === 1, "broker.disconnected");
  const down = JSON.parse(rx.received[0]?.body ?? "{}");
  assert.equal(down.type, "broker.disconnected");
  h.server.events.emit("broker.connection_changed"); // no change: nothing more
  up = true;
  h.server.events.emit("broker.connection_changed");
  await advance(h, WINDOW_MS);
  await until(() => rx.received.length === 2, "broker.connected");
  const back = JSON.parse(rx.received[1]?.body ?? "{}");
  assert.deepEqual([back.type, back.data.resolves], ["broker.connected", down.data.alert_id]);
});

test("a fault of the engine rolls back its own alerts only: the write it rides on commits, the fault is logged", async (t) => {
  const h = await startAlerts(t);
  const { edge } = await mesh(h);
  const ch = await createChannel(h, { name: "x", kind: "webhook", url: "http://127.0.0.1:9/" });
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "down", event: "node.offline", for_s: 5, channel_ids: [ch.channel_id] })).status, 201);
  const sqlite = sqliteOf(h.server.store);
  sqlite.exec("DROP TABLE alert_open"); // every open alert now fails to be written
  let after: (() => void) | undefined;
  await h.server.store.whenIdle(() =>
    sqlite.transaction(() => {
      sqlite.prepare("UPDATE nodes SET name = 'renamed' WHERE node_id = ?").run(edge.nodeId);
      after = h.server.alertEngine.nodeChanges([{ ...edge, before: projection({}), after: projection({ presence: "offline" }) }]);
    })(),
  );
  assert.equal(after, undefined);
  assert.equal((sqlite.prepare("SELECT name FROM nodes WHERE node_id = ?").get(edge.nodeId) as { name: string }).name, "renamed");
  assert.ok(h.logs.some((l) => l.includes("the change's alerts were not written")));
});

test("mesh.pair_broken: a write that leaves a pair with no side able to initiate alerts with the reason; fixed, the resolved message names it", async (t) => {
  const h = await startAlerts(t);
  const rx = await startReceiver(t);
  const cfg = (await h.req("POST", "/api/v1/configs", { name: "pairs", tunnel_protocol: "wireguard", network_cidr: "10.63.0.0/24" })).json.config_id;
  const a = (await h.req("POST", `/api/v1/configs/${cfg}/nodes`, { name: "gateway", mode: "static", public_address: "192.0.2.10", listen_port: 51820 })).json.node_id;
  const b = (await h.req("POST", `/api/v1/configs/${cfg}/nodes`, { name: "laptop", mode: "static" })).json.node_id;
  const ch = await createChannel(h, { name: "mesh", kind: "webhook", url: rx.url });
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "pairs", event: "mesh.pair_broken", scope: { config_id: cfg }, channel_ids: [ch.channel_id] })).status, 201);
  const pairs = (await h.req("GET", `/api/v1/configs/${cfg}/mesh-pairs`)).json.mesh_pairs;
  assert.equal(pairs.length, 1, "a new node joins the mesh");
  const pair = { json: pairs[0] };
  assert.deepEqual([pair.json.node_a, pair.json.node_b].sort(), [a, b].sort());
  assert.equal(pair.json.integrity.status, "ok");
  assert.equal((await h.req("PATCH", `/api/v1/configs/${cfg}/nodes/${a}`, { public_address: null })).status, 200);
  await until(() => rx.received.length === 1, "mesh.pair_broken");
  const broken = JSON.parse(rx.received[0]?.body ?? "{}");
  assert.equal(broken.type, "mesh.pair_broken");
  assert.deepEqual([broken.data.pair_id, broken.data.config_id], [pair.json.pair_id, cfg]);
  assert.match(broken.data.reason, /neither node has a public address/);
  assert.deepEqual([broken.data.node_a, broken.data.node_b], [pair.json.node_a, pair.json.node_b]);
  assert.equal((await h.req("PATCH", `/api/v1/configs/${cfg}/nodes/${a}`, { name: "gateway-2" })).status, 200);
  await advance(h, WINDOW_MS);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 1, "still broken: no second alert");
  assert.equal((await h.req("PATCH", `/api/v1/configs/${cfg}/nodes/${a}`, { public_address: "192.0.2.10" })).status, 200);
  await advance(h, WINDOW_MS);
  await until(() => rx.received.length === 2, "resolved");
  const fixed = JSON.parse(rx.received[1]?.body ?? "{}");
  assert.deepEqual([fixed.type, fixed.data.resolves], ["mesh.pair_broken.resolved", broken.data.alert_id]);
});

test("a node deleted while its alert is held: the alert closes without a message", async (t) => {
  const h = await startAlerts(t);
  const rx = await startReceiver(t);
  const { edge, core } = await mesh(h);
  const ch = await createChannel(h, { name: "gone", kind: "webhook", url: rx.url });
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "down", event: "node.offline", for_s: 60, channel_ids: [ch.channel_id] })).status, 201);
  for (const n of [edge, core]) commit(h, [{ ...n, before: projection({}), after: projection({ presence: "offline" }) }]);
  assert.equal((await h.req("DELETE", `/api/v1/configs/${edge.configId}/nodes/${edge.nodeId}`)).status, 204);
  await new Promise((r) => setTimeout(r, 20));
  await advance(h, 60_000);
  await until(() => rx.received.length === 1, "the remaining node's alert");
  await advance(h, WINDOW_MS); // a second alert would have waited for the channel's window
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 1);
  assert.equal(JSON.parse(rx.received[0]?.body ?? "{}").data.node_id, core.nodeId);
});
