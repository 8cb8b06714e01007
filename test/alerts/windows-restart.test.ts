/**
 * Group windows across a backend restart (docs/alerts.md "Storms"): the notices waiting in a
 * window are stored, so a restart on the same database and clock neither loses nor repeats them;
 * they leave once, when the window ends (at start-up when it ended while the service was down),
 * behind nothing that came after them; alerts written while the engine stops still wait as notices.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { NodeProjection } from "../../src/actors/projection.js";
import { createLogger } from "../../src/logger.js";
import type { AlertMessage } from "../../src/protocol/alerts.schema.js";
import { AlertRuleEngine } from "../../src/services/alerts/rule-engine.js";
import { advance, createChannel, startAlerts, startReceiver, until, type AlertsHarness } from "./harness.js";

const WINDOW_MS = 30_000;

const projection = (presence: NodeProjection["presence"]): NodeProjection => ({
  mode: "dynamic", clientInitialized: true, presence, runtime: "running", bindToken: "used", sync: "latest",
  lastReachableAt: null, lastSignalAt: null, clientVersion: "1.2.3", confirmedVersion: 1, confirmedSha: null, confirmedProtocol: null, stagedVersion: 1, stagedSha: null,
});

type Node = { configId: string; nodeId: string };
/** A node's presence changes as a group commit reports it, through `engine`. */
const goes = (engine: AlertRuleEngine, n: Node, from: NodeProjection["presence"], to: NodeProjection["presence"]) =>
  engine.nodeChanges([{ ...n, before: projection(from), after: projection(to) }])?.();

const settle = () => new Promise((r) => setTimeout(r, 60));
/**
 * Waits until `n` deliveries are recorded as delivered: stopping aborts an attempt still in
 * flight, unrecorded, and the next start sends it again.
 */
const delivered = (h: AlertsHarness, n: number) =>
  until(async () => ((await h.req("GET", "/api/v1/alerts/deliveries")).json.items as Array<{ status: string }>).filter((d) => d.status === "delivered").length === n, `${n} deliveries recorded`);

test("a group window's notices survive a restart: sent once when the window ends, in order; a window that ended while down sends at start", async (t) => {
  const h = await startAlerts(t);
  const rx = await startReceiver(t);
  const cfg = (await h.req("POST", "/api/v1/configs", { name: "w", tunnel_protocol: "wireguard", network_cidr: "10.66.0.0/24" })).json.config_id as string;
  const nodes: Node[] = [];
  for (const name of ["n1", "n2", "n3"]) nodes.push({ configId: cfg, nodeId: (await h.req("POST", `/api/v1/configs/${cfg}/nodes`, { name, mode: "static" })).json.node_id });
  const [n1, n2, n3] = nodes as [Node, Node, Node];
  const ch = await createChannel(h, { name: "ops", kind: "webhook", url: rx.url });
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "down", event: "node.offline", channel_ids: [ch.channel_id] })).status, 201);
  const bodies = () => rx.received.map((r) => JSON.parse(r.body) as AlertMessage);

  goes(h.server.alertEngine, n1, "online", "offline"); // opens the window at T0
  await until(() => rx.received.length === 1, "the window's first alert");
  await delivered(h, 1);
  await advance(h, 10_000);
  goes(h.server.alertEngine, n2, "online", "offline");
  // Shutting down: the engine stops before the actors' last group commit, which still alerts.
  h.server.alertEngine.stop();
  goes(h.server.alertEngine, n3, "online", "offline");

  let h2: AlertsHarness = await h.restart(); // T0 + 10 s: the window has 20 s to go
  // What a new engine commits before its start waits behind the stored notices.
  const early = new AlertRuleEngine({ store: h2.server.store, clock: h2.clock, log: createLogger("silent"), events: h2.server.events, groupWindowMs: WINDOW_MS, brokerConnected: () => true });
  goes(early, n2, "offline", "online");
  await settle();
  assert.equal(rx.received.length, 1, "nothing leaves before the window ends");
  await advance(h2, 19_000);
  await settle();
  assert.equal(rx.received.length, 1);
  await advance(h2, 1_000);
  await until(() => rx.received.length === 2, "the grouped message at the window's end");
  const grouped = bodies()[1];
  assert.equal(grouped?.type, "alert.grouped");
  const listed = (grouped?.data.first as AlertMessage[]).map((m) => [m.type, m.data.node_id]);
  assert.deepEqual(listed, [["node.offline", n2.nodeId], ["node.offline", n3.nodeId], ["node.online", n2.nodeId]]);
  await delivered(h2, 2);

  // A window that ends while the service is down: its notices leave as the next run starts.
  goes(h2.server.alertEngine, n1, "offline", "online"); // a notice of the window the grouped message opened
  await h2.server.close();
  h2.clock.advance(3 * WINDOW_MS);
  h2 = await startAlerts(t, {}, {}, { dataDir: h.dataDir, clock: h.clock, logs: h.logs });
  await until(() => rx.received.length === 3, "the stored notice at start");
  assert.deepEqual([bodies()[2]?.type, bodies()[2]?.data.node_id], ["node.online", n1.nodeId]);
  await advance(h2, 2 * WINDOW_MS);
  await settle();
  assert.equal(rx.received.length, 3, "each sent once");
  assert.equal(new Set(rx.received.map((r) => r.headers["webhook-id"])).size, 3);
});
