/**
 * Alerts whose subject goes away or changed unseen (docs/alerts.md "Rules"): a node, its pairs or
 * its config deleted, and a snapshot restore, close their open alerts in the same transaction
 * (fired ones with `alert.subject_removed`, held ones silently and never firing later); a pair
 * that broke while the backend was down, or before its rule existed, alerts at start-up and when
 * the rule is created or enabled. Fired and resolved alerts are counted by event (`/metrics`).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import SQLite from "better-sqlite3";
import type { NodeProjection } from "../../src/actors/projection.js";
import type { AlertMessage } from "../../src/protocol/alerts.schema.js";
import { sqliteOf } from "../../src/store/connection.js";
import { advance, createChannel, startAlerts, until, type AlertsHarness } from "./harness.js";

const projection = (p: Partial<NodeProjection>): NodeProjection => ({
  mode: "dynamic", clientInitialized: true, presence: "online", runtime: "running", bindToken: "used", sync: "latest",
  lastReachableAt: null, lastSignalAt: null, clientVersion: "1.2.3", confirmedVersion: 1, confirmedSha: null, confirmedProtocol: null, stagedVersion: 1, stagedSha: null, ...p,
});

/** Runs the engine's hook as the group commit does. */
function goes(h: AlertsHarness, n: { configId: string; nodeId: string }, presence: "offline" | "dropped"): void {
  h.server.alertEngine.nodeChanges([{ ...n, before: projection({}), after: projection({ presence }) }])?.();
}

/** Every message the engine wrote for a channel, in order: its deliveries (a grouped one as what it lists), then the notices waiting for its window. */
function said(h: AlertsHarness, channelId: string): AlertMessage[] {
  const sqlite = sqliteOf(h.server.store);
  const sent = sqlite.prepare("SELECT message FROM alert_deliveries WHERE channel_id = ? ORDER BY created_at, rowid").all(channelId) as Array<{ message: string }>;
  const waiting = sqlite.prepare("SELECT message FROM alert_notices WHERE channel_id = ? ORDER BY notice_id").all(channelId) as Array<{ message: string }>;
  return [...sent, ...waiting].flatMap((r) => {
    const m = JSON.parse(r.message) as AlertMessage;
    // A grouped delivery lists the notices it took (all of them: fewer than its list's cap here).
    return m.type === "alert.grouped" ? (m.data.first as AlertMessage[]) : [m];
  });
}

function open(h: AlertsHarness): Array<{ event: string; subject: string; fired_at: number | null }> {
  return sqliteOf(h.server.store).prepare("SELECT event, subject, fired_at FROM alert_open ORDER BY event, subject").all() as never;
}

async function node(h: AlertsHarness, configId: string, name: string, pub: boolean) {
  const res = await h.req("POST", `/api/v1/configs/${configId}/nodes`, { name, mode: "static", ...(pub ? { public_address: "192.0.2.10", listen_port: 51820 } : {}) });
  assert.equal(res.status, 201, res.text);
  return { configId, nodeId: res.json.node_id as string };
}

const config = async (h: AlertsHarness, name: string, cidr: string) => (await h.req("POST", "/api/v1/configs", { name, tunnel_protocol: "wireguard", network_cidr: cidr })).json.config_id as string;

test("a removed subject's open alerts close with the removal: fired ones with alert.subject_removed, held ones silently and never fire", async (t) => {
  const h = await startAlerts(t);
  const a = await config(h, "a", "10.64.0.0/24");
  const b = await config(h, "b", "10.65.0.0/24");
  const gw = await node(h, a, "gw", true);
  const lap = await node(h, a, "lap", false);
  const far = await node(h, b, "far", false);
  const snap = await h.req("POST", "/api/v1/backups");
  assert.equal(snap.status, 201, snap.text);
  const ch = (await createChannel(h, { name: "ops", kind: "webhook", url: "http://127.0.0.1:9/hook" })).channel_id as string;
  for (const [name, event, for_s] of [["pairs", "mesh.pair_broken", 0], ["down", "node.offline", 0], ["slow", "node.dropped", 60]] as const) {
    assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name, event, for_s, channel_ids: [ch] })).status, 201);
  }
  assert.equal((await h.req("PATCH", `/api/v1/configs/${a}/nodes/${gw.nodeId}`, { public_address: null })).status, 200);
  await until(() => open(h).some((r) => r.event === "mesh.pair_broken"), "the pair's alert");
  goes(h, lap, "offline");
  goes(h, far, "dropped");
  goes(h, gw, "dropped");
  const fired = said(h, ch);
  assert.deepEqual(fired.map((m) => m.type), ["mesh.pair_broken", "node.offline"]);

  // The node goes: its alert and its pair's close in the deletion's transaction, each said once.
  assert.equal((await h.req("DELETE", `/api/v1/configs/${a}/nodes/${lap.nodeId}`)).status, 204);
  assert.deepEqual(open(h).map((r) => [r.event, r.subject]), [far.nodeId, gw.nodeId].sort().map((id) => ["node.dropped", id]));
  const removed = said(h, ch).slice(2);
  const byId = (x: unknown[], y: unknown[]) => (String(x[1]) < String(y[1]) ? -1 : 1);
  assert.deepEqual(removed.map((m) => [m.type, String(m.data.resolves), m.data.removed]).sort(byId), fired.map((m) => ["alert.subject_removed", String(m.data.alert_id), "deleted"]).sort(byId));
  const titles = removed.map((m) => m.title).sort();
  assert.match(titles[0] ?? "", /^Resolved: mesh pair (gw ↔ lap|lap ↔ gw) was deleted$/);
  assert.equal(titles[1], "Resolved: node lap was deleted");

  // The config goes with its node's held alert: nothing said, and nothing fires when it falls due.
  assert.equal((await h.req("DELETE", `/api/v1/configs/${b}`)).status, 204);
  assert.deepEqual(open(h).map((r) => r.subject), [gw.nodeId]);
  await advance(h, 60_000);
  await until(() => open(h)[0]?.fired_at !== null, "gw's held alert fires");
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(said(h, ch).slice(4).map((m) => [m.type, m.data.node_id]), [["node.dropped", gw.nodeId]], "far's held alert never fired");

  // A restore replaces every node: what was open closes, said as restored.
  assert.equal((await h.req("POST", `/api/v1/backups/${snap.json.snapshot_id}/restore`)).status, 200);
  assert.deepEqual(open(h), []);
  assert.deepEqual(said(h, ch).slice(5).map((m) => [m.type, m.data.node_id, m.data.removed]), [["alert.subject_removed", gw.nodeId, "restored"]]);

  // Counted by rule event: each fired once and resolved once (held ones that never fired: neither).
  const counts = async (name: string) => {
    const values = (await h.server.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
    return Object.fromEntries(values.map((v) => [String(v.labels.event), v.value]));
  };
  const each = { "mesh.pair_broken": 1, "node.dropped": 1, "node.offline": 1 };
  assert.deepEqual(await counts("svc_alert_fired_total"), each);
  assert.deepEqual(await counts("svc_alert_resolved_total"), each);
});

test("pairs broken before their rule, or healed and broken while the backend was down, are rechecked: on the rule's creation and at start-up; a deleted pair's alert closes", async (t) => {
  let h = await startAlerts(t);
  const a = await config(h, "a", "10.67.0.0/24");
  const gw = await node(h, a, "gw", true);
  const lap = await node(h, a, "lap", false);
  await node(h, a, "pub", true);
  const ch = (await createChannel(h, { name: "ops", kind: "webhook", url: "http://127.0.0.1:9/hook" })).channel_id as string;
  assert.equal((await h.req("PATCH", `/api/v1/configs/${a}/nodes/${gw.nodeId}`, { public_address: null })).status, 200);
  assert.deepEqual(open(h), [], "no rule yet");

  const rule = await h.req("POST", "/api/v1/alerts/rules", { name: "pairs", event: "mesh.pair_broken", channel_ids: [ch] });
  assert.equal(rule.status, 201);
  await until(() => open(h).length === 1, "the pair broken before the rule");
  assert.deepEqual(said(h, ch).map((m) => [m.type, [m.data.node_a, m.data.node_b].sort()]), [["mesh.pair_broken", [gw.nodeId, lap.nodeId].sort()]]);

  // Healed while the backend is down: resolved at start-up.
  const file = join(h.dataDir, "svc.db");
  const write = (sql: string) => {
    const db = new SQLite(file);
    db.prepare(sql).run(gw.nodeId);
    db.close();
  };
  await h.server.close();
  write("UPDATE nodes SET public_address = '192.0.2.10' WHERE node_id = ?");
  h = await startAlerts(t, {}, {}, { dataDir: h.dataDir, clock: h.clock, logs: h.logs });
  await until(() => open(h).length === 0, "resolved at start-up");
  // Broken again while down: alerted at start-up.
  await h.server.close();
  write("UPDATE nodes SET public_address = NULL WHERE node_id = ?");
  h = await startAlerts(t, {}, {}, { dataDir: h.dataDir, clock: h.clock, logs: h.logs });
  await until(() => open(h).length === 1, "alerted at start-up");
  assert.deepEqual(said(h, ch).map((m) => m.type), ["mesh.pair_broken", "mesh.pair_broken.resolved", "mesh.pair_broken"]);

  // The pair deleted: its alert closes as deleted.
  const pairId = open(h)[0]?.subject;
  assert.equal((await h.req("DELETE", `/api/v1/configs/${a}/mesh-pairs/${pairId}`)).status, 204);
  await until(() => open(h).length === 0, "the deleted pair's alert closed");
  assert.deepEqual(said(h, ch).slice(3).map((m) => [m.type, m.data.pair_id, m.data.removed]), [["alert.subject_removed", pairId, "deleted"]]);
});
