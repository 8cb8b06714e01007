import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { brokerUrl, runAgent } from "../../src/agent/agent.js";
import { runCommand } from "../../src/agent/exec.js";
import { agentProfileSchema, type AgentProfile } from "../../src/agent/profile.js";
import type { CommandRunner } from "../../src/agent/toolchain.types.js";
import { createToolchains } from "../../src/agent/toolchains.js";
import { api, dynamicNode, eventually, status } from "../control/agent-harness.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The real agent runtime against the real service (embedded broker, SQLite, HTTP), in one
 * process. Tunnel tools are the recording stand-ins of test/fixtures/awg-standin: AmneziaWG is
 * not packaged here, and `wireguard` runs the same scripts under the names wg and
 * wg-quick, so no interface is touched. The real tools run in test/e2e/dynamic-mesh.test.ts.
 */

const STANDIN = join(import.meta.dirname, "..", "fixtures", "awg-standin");

interface Rig {
  s: SseServer;
  configId: string;
  nodeId: string;
  profile: AgentProfile;
  calls: () => string[];
  tunnelDir: string;
  logs: Array<Record<string, unknown>>;
  stop: () => Promise<void>;
  restart: () => Promise<void>;
}

async function rig(t: TestContext, opts: { privileged?: boolean; beforeStart?: (s: SseServer, nodeId: string) => void } = {}): Promise<Rig> {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  await api(s, "PATCH", `/api/v1/configs/${configId}/nodes/${nodeId}`, { interface_name: "svc-t" });
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  const bound = await api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.0.0", platform: "linux", hostname: "t" }, false);
  assert.equal(bound.status, 200);
  const profile = agentProfileSchema.parse(bound.json);
  // The service advertises its public host; in this test the broker listens on loopback.
  profile.mqtt.host = "127.0.0.1";
  const dir = mkdtempSync(join(tmpdir(), "svc-agent-"));
  const tunnelDir = join(dir, "tunnels");
  const callLog = join(dir, "calls.log");
  // Each protocol's stand-in keeps its own state, as two real toolchains would.
  const runner =
    (protocol: string): CommandRunner =>
    (file, args, o) =>
      runCommand(join(STANDIN, file.replace(/^wg/, "awg")), args, {
        ...o,
        env: { ...process.env, SVC_STANDIN_LOG: callLog, SVC_STANDIN_STATE: join(dir, `state-${protocol}`) },
      });
  const wg = createToolchains({ platform: "linux", run: runner("wireguard"), configDirs: { wireguard: join(tunnelDir, "wireguard") } });
  const awg = createToolchains({ platform: "linux", run: runner("awg_2"), configDirs: { awg_2: join(tunnelDir, "amneziawg") } });
  const logs: Array<Record<string, unknown>> = [];
  opts.beforeStart?.(s, nodeId);
  let ctl = new AbortController();
  const launch = () =>
    runAgent({
      profile,
      profileDir: dir,
      log: (l) => logs.push(l),
      signal: ctl.signal,
      toolchains: (p) => (p === "wireguard" ? wg(p) : awg(p)),
      isPrivileged: () => opts.privileged ?? true,
    });
  let running = launch();
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    ctl.abort();
    await running;
  };
  // Events the server stored from the agent's connects (spec §6.4 rule 9: every event is stored).
  const connects = async () =>
    ((await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs as Array<{ kind: string; message: string }>).filter(
      (l) => l.kind === "event" && / connected$/.test(l.message),
    ).length;
  /**
   * A new agent process over the same profile directory (its state.json) and tunnel stand-ins.
   * Resolves once the server has its `mqtt_connected`, which the agent writes after its SUBSCRIBE
   * on the same connection: a command sent earlier could reach the broker before the new session
   * subscribed (the node may still show online from the old one).
   */
  const restart = async () => {
    const before = await connects();
    await stop();
    ctl = new AbortController();
    stopped = false;
    running = launch();
    await eventually("the new session's mqtt_connected", async () => ((await connects()) > before ? true : undefined));
  };
  t.after(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });
  // The tunnel commands; the peer report's reads after each command (`show IFACE dump`, docs/links.md) are not among them.
  const calls = () => {
    try {
      return readFileSync(callLog, "utf8").trim().split("\n").filter((l) => l !== "" && !l.endsWith(" dump"));
    } catch {
      return [];
    }
  };
  return { s, configId, nodeId, profile, calls, tunnelDir, logs, stop, restart };
}

async function logsOf(r: Rig) {
  return (await api(r.s, "GET", `/api/v1/configs/${r.configId}/nodes/${r.nodeId}/control-logs`)).json.logs as Array<{
    request_id: string | null;
    action: string;
    status: string;
    kind: string;
    message: string;
    output: string | null;
    stream: string | null;
  }>;
}

async function command(r: Rig, action: string) {
  const sent = await api(r.s, "POST", `/api/v1/configs/${r.configId}/nodes/${r.nodeId}/control`, { action });
  assert.equal(sent.status, 202, JSON.stringify(sent.json));
  return eventually(`${action} closed`, async () => {
    const log = (await logsOf(r)).find((l) => l.kind === "command" && l.action === action);
    return log && (log.status === "applied" || log.status === "failed") ? log : undefined;
  });
}

test("the agent connects with its profile, announces itself and heartbeats: the node is online (spec §6.3, §6.4 rule 7)", async (t) => {
  const r = await rig(t);
  // The mqtt_connected event and the heartbeat both arrive; the heartbeat carries wg_online.
  const st = await eventually("online with the heartbeat's runtime", async () => {
    const x = await status(r.s, r.configId, r.nodeId);
    return x.client_presence_state === "online" && x.runtime_state !== "unknown" ? x : undefined;
  });
  assert.equal(st.runtime_state, "stopped", "no interface known yet: wg_online=false");
  assert.ok(r.logs.some((l) => l.msg === "connected"));
  await r.stop();
  // A clean stop sends an explicit offline event (no will on a clean disconnect).
  await eventually("offline", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "offline" ? true : undefined));
});

test("an agent refused at CONNECT (its broker account not there yet, e.g. bound while the broker was down) keeps retrying and comes online once the account exists (spec §1.8)", async (t) => {
  let held = "";
  const r = await rig(t, {
    beforeStart: (s, nodeId) => {
      const row = sqliteOf(s.server.store).prepare("SELECT mqtt_password_hash AS h FROM node_client_state WHERE node_id = ?").get(nodeId) as { h: string };
      held = row.h;
      sqliteOf(s.server.store).prepare("UPDATE node_client_state SET mqtt_password_hash = ? WHERE node_id = ?").run("0".repeat(64), nodeId);
    },
  });
  await eventually("refused", () => (r.logs.some((l) => l.msg === "mqtt error" && /bad user ?name or password|not authorized/i.test(String(l.err))) ? true : undefined));
  assert.equal((await status(r.s, r.configId, r.nodeId)).client_presence_state, "offline");
  sqliteOf(r.s.server.store).prepare("UPDATE node_client_state SET mqtt_password_hash = ? WHERE node_id = ?").run(held, r.nodeId);
  // The agent's own reconnect backoff (1 s doubling) paces this: poll up to 20 s.
  for (let i = 0; ; i++) {
    if ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online") break;
    assert.ok(i < 200, "the agent never came back after its account appeared");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});

test("spec §2.6: the broker URL from a profile: mqtts with TLS, IPv6 literal hosts in brackets (the settings API accepts them)", () => {
  assert.equal(brokerUrl({ host: "broker.example", port: 1883, tls: false }), "mqtt://broker.example:1883");
  assert.equal(brokerUrl({ host: "192.0.2.1", port: 8883, tls: true }), "mqtts://192.0.2.1:8883");
  assert.equal(brokerUrl({ host: "2001:db8::1", port: 1883, tls: false }), "mqtt://[2001:db8::1]:1883");
  assert.equal(brokerUrl({ host: "[::1]", port: 8883, tls: true }), "mqtts://[::1]:8883");
  for (const url of [brokerUrl({ host: "2001:db8::1", port: 1883, tls: false }), brokerUrl({ host: "[::1]", port: 8883, tls: true })]) {
    const parsed = new URL(url);
    assert.ok(parsed.hostname.startsWith("["), `${url} parses with a bracketed host`);
  }
});

test("push_config then start: the agent writes the config atomically with mode 0600 and brings it up; latest and running (spec §3.5, §3.8)", async (t) => {
  const r = await rig(t);
  await eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  const push = await command(r, "push_config");
  assert.equal(push.status, "applied", push.message);
  const staged = (await api(r.s, "GET", `/api/v1/configs/${r.configId}/nodes/${r.nodeId}/config`)).json;
  const path = join(r.tunnelDir, "wireguard", "svc-t.conf");
  assert.equal(readFileSync(path, "utf8"), staged.config_text);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.deepEqual(r.calls(), ["awg show svc-t"], "inspected once (protocol unchanged), not running: only written");
  await eventually("latest", async () => ((await status(r.s, r.configId, r.nodeId)).config_version_state === "latest" ? true : undefined));
  const start = await command(r, "start");
  assert.equal(start.status, "applied", start.message);
  assert.ok(r.calls().includes(`awg-quick up ${path}`));
  await eventually("running", async () => ((await status(r.s, r.configId, r.nodeId)).runtime_state === "running" ? true : undefined));
});

test("a protocol change wireguard → awg_2 runs the §3.8 sequence end to end: stop under wireguard, write for awg_2, restart with awg-quick", async (t) => {
  const r = await rig(t);
  await eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  assert.equal((await command(r, "push_config")).status, "applied");
  assert.equal((await command(r, "start")).status, "applied");
  const before = r.calls().length;
  // Changing the protocol re-stages the node; online and unconfirmed, it is pushed automatically.
  await api(r.s, "PATCH", `/api/v1/configs/${r.configId}`, { tunnel_protocol: "awg_2" });
  r.s.clock.advance(2000);
  const pushes = await eventually("second push", async () => {
    const l = (await logsOf(r)).filter((x) => x.action === "push_config" && x.status === "applied");
    return l.length === 2 ? l : undefined;
  });
  assert.equal(pushes.length, 2);
  const wgPath = join(r.tunnelDir, "wireguard", "svc-t.conf");
  const awgPath = join(r.tunnelDir, "amneziawg", "svc-t.conf");
  // The wireguard stand-in runs as "awg"/"awg-quick" too; the state dir tells them apart, and
  // the paths tell which toolchain acted.
  const seq = r.calls().slice(before);
  assert.deepEqual(seq, ["awg show svc-t", "awg show svc-t", `awg-quick down ${wgPath}`, `awg-quick up ${awgPath}`]);
  const awgText = readFileSync(awgPath, "utf8");
  assert.match(awgText, /^Jc = \d+$/m, "an AmneziaWG config");
  assert.equal(statSync(awgPath).mode & 0o777, 0o600);
  await eventually("latest", async () => ((await status(r.s, r.configId, r.nodeId)).config_version_state === "latest" ? true : undefined));
});

test("wg_show: raw output goes out as command_output events (stdout and stderr apart) and info/ack marks completion (spec §6.3 info, §6.4 rule 4)", async (t) => {
  const r = await rig(t);
  await eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  await command(r, "push_config");
  await command(r, "start");
  const show = await command(r, "wg_show");
  assert.equal(show.status, "applied");
  const outputs = (await logsOf(r)).filter((l) => l.kind === "output");
  assert.ok(outputs.length >= 1);
  assert.ok(outputs.every((o) => o.stream === "stdout" || o.stream === "stderr"));
  assert.match(outputs.find((o) => o.stream === "stdout")?.output ?? "", /interface: svc-t/);
});

test("spec §5: without privileges the agent reports a clear error event and ACK failed", async (t) => {
  const r = await rig(t, { privileged: false });
  await eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  const push = await command(r, "push_config");
  assert.equal(push.status, "failed");
  assert.match(push.message, /privileges/);
  const events = (await logsOf(r)).filter((l) => l.kind === "event");
  assert.ok(events.some((e) => /root/.test(e.message)), "the error event is stored as a log");
  assert.deepEqual(r.calls(), [], "nothing was run");
});

test("detect: the agent answers with wg_online of the profile interface, its platform and client version (spec §6.3 detect ACK)", async (t) => {
  const r = await rig(t);
  await eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  await command(r, "push_config");
  await command(r, "start");
  await r.s.server.registry.send(r.configId, r.nodeId, { type: "detect.sent", at: r.s.clock.now() });
  await r.s.server.commands.send({ configId: r.configId, nodeId: r.nodeId, kind: "detect", action: "detect", payload: { tunnel_protocol: "wireguard", interface_name: "svc-t" } });
  const st = await eventually("detect ack", async () => {
    const x = await status(r.s, r.configId, r.nodeId);
    return x.client_version !== "1.0.0" && x.runtime_state === "running" ? x : undefined;
  });
  assert.match(st.client_version, /^\d+\.\d+\.\d+/, "the agent's own injected version replaced the bind-time one");
});

/** Sends a control `push_config` through the backend's command tracker (the backend itself pushes on config/push). */
async function controlPush(r: Rig, payload: Record<string, unknown>) {
  const sent = await r.s.server.commands.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "push_config", payload: { action: "push_config", ...payload } });
  return eventually("control push_config closed", async () => {
    const log = (await logsOf(r)).find((l) => l.kind === "command" && l.request_id === sent.requestId);
    return log && (log.status === "applied" || log.status === "failed") ? log : undefined;
  });
}

test("spec §6.3 control push_config: a control message carrying the push fields runs the §3.8 push flow (config written 0600) and ACKs applied on control/ack", async (t) => {
  const r = await rig(t);
  await eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  const staged = (await api(r.s, "GET", `/api/v1/configs/${r.configId}/nodes/${r.nodeId}/config`)).json;
  const log = await controlPush(r, {
    tunnel_protocol: "wireguard",
    previous_tunnel_protocol: "wireguard",
    interface_name: "svc-t",
    config_version: staged.config_version,
    config_sha256: staged.config_sha256,
    config_text: staged.config_text,
  });
  assert.equal(log.status, "applied", log.message);
  assert.match(log.message, new RegExp(`config v${staged.config_version} written`));
  const path = join(r.tunnelDir, "wireguard", "svc-t.conf");
  assert.equal(readFileSync(path, "utf8"), staged.config_text);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.deepEqual(r.calls(), ["awg show svc-t"], "inspected, not running: only written");
});

test("spec §6.3 control push_config with the bare control payload re-runs §3.8 with the last config the agent applied: stop, rewrite, restart; refused when there is none or the file changed", async (t) => {
  const r = await rig(t);
  await eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  const bare = { tunnel_protocol: "wireguard", interface_name: "svc-t" };
  const none = await controlPush(r, bare);
  assert.equal(none.status, "failed");
  assert.match(none.message, /no config for svc-t under wireguard has been applied/);
  assert.deepEqual(r.calls(), [], "nothing inspected or run");

  assert.equal((await command(r, "push_config")).status, "applied");
  assert.equal((await command(r, "start")).status, "applied");
  const path = join(r.tunnelDir, "wireguard", "svc-t.conf");
  const text = readFileSync(path, "utf8");
  const before = r.calls().length;
  const again = await controlPush(r, bare);
  assert.equal(again.status, "applied", again.message);
  assert.deepEqual(r.calls().slice(before), ["awg show svc-t", `awg-quick down ${path}`, `awg-quick up ${path}`], "§3.8: inspect, stop, write, restart");
  assert.equal(readFileSync(path, "utf8"), text);
  assert.equal(statSync(path).mode & 0o777, 0o600);

  // A hand-edited file is not what the server pushed: refused before anything is stopped.
  writeFileSync(path, `${text}\nPostUp = touch /tmp/x\n`);
  const n = r.calls().length;
  const changed = await controlPush(r, bare);
  assert.equal(changed.status, "failed");
  assert.match(changed.message, /changed since config v\d+ was applied; nothing stopped or written/);
  assert.deepEqual(r.calls().slice(n), [], "nothing stopped");
  // Another protocol than the one the config was applied under: no config to re-apply.
  const other = await controlPush(r, { tunnel_protocol: "awg_2", interface_name: "svc-t" });
  assert.equal(other.status, "failed");
});

test("spec §6.3 control push_config: the last applied push (version and digest, in state.json) survives an agent restart, so the bare payload still re-applies it", async (t) => {
  const r = await rig(t);
  await eventually("online", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  assert.equal((await command(r, "push_config")).status, "applied");
  await r.restart();
  await eventually("online again", async () => ((await status(r.s, r.configId, r.nodeId)).client_presence_state === "online" ? true : undefined));
  const staged = (await api(r.s, "GET", `/api/v1/configs/${r.configId}/nodes/${r.nodeId}/config`)).json;
  const log = await controlPush(r, { tunnel_protocol: "wireguard", interface_name: "svc-t" });
  assert.equal(log.status, "applied", log.message);
  assert.match(log.message, new RegExp(`config v${staged.config_version} written`));
});
