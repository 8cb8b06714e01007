import assert from "node:assert/strict";
import { test } from "node:test";
import mqtt from "mqtt";
import { isoTime } from "../../src/lib/clock.js";
import { openStream } from "../events/sse-harness.js";
import {
  bindNode,
  dynamicNode,
  endpointStatus,
  mosquitto,
  mosquittoSettings,
  startService,
  tempDataDir,
  until,
} from "../mqtt/mosquitto-harness.js";

/**
 * spec §1.7 last bullet, §1.8, §4 rule 11: the backend starts and serves REST
 * with SVC_MQTT_URL pointing at a closed port; a bind made then succeeds, and when a broker
 * appears on that port the reconciliation creates the backend user and the node's account.
 */

test("with SVC_MQTT_URL at a closed port the backend starts and serves REST; bind succeeds; when Mosquitto appears, reconciliation provisions the account and the agent connects (spec §1.7, §1.8, §4 rule 11)", async (t) => {
  const m = await mosquitto(t, { start: false }); // its port is free: nothing listens yet
  if (m === undefined) return;
  const started = Date.now();
  const s = await startService(t, mosquittoSettings(m, tempDataDir()));
  assert.ok(Date.now() - started < 5000, "start-up does not wait for the broker");

  const status = async () => (await s.api("GET", "/api/v1/system/status")).json.services.mqtt;
  assert.deepEqual(await status(), { enabled: true, broker: "mosquitto", connected: false });
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bindNode(s, configId, nodeId);
  assert.equal(p.mqtt.port, m.port);
  assert.equal((await endpointStatus(s, configId, nodeId)).client_initialized, true, "the database is written");
  await until("a failed reconciliation waiting to retry", () => (s.server.mqtt.sync?.state().lastError ?? null) !== null);
  assert.equal(s.server.mqtt.sync?.state().reconciled, 0);

  // A command cannot be published: it ends failed, not pending forever.
  const sent = await s.api("POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
  assert.equal(sent.status, 202, JSON.stringify(sent.json));
  await until("the command failed", async () => {
    const logs = (await s.api("GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs as Array<{ request_id: string; status: string }>;
    return logs.find((l) => l.request_id === sent.json.request_id)?.status === "failed";
  });

  // The console learns of the broker connection from the SSE status (spec §6.5 system.status.updated).
  const stream = await openStream(`${s.baseUrl}/api/v1/events/stream`, { authorization: `Bearer ${s.token}` });
  t.after(() => stream.destroy());
  await m.start();
  const up = await stream.waitFor((f) => f.event === "system.status.updated" && (f.json.payload as { services: { mqtt: { connected: boolean } } }).services.mqtt.connected);
  assert.equal((up.json.payload as { services: { mqtt: { broker: string } } }).services.mqtt.broker, "mosquitto");
  await until("connected and reconciled", async () => (await status()).connected && (s.server.mqtt.sync?.state().reconciled ?? 0) > 0);
  assert.deepEqual(s.server.mqtt.sync?.state().totals, { upserted: 2, removed: 0 }, "the backend user and the bound node, once");
  const agent = await mqtt.connectAsync(m.url, { protocolVersion: 4, clientId: p.mqtt.client_id, username: p.mqtt.username, password: p.mqtt.password, reconnectPeriod: 0 });
  t.after(() => agent.end(true));
  const envelope = { type: "heartbeat", request_id: "", config_id: configId, node_id: nodeId, boot_id: "b", session_id: "s", sent_at: isoTime(Date.now()), payload: { client_online: true, wg_online: false } };
  await agent.publishAsync(p.topics.heartbeat!, JSON.stringify(envelope), { qos: 1 });
  await until("online", async () => (await endpointStatus(s, configId, nodeId)).client_presence_state === "online");
});
