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
import { isoTime, ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { nodeClientId, nodeIdentity, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { brokerPasswordHash, type BrokerUser } from "../../src/mqtt/broker-users.js";
import { EmbeddedBroker } from "../../src/mqtt/embedded-broker.js";
import { backendSubscriptions, nodeTopic } from "../../src/protocol/topics.js";
import { startSseServer, subscribers } from "../events/sse-harness.js";
import { api, boundAgent, dynamicNode, envelope, eventually, status } from "./agent-harness.js";

/**
 * Timing proofs that a wrong constant or a wrong timer would fail (a proof that
 * cannot fail proves nothing). Every clock is injected (ManualClock); every outcome is observed after real
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

// ---------------------------------------------------------------------------------------------
// spec §2.7, §6.4 rule 3, §3.1: every ACK refreshes last_reachable_at to its receive time

/** Takes the agent's downstream messages in arrival order, one topic at a time; each is taken once. */
function inbox(agent: MqttClient): (topic: string, what: string) => Promise<{ request_id: string; payload: Record<string, unknown> }> {
  const seen: Array<{ topic: string; taken: boolean; env: { request_id: string; payload: Record<string, unknown> } }> = [];
  agent.on("message", (topic, payload) => seen.push({ topic, taken: false, env: JSON.parse(payload.toString("utf8")) }));
  return (topic, what) =>
    eventually(what, () => {
      const m = seen.find((x) => x.topic === topic && !x.taken);
      if (m === undefined) return undefined;
      m.taken = true;
      return m.env;
    });
}

test("spec §2.7, §6.4 rule 3, §3.1: a control ACK, an info ACK, a config-push ACK and a detect ACK each move last_reachable_at to the ACK's receive time and bring an offline node back online", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const next = inbox(agent);
  const base = `/api/v1/configs/${configId}/nodes/${nodeId}`;
  assert.equal((await status(s, configId, nodeId)).last_reachable_at, null, "a heartbeat is not an ACK");

  /** The agent goes offline (its will), then ACKs `requestId` at a later instant of the server's clock. */
  const ackAfterOffline = async (topic: string, requestId: string, payload: Record<string, unknown>, why: string) => {
    await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "info", event: "offline", message: "lost" }), { qos: 1 });
    await eventually(`${why}: offline`, async () => ((await status(s, configId, nodeId)).client_presence_state === "offline" ? true : undefined));
    s.clock.advance(7 * SECOND);
    const receivedAt = s.clock.now();
    await agent.publishAsync(topic, envelope(p, "ack", payload, requestId), { qos: 1 });
    const st = await eventually(`${why}: last_reachable_at moves`, async () => {
      const now = await status(s, configId, nodeId);
      return now.last_reachable_at === isoTime(receivedAt) ? now : undefined;
    });
    assert.equal(st.client_presence_state, "online", `${why}: an ACK is a reachable signal (spec §3.1)`);
    // The clock moves on; nothing else refreshes it until the next ACK.
    s.clock.advance(3 * SECOND);
    assert.equal((await status(s, configId, nodeId)).last_reachable_at, isoTime(receivedAt), `${why}: stays at the ACK's time`);
  };

  // Control ACK (accepted, then applied); a stop goes out at once (a start would wait for the
  // host's first config: spec §3.8).
  const start = await api(s, "POST", `${base}/control`, { action: "stop" });
  assert.equal(start.status, 202, JSON.stringify(start.json));
  const control = await next(p.topics.control!, "the control command");
  assert.equal(control.request_id, start.json.request_id);
  await ackAfterOffline(p.topics.control_ack!, control.request_id, { status: "accepted", message: "", action: "stop" }, "control ACK accepted");
  await ackAfterOffline(p.topics.control_ack!, control.request_id, { status: "applied", message: "", action: "stop" }, "control ACK applied");

  // Info ACK (failed counts too: it still proves the client answered).
  const show = await api(s, "POST", `${base}/control`, { action: "wg_show" });
  assert.equal(show.status, 202, JSON.stringify(show.json));
  const info = await next(p.topics.info!, "the info command");
  assert.equal(info.request_id, show.json.request_id);
  await ackAfterOffline(p.topics.info_ack!, info.request_id, { status: "failed", message: "wg show exited with 1", action: "wg_show" }, "info ACK failed");

  // Config-push ACK.
  const push = await api(s, "POST", `${base}/control`, { action: "push_config" });
  assert.equal(push.status, 202, JSON.stringify(push.json));
  let pushed = await next(p.topics.config_push!, "the config push");
  while (pushed.request_id !== push.json.request_id) pushed = await next(p.topics.config_push!, "the requested config push");
  await ackAfterOffline(p.topics.config_push_ack!, pushed.request_id, { status: "applied", message: "", action: "push_config" }, "config-push ACK applied");

  // Detect ACK: a console viewer starts the probes (spec §6.4 rule 8).
  const viewer = await s.open();
  t.after(() => viewer.destroy());
  const detect = await next(p.topics.detect!, "a detect probe");
  await ackAfterOffline(
    p.topics.detect_ack!,
    detect.request_id,
    { status: "applied", message: "", action: "detect", client_online: true, wg_online: true, platform: "linux", client_version: "1.2.3" },
    "detect ACK applied",
  );
});

// ---------------------------------------------------------------------------------------------
// spec §6.4 rule 8, §8: detect every 2 minutes (+ up to 10 % jitter), only while a console watches

test("spec §6.4 rule 8, §8: no viewer, no probe; with one SSE viewer exactly 5 probes reach the node over MQTT in 10 simulated minutes, 120 s to 133 s apart; none once the last viewer leaves", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const probes: Array<{ request_id: string; sentAt: number }> = [];
  agent.on("message", (topic, payload) => {
    if (topic !== p.topics.detect) return;
    const env = JSON.parse(payload.toString("utf8")) as { request_id: string; sent_at: string };
    probes.push({ request_id: env.request_id, sentAt: Date.parse(env.sent_at) });
    // A healthy agent answers, so the node stays online and keeps being probed.
    void agent.publishAsync(
      p.topics.detect_ack!,
      envelope(p, "ack", { status: "applied", message: "", action: "detect", client_online: true, wg_online: true, platform: "linux", client_version: "1.2.3" }, env.request_id),
      { qos: 1 },
    );
  });
  const next = inbox(agent);
  /**
   * Everything published to the node before now has been delivered: a control command sent
   * after it, through the same broker and subscription, has arrived.
   */
  const barrier = async (why: string): Promise<void> => {
    const res = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
    assert.equal(res.status, 202, JSON.stringify(res.json));
    let got = await next(p.topics.control!, `${why}: barrier`);
    while (got.request_id !== res.json.request_id) got = await next(p.topics.control!, `${why}: barrier`);
  };
  /** Advances the server's clock second by second; when a probe round starts, waits for its delivery first. */
  const advanceSeconds = async (seconds: number): Promise<void> => {
    for (let i = 0; i < seconds; i++) {
      const before = s.server.detect.rounds;
      s.clock.advance(SECOND);
      if (s.server.detect.rounds !== before) {
        await eventually("the round's probe delivered", () => probes.length === s.server.detect.rounds - roundsAtStart || undefined);
      }
    }
  };
  const roundsAtStart = s.server.detect.rounds;

  // No viewer: 10 minutes pass and not one probe is sent.
  await advanceSeconds(600);
  await barrier("no viewer");
  assert.equal(probes.length, 0, "spec §6.4 rule 8: with no viewers, no probe is sent");

  // One viewer: the first probe at once, then one per interval.
  const viewer = await s.open();
  const openedAt = s.clock.now();
  await eventually("the first probe", () => probes.length === 1 || undefined);
  assert.equal(probes[0]!.sentAt, openedAt, "the first probe goes out when the first viewer arrives");
  // Up to, not including, 10 minutes: rounds at 0 and k * [120 s, 132 s) (+ at most 1 s per
  // round from the 1-second steps) for k = 1..4; the fifth interval ends at >= 600 s.
  await advanceSeconds(599);
  await barrier("one viewer");
  assert.equal(probes.length, 5, `probes in 10 simulated minutes: ${probes.map((x) => (x.sentAt - openedAt) / SECOND).join(", ")} s`);
  for (let i = 1; i < probes.length; i++) {
    const gap = probes[i]!.sentAt - probes[i - 1]!.sentAt;
    assert.ok(gap >= 120 * SECOND && gap < 133 * SECOND, `gap ${i}: ${gap / SECOND} s is 2 minutes plus at most 10 % jitter`);
  }
  assert.equal(new Set(probes.map((x) => x.request_id)).size, probes.length, "each probe has its own request_id");

  // The last viewer leaves: not one probe more, however long the clock runs.
  viewer.destroy();
  await subscribers(s.hub, 0);
  const count = probes.length;
  await advanceSeconds(600);
  await barrier("after the last viewer");
  assert.equal(probes.length, count, "spec §6.4 rule 8: no probe after the last viewer leaves");
});

test("spec §3.1 reachable signals, §2.7: a heartbeat and a non-offline event bring an offline node back online but leave last_reachable_at where the last ACK put it", async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId, p, agent } = await boundAgent(s, t, { online: true });
  const next = inbox(agent);
  const start = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
  assert.equal(start.status, 202, JSON.stringify(start.json));
  const control = await next(p.topics.control!, "the control command");
  s.clock.advance(5 * SECOND);
  const ackedAt = s.clock.now();
  await agent.publishAsync(p.topics.control_ack!, envelope(p, "ack", { status: "accepted", message: "", action: "stop" }, control.request_id), { qos: 1 });
  await eventually("the ACK's time", async () => ((await status(s, configId, nodeId)).last_reachable_at === isoTime(ackedAt) ? true : undefined));

  for (const [topic, type, payload, why] of [
    [p.topics.heartbeat!, "heartbeat", { client_online: true, wg_online: false }, "heartbeat"],
    [p.topics.event!, "event", { level: "info", event: "mqtt_connected", message: "agent connected" }, "event mqtt_connected"],
    [p.topics.event!, "event", { level: "warn", event: "tunnel_flapping", message: "x" }, "an event the spec does not name"],
  ] as const) {
    await agent.publishAsync(p.topics.event!, envelope(p, "event", { level: "info", event: "offline", message: "lost" }), { qos: 1 });
    await eventually(`${why}: offline`, async () => ((await status(s, configId, nodeId)).client_presence_state === "offline" ? true : undefined));
    s.clock.advance(11 * SECOND);
    await agent.publishAsync(topic, envelope(p, type, payload), { qos: 1 });
    const st = await eventually(`${why}: online`, async () => {
      const now = await status(s, configId, nodeId);
      return now.client_presence_state === "online" ? now : undefined;
    });
    assert.equal(st.last_reachable_at, isoTime(ackedAt), `${why} is not an ACK: last_reachable_at stays`);
  }
});
