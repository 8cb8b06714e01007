import assert from "node:assert/strict";
import { test } from "node:test";
import { ThreadedBroker } from "../../src/mqtt/broker-thread.js";
import { startSseServer, type SseFrame } from "../events/sse-harness.js";
import { api, boundAgent, envelope, eventually, status } from "../control/agent-harness.js";

/**
 * The embedded broker's thread dying under the running service (docs/history/decisions-2026.md "The embedded
 * broker thread is restarted when it dies"): the console sees the broker go down and come back
 * live (spec §6.5 `system.status.updated`, services.mqtt.connected), and a node whose agent
 * reconnects is heard again.
 */
test("spec §6.5, DESIGN §3: the broker thread dies under the service: system.status.updated says disconnected, then connected after the restart; GET /system/status agrees; a reconnected agent's heartbeat is handled", async (t) => {
  const s = await startSseServer(t);
  const broker = s.server.mqtt.broker;
  assert.ok(broker instanceof ThreadedBroker, "the service runs its broker in a thread by default");
  const { configId, nodeId, p, agent } = await boundAgent(s, t);
  const sse = await s.open();
  t.after(() => sse.destroy());
  const mqttConnected = (f: SseFrame) =>
    f.event === "system.status.updated" ? (f.json.payload["services"] as { mqtt: { connected: boolean } }).mqtt.connected : undefined;

  await broker.terminateWorker();
  await sse.waitFor((f) => mqttConnected(f) === false);
  await sse.waitFor((f) => mqttConnected(f) === true);
  const st = await api(s, "GET", "/api/v1/system/status");
  assert.equal(st.json.services.mqtt.connected, true);

  // The stand-in agent does not reconnect by itself (reconnectPeriod 0); a real agent does.
  const reconnected = new Promise<void>((resolve) => agent.once("connect", () => resolve()));
  agent.reconnect();
  await reconnected;
  // One heartbeat, right after the reconnect: the restarted thread subscribed the backend before
  // it listened, so nothing an agent sends once it is back in falls into a gap.
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("online", async () => ((await status(s, configId, nodeId)).client_presence_state === "online" ? true : undefined));
});
