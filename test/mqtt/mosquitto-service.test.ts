import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import mqtt from "mqtt";
import { runAgent } from "../../src/agent/agent.js";
import { runCommand } from "../../src/agent/exec.js";
import { agentProfileSchema } from "../../src/agent/profile.js";
import type { CommandRunner } from "../../src/agent/toolchain.types.js";
import { createToolchains } from "../../src/agent/toolchains.js";
import {
  bindNode,
  dynamicNode,
  endpointStatus,
  mosquitto,
  mosquittoSettings,
  startService,
  tempDataDir,
  until,
  type MosquittoBroker,
  type Service,
} from "./mosquitto-harness.js";

/**
 * The whole service with SVC_MQTT_BROKER=mosquitto: a real Mosquitto 2.0
 * with dynamic security started by the test, the real SQLite store and REST API, and the real
 * agent runtime (src/agent/agent.ts) with the recording tunnel stand-ins of
 * test/fixtures/awg-standin (no interface is touched; the real tools run in test/e2e).
 */

const STANDIN = join(import.meta.dirname, "..", "fixtures", "awg-standin");

type Profile = Awaited<ReturnType<typeof bindNode>>;

/** The real agent for `profile`, stopped after the test. */
function startAgent(t: TestContext, profile: Profile): void {
  const dir = mkdtempSync(join(tmpdir(), "svc-mosq-agent-"));
  const runner: CommandRunner = (file, args, o) =>
    runCommand(join(STANDIN, file.replace(/^wg/, "awg")), args, {
      ...o,
      env: { ...process.env, SVC_STANDIN_LOG: join(dir, "calls.log"), SVC_STANDIN_STATE: join(dir, "state") },
    });
  const toolchains = createToolchains({ platform: "linux", run: runner, configDirs: { wireguard: join(dir, "wg"), awg_2: join(dir, "awg") } });
  const ctl = new AbortController();
  const running = runAgent({
    profile: agentProfileSchema.parse(profile),
    profileDir: dir,
    log: () => undefined,
    signal: ctl.signal,
    toolchains,
    isPrivileged: () => true,
  });
  t.after(async () => {
    ctl.abort();
    await running;
    rmSync(dir, { recursive: true, force: true });
  });
}

async function mqttStatus(s: Service) {
  return (await s.api("GET", "/api/v1/system/status")).json.services.mqtt as { enabled: boolean; broker: string; connected: boolean };
}

async function service(t: TestContext, m: MosquittoBroker): Promise<Service> {
  const s = await startService(t, mosquittoSettings(m, tempDataDir()));
  await until("the backend connected to mosquitto and reconciled", async () => (await mqttStatus(s)).connected && (s.server.mqtt.sync?.state().reconciled ?? 0) > 0);
  return s;
}

/** Sends a control action and waits for its final status (spec §3.4). */
async function control(s: Service, configId: string, nodeId: string, action: string): Promise<string> {
  const sent = await s.api("POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action });
  assert.equal(sent.status, 202, JSON.stringify(sent.json));
  return until(`${action} closed`, async () => {
    const logs = (await s.api("GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs as Array<{ request_id: string; status: string }>;
    const row = logs.find((l) => l.request_id === sent.json.request_id);
    return row && row.status !== "pending" && row.status !== "accepted" ? row.status : undefined;
  });
}

/** A refused CONNACK for these credentials (spec §4 rule 12: old credentials stop working). */
async function refused(m: MosquittoBroker, p: Profile, password = p.mqtt.password): Promise<boolean> {
  const c = mqtt.connect(m.url, { protocolVersion: 4, clientId: p.mqtt.client_id, username: p.mqtt.username, password, reconnectPeriod: 0, connectTimeout: 5000 });
  try {
    await new Promise<void>((resolve, reject) => {
      c.once("connect", () => resolve());
      c.once("error", reject);
    });
    return false;
  } catch (err) {
    return typeof (err as { code?: unknown }).code === "number";
  } finally {
    c.end(true);
  }
}

test("Mosquitto: bind → the agent connects with its profile → heartbeat → online → start applied; the system status names the broker (spec §4 rule 11, §6.4)", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const s = await service(t, m);
  assert.deepEqual(await mqttStatus(s), { enabled: true, broker: "mosquitto", connected: true });
  const { configId, nodeId } = await dynamicNode(s);
  const profile = await bindNode(s, configId, nodeId);
  assert.deepEqual({ host: profile.mqtt.host, port: profile.mqtt.port, tls: profile.mqtt.tls }, { host: "127.0.0.1", port: m.port, tls: false });
  startAgent(t, profile);
  await until("the node online", async () => (await endpointStatus(s, configId, nodeId)).client_presence_state === "online");
  // Downstream through the backend's role, upstream ACKs through the node's role.
  assert.equal(await control(s, configId, nodeId, "push_config"), "applied");
  assert.equal(await control(s, configId, nodeId, "start"), "applied");
  assert.equal((await endpointStatus(s, configId, nodeId)).runtime_state, "running");
});

test("Mosquitto: reset-client kicks the live agent and its old password is refused; a rebind's new password works (spec §4 rules 11-12)", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const s = await service(t, m);
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bindNode(s, configId, nodeId);
  const agent = await mqtt.connectAsync(m.url, { protocolVersion: 4, clientId: p.mqtt.client_id, username: p.mqtt.username, password: p.mqtt.password, reconnectPeriod: 0 });
  t.after(() => agent.end(true));
  const closed = new Promise<void>((resolve) => agent.once("close", () => resolve()));
  const reset = await s.api("POST", `/api/v1/configs/${configId}/nodes/${nodeId}/reset-client`);
  assert.equal(reset.status, 200, JSON.stringify(reset.json));
  await closed;
  assert.equal(await refused(m, p), true, "the old password is refused");
  const again = await bindNode(s, configId, nodeId);
  assert.notEqual(again.mqtt.password, p.mqtt.password);
  const back = await mqtt.connectAsync(m.url, { protocolVersion: 4, clientId: again.mqtt.client_id, username: again.mqtt.username, password: again.mqtt.password, reconnectPeriod: 0 });
  back.end(true);
});

test("Mosquitto killed and restarted: the backend reconnects and reconciles, the agent recovers, no node state is lost; a reset made meanwhile takes effect (spec §1.8, §4 rule 12)", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const s = await service(t, m);
  const a = await dynamicNode(s, "edge-a");
  const pa = await bindNode(s, a.configId, a.nodeId);
  startAgent(t, pa);
  await until("A online", async () => (await endpointStatus(s, a.configId, a.nodeId)).client_presence_state === "online");
  assert.equal(await control(s, a.configId, a.nodeId, "push_config"), "applied");
  assert.equal(await control(s, a.configId, a.nodeId, "start"), "applied");
  const b = await dynamicNode(s, "edge-b");
  const pb = await bindNode(s, b.configId, b.nodeId);
  assert.equal(await refused(m, pb), false, "B's account exists before the crash");
  const configsBefore = (await s.api("GET", "/api/v1/configs")).json;
  const nodeBefore = (await s.api("GET", `/api/v1/configs/${a.configId}/nodes/${a.nodeId}`)).json;
  const statusBefore = await endpointStatus(s, a.configId, a.nodeId);
  const reconciledBefore = s.server.mqtt.sync!.state().reconciled;
  const totalsBefore = s.server.mqtt.sync!.state().totals;

  await m.stop("SIGKILL");
  await until("the backend noticed", async () => !(await mqttStatus(s)).connected);
  // spec §4 rule 12: reset succeeds with the broker down; the database is written.
  const reset = await s.api("POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/reset-client`);
  assert.equal(reset.status, 200, JSON.stringify(reset.json));
  // A command now cannot be published: it ends failed at once (spec §1.8).
  assert.equal(await control(s, a.configId, a.nodeId, "stop"), "failed");

  const receivedBefore = s.server.router.received;
  await m.start(); // the same dynamic-security.json
  await until("reconnected and reconciled", async () => (await mqttStatus(s)).connected && s.server.mqtt.sync!.state().reconciled > reconciledBefore);
  await s.server.mqtt.sync!.idle();
  const totals = s.server.mqtt.sync!.state().totals;
  assert.deepEqual(
    { upserted: totals.upserted - totalsBefore.upserted, removed: totals.removed - totalsBefore.removed },
    { upserted: 0, removed: 1 },
    "A and the backend were right already (not touched, not kicked); B's account removed",
  );
  assert.equal(await refused(m, pb), true, "B's old password stopped working");
  // The agent reconnects by itself (its own backoff) and announces itself: mqtt_connected and a heartbeat.
  await until("the agent's announcement after the restart", () => s.server.router.received >= receivedBefore + 2, 30_000);
  assert.equal(await control(s, a.configId, a.nodeId, "push_config"), "applied");
  assert.deepEqual((await s.api("GET", "/api/v1/configs")).json, configsBefore);
  assert.deepEqual((await s.api("GET", `/api/v1/configs/${a.configId}/nodes/${a.nodeId}`)).json.client.client_presence_state, nodeBefore.client.client_presence_state);
  const statusAfter = await endpointStatus(s, a.configId, a.nodeId);
  assert.deepEqual({ ...statusAfter, last_reachable_at: null }, { ...statusBefore, last_reachable_at: null });
});
