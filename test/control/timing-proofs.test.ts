import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import mqtt, { type MqttClient } from "mqtt";
import { HEARTBEAT_INTERVAL_MS, runAgent } from "../../src/agent/agent.js";
import type { AgentProfile } from "../../src/agent/profile.js";
import type { Toolchain, ToolchainFor } from "../../src/agent/toolchain.types.js";
import { isoTime, ManualClock } from "../../src/clock.js";
import { createLogger } from "../../src/logger.js";
import { nodeClientId, nodeIdentity, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { brokerPasswordHash, type BrokerUser } from "../../src/mqtt/broker-users.js";
import { EmbeddedBroker } from "../../src/mqtt/embedded-broker.js";
import { backendSubscriptions, nodeTopic } from "../../src/protocol/topics.js";
import { startSseServer } from "../events/sse-harness.js";
import { api, boundAgent, dynamicNode, envelope, eventually, status } from "./agent-harness.js";

/**
 * Timing proofs that a wrong constant or a wrong timer would fail (issue 10, "make these proofs
 * able to fail"). Every clock is injected (ManualClock); every outcome is observed after real
 * HTTP or real MQTT delivery; nothing sleeps for a timer.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;

// ---------------------------------------------------------------------------------------------
// spec §2.5, §3.6, §8: bind token validity

test("spec §2.5, §3.6, §8: a bind token redeems over HTTP at 5 min - 1 s and is refused (INVALID_BIND_TOKEN) at exactly 5 min, on the injected clock", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const bindCommand = async (): Promise<string> => {
    const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
    assert.equal(cmd.status, 200, JSON.stringify(cmd.json));
    const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
    assert.ok(token, cmd.json.command);
    return token;
  };
  const redeem = (token: string) =>
    api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.2.3", platform: "linux", hostname: "edge-1" }, false);

  // Valid through the last second of its 5 minutes.
  const first = await bindCommand();
  s.clock.advance(5 * MINUTE - SECOND);
  const ok = await redeem(first);
  assert.equal(ok.status, 200, `redeemed at 5 min - 1 s: ${JSON.stringify(ok.json)}`);
  assert.equal(ok.json.profile.node_id, nodeId);

  // A fresh token, issued now, is refused exactly 5 minutes later (spec §3.6: valid -> expired).
  const second = await bindCommand();
  s.clock.advance(5 * MINUTE);
  const refused = await redeem(second);
  assert.equal(refused.status, 401, JSON.stringify(refused.json));
  assert.equal(refused.json.error.code, "INVALID_BIND_TOKEN");
});

// ---------------------------------------------------------------------------------------------
// spec §6.4 rule 7, §8: the agent's real heartbeat interval

/** Tunnel tools that report "not running" and are never asked for more (no interface is touched). */
const idleToolchains: ToolchainFor = (protocol) =>
  ({
    protocol,
    configPath: (name: string) => `/nonexistent/${name}.conf`,
    isRunning: async () => false,
    up: async () => assert.fail("up must not run"),
    down: async () => assert.fail("down must not run"),
    show: async () => assert.fail("show must not run"),
  }) satisfies Toolchain;

/** Resolves on CONNACK 0. */
async function connected(client: MqttClient): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    client.once("connect", () => resolve());
    client.once("error", reject);
  });
}

test("spec §6.4 rule 7, §8: the real agent heartbeats once on connect, then exactly once per 30 minutes of its clock, delivered over a real broker", async (t) => {
  const configId = "cfg-hb";
  const nodeId = "node-hb";
  const nodePassword = randomBytes(24).toString("base64url");
  const backendPassword = randomBytes(24).toString("base64url");
  const users = new Map<string, BrokerUser>([
    [nodeUsername(configId, nodeId), { identity: nodeIdentity(configId, nodeId), passwordHash: brokerPasswordHash(nodePassword) }],
    ["svc-backend", { identity: { kind: "backend" }, passwordHash: brokerPasswordHash(backendPassword) }],
  ]);
  const broker = await EmbeddedBroker.start({ host: "127.0.0.1", port: 0, users: { find: (u) => users.get(u) }, log: createLogger("silent") });
  t.after(() => broker.close());

  // The backend's side, over the network (no in-process link on this bare broker).
  const backend = mqtt.connect(`mqtt://127.0.0.1:${broker.port}`, {
    protocolVersion: 4,
    clientId: "svc-backend-hb",
    username: "svc-backend",
    password: backendPassword,
    reconnectPeriod: 0,
  });
  t.after(() => backend.end(true));
  await connected(backend);
  const heartbeats: Array<{ sent_at: string }> = [];
  const detectAcks = new Set<string>();
  backend.on("message", (topic, payload) => {
    const env = JSON.parse(payload.toString("utf8")) as { request_id: string; sent_at: string };
    if (topic === nodeTopic(configId, nodeId, "heartbeat")) heartbeats.push(env);
    if (topic === nodeTopic(configId, nodeId, "detect_ack")) detectAcks.add(env.request_id);
  });
  // The backend's own upstream filters (spec §6.4 rule 10); the policy grants it those only.
  await backend.subscribeAsync(backendSubscriptions(), { qos: 1 });

  const profile: AgentProfile = {
    profile: { config_id: configId, node_id: nodeId, server_url: "http://127.0.0.1:9" },
    mqtt: { host: "127.0.0.1", port: broker.port, tls: false, username: nodeUsername(configId, nodeId), password: nodePassword, client_id: nodeClientId(configId, nodeId) },
    topics: Object.fromEntries(
      (["config_push", "control", "detect", "info", "config_push_ack", "control_ack", "detect_ack", "info_ack", "event", "heartbeat"] as const).map((k) => [
        k,
        nodeTopic(configId, nodeId, k),
      ]),
    ) as AgentProfile["topics"],
  };
  const dir = mkdtempSync(join(tmpdir(), "svc-hb-"));
  const clock = new ManualClock();
  const ctl = new AbortController();
  // No heartbeatMs override: the product's interval, on an injected clock.
  const running = runAgent({ profile, profileDir: dir, log: () => undefined, signal: ctl.signal, toolchains: idleToolchains, heartbeatTimers: clock });
  t.after(async () => {
    ctl.abort();
    await running;
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Everything the agent published before now has reached the backend: a detect's ACK comes
   * back through the same connection after any heartbeat published earlier.
   */
  let barriers = 0;
  const barrier = async (): Promise<void> => {
    const requestId = `barrier-${++barriers}`;
    await backend.publishAsync(
      nodeTopic(configId, nodeId, "detect"),
      JSON.stringify({ type: "detect", request_id: requestId, config_id: configId, node_id: nodeId, boot_id: "", session_id: "", sent_at: isoTime(Date.now()), payload: { tunnel_protocol: "wireguard", interface_name: "svc0" } }),
      { qos: 1 },
    );
    await eventually(`detect ACK ${requestId}`, () => detectAcks.has(requestId) || undefined);
  };

  await eventually("the heartbeat on connect", () => heartbeats.length === 1 || undefined);
  // Minute by minute over 2 hours: one more heartbeat at each 30-minute mark, none in between.
  for (let minute = 1; minute <= 120; minute++) {
    clock.advance(MINUTE);
    if (minute % 30 === 0 || minute % 30 === 29 || minute === 1) {
      await barrier();
      assert.equal(heartbeats.length, 1 + Math.floor(minute / 30), `heartbeats after ${minute} simulated minutes`);
    }
  }
  assert.equal(HEARTBEAT_INTERVAL_MS, 30 * MINUTE);
});
