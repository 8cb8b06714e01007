import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import mqtt, { type MqttClient } from "mqtt";
import { isoTime, type ManualClock } from "../../src/lib/clock.js";
import { bindNode, dynamicNode, mosquitto, mosquittoSettings, startService, tempDataDir, until, type Service } from "./mosquitto-harness.js";

/**
 * A real Mosquitto (deploy/mosquitto/mosquitto.conf: `persistence true`, a short autosave)
 * SIGKILLed under the running service and started again (spec §3.1, §6.4 rule 10). The backend's
 * session survives the crash (fixed client id, clean session off), so an agent that reconnects
 * and announces itself before the backend is back is not lost: the broker queues its event for
 * the backend. A node whose agent died during the outage is dropped at the end of the window
 * after the backend's return (the detect timeout, on the service's ManualClock).
 */

type Profile = Awaited<ReturnType<typeof bindNode>>;

function agentEnvelope(p: Profile, type: string, payload: Record<string, unknown>): string {
  return JSON.stringify({ type, request_id: "", config_id: p.profile.config_id, node_id: p.profile.node_id, boot_id: "b", session_id: "s", sent_at: isoTime(Date.now()), payload });
}

async function connectAgent(url: string, p: Profile): Promise<MqttClient> {
  return mqtt.connectAsync(url, { protocolVersion: 4, clientId: p.mqtt.client_id, username: p.mqtt.username, password: p.mqtt.password, reconnectPeriod: 0, clean: true });
}

function machineOf(s: Service, p: Profile) {
  return s.server.registry.machineState(p.profile.config_id, p.profile.node_id);
}

test("spec §3.1, §6.4 rule 10: Mosquitto SIGKILLed and restarted: an agent's mqtt_connected published before the backend is back is not lost; a node whose agent died meanwhile is dropped at the window's end", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  // The backend retries every 3 s: the agent reconnects and publishes well before it is back.
  const s = await startService(t, mosquittoSettings(m, tempDataDir(), { mqttReconnectMinMs: 3000, mqttReconnectMaxMs: 3000 }));
  const clock = s.server.clock as ManualClock;
  await until("backend connected", () => s.server.mqtt.connected());
  const back = await dynamicNode(s, "back");
  const dead = await dynamicNode(s, "dead");
  const pBack = await bindNode(s, back.configId, back.nodeId);
  const pDead = await bindNode(s, dead.configId, dead.nodeId);
  const agents = [await connectAgent(m.url, pBack), await connectAgent(m.url, pDead)];
  for (const [a, p] of [[agents[0], pBack], [agents[1], pDead]] as const) {
    await a?.publishAsync(p.topics.heartbeat ?? "", agentEnvelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  }
  await until("both online", () => machineOf(s, pBack)?.context.lastSignalAt !== null && machineOf(s, pDead)?.context.lastSignalAt !== null);
  clock.advance(1000); // the crash comes after the nodes' last signals
  // Mosquitto saves its state every second: wait for a save that holds the backend's session.
  const saved = Date.now();
  const db = join(m.dir, "mosquitto.db");
  await until("a persistence save after the backend subscribed", () => existsSync(db) && statSync(db).mtimeMs > saved + 100, 10_000);

  await m.stop("SIGKILL");
  for (const a of agents) a?.end(true); // the "dead" agent never comes back; no will reaches anyone
  await until("backend sees the outage", () => !s.server.mqtt.connected());
  clock.advance(60_000);
  await m.start();

  const again = await connectAgent(m.url, pBack);
  t.after(() => again.end(true));
  await again.publishAsync(pBack.topics.event ?? "", agentEnvelope(pBack, "event", { level: "info", event: "mqtt_connected", message: "agent connected" }), { qos: 1 });
  assert.equal(s.server.mqtt.connected(), false, "the event was published while the backend was still away");

  await until("the backend back and subscribed", () => s.server.mqtt.connected(), 15_000);
  await until("the queued event heard", () => machineOf(s, pBack)?.context.lastSignalAt === clock.now());
  await until("the silent node awaits a signal", () => (machineOf(s, pDead)?.value as { probe?: string } | undefined)?.probe === "waiting");
  assert.equal((machineOf(s, pBack)?.value as { probe?: string }).probe, "idle", "the node that spoke awaits nothing");

  clock.advance(s.server.settings.detectTimeoutMs);
  await until("the silent node dropped", () => (machineOf(s, pDead)?.value as { presence?: unknown }).presence === "dropped");
  const statusOf = async (p: Profile) => (await s.api("GET", `/api/v1/configs/${p.profile.config_id}/nodes/${p.profile.node_id}/endpoint-status`)).json.client_presence_state;
  assert.equal(await statusOf(pDead), "dropped");
  assert.equal(await statusOf(pBack), "online");
});
