import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { runAgent } from "../../src/agent/agent.js";
import { runCommand } from "../../src/agent/exec.js";
import { agentProfileSchema, type AgentProfile } from "../../src/agent/profile.js";
import type { CommandRunner } from "../../src/agent/toolchain.types.js";
import { createToolchains } from "../../src/agent/toolchains.js";
import type { BackendLink } from "../../src/mqtt/embedded-broker.js";
import { envelopeSchema } from "../../src/protocol/envelope.schema.js";
import { api, dynamicNode, eventually, status } from "../control/agent-harness.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";

/**
 * What the real agent runtime (`runAgent`) puts on the wire (spec §6.2 envelope, §6.3 payloads,
 * LWT, §6.4 rule 4), captured by a second backend-side subscriber on the real embedded broker
 * (`attachBackend`, the link the backend itself uses) while the real service handles the same
 * messages. Tunnel tools are the recording stand-ins (test/fixtures/awg-standin): AmneziaWG is
 * not packaged here, and the stand-ins touch no interface.
 */

const STANDIN = join(import.meta.dirname, "..", "fixtures", "awg-standin");
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface Wire {
  topic: string;
  kind: string;
  env: Record<string, any>;
}

interface Rig {
  s: SseServer;
  configId: string;
  nodeId: string;
  profile: AgentProfile;
  /** Every upstream message of this node, in arrival order. */
  wire: Wire[];
  /** Starts one agent process (a fresh runAgent); resolves its stop function. */
  start(opts?: { isPrivileged?: () => boolean }): () => Promise<void>;
}

async function rig(t: TestContext): Promise<Rig> {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  await api(s, "PATCH", `/api/v1/configs/${configId}/nodes/${nodeId}`, { interface_name: "svc-w" });
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  const bound = await api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.0.0", platform: "linux", hostname: "w" }, false);
  assert.equal(bound.status, 200);
  const profile = agentProfileSchema.parse(bound.json);
  profile.mqtt.host = "127.0.0.1";
  const prefix = `svc/${configId}/${nodeId}/`;
  const wire: Wire[] = [];
  const link: BackendLink = await s.server.mqtt.broker!.attachBackend([`${prefix}#`], (topic, payload) => {
    const kind = topic.slice(prefix.length);
    if (["config/push", "control", "detect", "info"].includes(kind)) return; // downstream
    wire.push({ topic, kind, env: JSON.parse(payload.toString()) as Record<string, any> });
  });
  t.after(() => link.close());
  const dir = mkdtempSync(join(tmpdir(), "svc-agent-wire-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const runner: CommandRunner = (file, args, o) =>
    runCommand(join(STANDIN, file.replace(/^wg/, "awg")), args, { ...o, env: { ...process.env, SVC_STANDIN_STATE: join(dir, "state") } });
  const toolchains = createToolchains({ platform: "linux", run: runner, configDirs: { wireguard: join(dir, "wireguard") } });
  return {
    s,
    configId,
    nodeId,
    profile,
    wire,
    start(opts = {}) {
      const ctl = new AbortController();
      const running = runAgent({
        profile,
        profileDir: dir,
        log: () => undefined,
        signal: ctl.signal,
        toolchains: () => toolchains("wireguard"),
        ...(opts.isPrivileged ? { isPrivileged: opts.isPrivileged } : {}),
      });
      let stopped = false;
      const stop = async () => {
        if (stopped) return;
        stopped = true;
        ctl.abort();
        await running;
      };
      t.after(stop);
      return stop;
    },
  };
}

async function command(r: Rig, action: string): Promise<string> {
  const sent = await api(r.s, "POST", `/api/v1/configs/${r.configId}/nodes/${r.nodeId}/control`, { action });
  assert.equal(sent.status, 202, JSON.stringify(sent.json));
  await eventually(`${action} closed`, async () => {
    const logs = (await api(r.s, "GET", `/api/v1/configs/${r.configId}/nodes/${r.nodeId}/control-logs`)).json.logs as Array<{ request_id: string; status: string; kind: string }>;
    const log = logs.find((l) => l.kind === "command" && l.request_id === sent.json.request_id);
    return log && (log.status === "applied" || log.status === "failed") ? true : undefined;
  });
  return sent.json.request_id as string;
}

/**
 * Waits for the agent's own reconnect (MQTT.js timer, backoff from 1 s doubling): bounded at
 * 20 s, polling every 25 ms. Not a timer of the code under test.
 */
async function afterReconnect<T>(what: string, probe: () => T | undefined): Promise<T> {
  for (let i = 0; i < 800; i++) {
    const v = probe();
    if (v !== undefined) return v;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const online = (r: Rig) =>
  eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));

test("spec §6.2, §6.3: the real agent's heartbeats and events carry request_id \"\", one boot_id per process and one session_id per MQTT session; its will is the §6.3 LWT envelope", async (t) => {
  const r = await rig(t);
  const stop = r.start();
  await online(r);
  await eventually("heartbeat and mqtt_connected", () =>
    r.wire.some((w) => w.kind === "heartbeat") && r.wire.some((w) => w.env.payload?.event === "mqtt_connected") ? true : undefined,
  );
  for (const w of r.wire) {
    assert.ok(envelopeSchema.safeParse(w.env).success, `${w.kind}: a valid §6.2 envelope`);
    assert.equal(w.env.config_id, r.configId);
    assert.equal(w.env.node_id, r.nodeId);
    assert.match(w.env.sent_at, ISO_UTC, "spec §6.2 sent_at: UTC ISO 8601");
  }
  const first = r.wire.filter((w) => w.kind === "heartbeat" || w.kind === "event");
  assert.ok(first.length >= 2);
  for (const w of first) assert.equal(w.env.request_id, "", `spec §6.2: a passive ${w.kind} has request_id ""`);
  const hb = first.find((w) => w.kind === "heartbeat")!;
  assert.equal(hb.env.type, "heartbeat");
  assert.deepEqual(hb.env.payload, { client_online: true, wg_online: false }, "spec §6.3 heartbeat: nothing operated yet");
  const connected = first.find((w) => w.env.payload?.event === "mqtt_connected")!;
  assert.equal(connected.env.type, "event");
  assert.equal(connected.env.payload.level, "info", "spec §6.3 event level");
  const bootId = hb.env.boot_id as string;
  const session1 = hb.env.session_id as string;
  assert.match(bootId, UUID);
  assert.match(session1, UUID);
  assert.notEqual(bootId, session1);
  for (const w of first) {
    assert.equal(w.env.boot_id, bootId);
    assert.equal(w.env.session_id, session1);
  }

  // The broker drops the connection (as a network loss would): the will reaches the backend side.
  const seen = r.wire.length;
  assert.equal(r.s.server.mqtt.broker!.kick(r.profile.mqtt.client_id), true);
  const will = await eventually("the will", () => r.wire.slice(seen).find((w) => w.kind === "event" && w.env.payload?.event === "offline"));
  assert.equal(will.topic, `svc/${r.configId}/${r.nodeId}/event`, "published to the event topic");
  assert.equal(will.env.type, "event");
  assert.equal(will.env.request_id, "");
  assert.equal(will.env.boot_id, "", "spec §6.3 LWT: empty boot_id");
  assert.equal(will.env.session_id, "", "spec §6.3 LWT: empty session_id");
  assert.equal(will.env.payload.level, "info");
  assert.equal(will.env.payload.event, "offline");
  assert.ok(typeof will.env.payload.message === "string" && will.env.payload.message.length > 0, "a message");
  assert.ok(envelopeSchema.safeParse(will.env).success, "a full envelope");

  // The agent reconnects by itself (its 1 s backoff): a new session of the same process.
  const hb2 = await afterReconnect("the next session's heartbeat", () =>
    r.wire.slice(seen).find((w) => w.kind === "heartbeat" && w.env.session_id !== session1),
  );
  assert.equal(hb2.env.boot_id, bootId, "same process, same boot_id");
  assert.match(hb2.env.session_id, UUID);
  await online(r);

  // A new process start: a new boot_id.
  await stop();
  const seen2 = r.wire.length;
  r.start();
  const hb3 = await eventually("the new process's heartbeat", () => r.wire.slice(seen2).find((w) => w.kind === "heartbeat"));
  assert.match(hb3.env.boot_id, UUID);
  assert.notEqual(hb3.env.boot_id, bootId, "spec §6.2 boot_id: unique per process start");
  assert.notEqual(hb3.env.session_id, session1);
  assert.notEqual(hb3.env.session_id, hb2.env.session_id);
});

test("spec §6.3 common ACK and detect ACK, §6.4 rule 4: the real agent's ACKs carry status, message and the command's action, never output; the heartbeat reports wg_online true for the interface it operates", async (t) => {
  const r = await rig(t);
  r.start();
  await online(r);
  const ids = new Map<string, string>();
  for (const action of ["push_config", "start", "wg_show"]) ids.set(action, await command(r, action));
  // A detect, as the scheduler sends it.
  await r.s.server.registry.send(r.configId, r.nodeId, { type: "detect.sent", at: r.s.clock.now() });
  const detect = await r.s.server.commands.send({ configId: r.configId, nodeId: r.nodeId, kind: "detect", action: "detect", payload: { tunnel_protocol: "wireguard", interface_name: "svc-w" } });
  ids.set("detect", detect.requestId);
  const detectAck = await eventually("detect ACK", () => r.wire.find((w) => w.kind === "detect/ack" && w.env.request_id === detect.requestId));

  const acks = r.wire.filter((w) => w.kind.endsWith("/ack"));
  const kindOf: Record<string, string> = { push_config: "config/push/ack", start: "control/ack", wg_show: "info/ack", detect: "detect/ack" };
  for (const [action, requestId] of ids) {
    const mine = acks.filter((a) => a.env.request_id === requestId);
    assert.ok(mine.length >= 1, `${action}: ACKed`);
    for (const a of mine) {
      assert.equal(a.kind, kindOf[action], `${action}: on its ACK topic`);
      assert.equal(a.env.type, "ack");
      assert.equal(a.env.payload.action, action, `spec §6.3 common ACK action: ${action}`);
      assert.equal(typeof a.env.payload.message, "string", "spec §6.3 common ACK message");
      assert.ok(["accepted", "applied", "failed"].includes(a.env.payload.status));
      for (const key of ["output", "stdout", "stderr", "stream"]) assert.equal(key in a.env.payload, false, `spec §6.4 rule 4: ${action} ACK has no ${key}`);
      assert.doesNotMatch(JSON.stringify(a.env.payload), /interface: svc-w|public key/, `spec §6.4 rule 4: no wg output in the ${action} ACK`);
    }
    assert.equal(mine.at(-1)!.env.payload.status, "applied", action);
  }
  // wg_show's output went out as events instead.
  const outputs = r.wire.filter((w) => w.kind === "event" && w.env.payload.event === "command_output" && w.env.payload.request_id === ids.get("wg_show"));
  assert.ok(outputs.some((o) => /interface: svc-w/.test(o.env.payload.output)));
  // Detect ACK fields (spec §6.3): client_online, wg_online of the profile interface, platform, client_version, message.
  assert.deepEqual(
    { ...detectAck.env.payload, client_version: "x" },
    { status: "applied", message: "", action: "detect", client_online: true, wg_online: true, platform: process.platform, client_version: "x" },
  );
  assert.match(detectAck.env.payload.client_version, /^\d+\.\d+\.\d+/);

  // Reconnecting makes the agent heartbeat again: now for the interface it started.
  const seen = r.wire.length;
  r.s.server.mqtt.broker!.kick(r.profile.mqtt.client_id);
  const hb = await afterReconnect("heartbeat after reconnect", () => r.wire.slice(seen).find((w) => w.kind === "heartbeat"));
  assert.deepEqual(hb.env.payload, { client_online: true, wg_online: true }, "spec §6.3 heartbeat: the interface it operates is up");
  await eventually("running again", async () => {
    const st = await status(r.s, r.configId, r.nodeId);
    return st.client_presence_state === "online" && st.runtime_state === "running" ? true : undefined;
  });
});

test("spec §5 privileges: with no isPrivileged injected, the agent's own check is uid 0 (process.getuid): uid 1000 gets the privilege error event and ACK failed, uid 0 runs the push", async (t) => {
  const r = await rig(t);
  const realGetuid = process.getuid;
  assert.ok(realGetuid, "Linux or macOS");
  t.after(() => {
    process.getuid = realGetuid;
  });
  process.getuid = () => 1000;
  const stop = r.start();
  await online(r);
  const denied = await command(r, "push_config");
  const ack = r.wire.filter((w) => w.kind === "config/push/ack" && w.env.request_id === denied).at(-1)!;
  assert.equal(ack.env.payload.status, "failed");
  assert.match(ack.env.payload.message, /privileges/);
  const event = r.wire.find((w) => w.kind === "event" && w.env.payload.event === "privilege_error");
  assert.ok(event, "the clear error event");
  assert.equal(event.env.payload.level, "error", "spec §6.3 event level");
  assert.match(event.env.payload.message, /root/);
  await stop();

  process.getuid = () => 0;
  // The node may still show online from its first MQTT session: wait for the new session's own
  // mqtt_connected (written after its SUBSCRIBE on the same connection, which the broker handles
  // first), or the command could go out before it subscribed (a clean session receives nothing
  // published before its SUBSCRIBE).
  const seen = r.wire.length;
  r.start();
  await afterReconnect("the new session's mqtt_connected", () => r.wire.slice(seen).find((w) => w.kind === "event" && w.env.payload.event === "mqtt_connected"));
  await online(r);
  const allowed = await command(r, "push_config");
  const ok = r.wire.filter((w) => w.kind === "config/push/ack" && w.env.request_id === allowed).at(-1)!;
  assert.equal(ok.env.payload.status, "applied", ok.env.payload.message);
});
