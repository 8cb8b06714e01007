/**
 * Alerts end to end on real parts (docs/alerts.md "Rules"): the real agent (`svcctl agent run`,
 * a child process, stand-in tunnel tools) bound to a node, the embedded broker, a real HTTP
 * receiver on loopback. SIGKILL the agent → the broker publishes its will → one `node.offline`
 * whose signature verifies with the `standardwebhooks` library; start it again → one
 * `node.online` naming the alert it resolves. With `for_s: 10` a kill and restart within 3 s
 * delivers nothing (the service's clock is a ManualClock: the hold-off ends when it is moved).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { Webhook } from "standardwebhooks";
import { writeProfile, agentProfileSchema } from "../../src/agent/profile.js";
import { ManualClock } from "../../src/lib/clock.js";
import { api, dynamicNode, eventually, status } from "../control/agent-harness.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { svcctlPrefix } from "../helpers/agent.js";
import { STANDIN, start } from "../web/processes.js";
import { ALERT_TEST_SETTINGS, startReceiver, until } from "./harness.js";

const WINDOW_MS = 30_000;

/** A bound node and a way to run its real agent (a child process) as often as needed. */
async function realAgentNode(t: TestContext, s: SseServer) {
  const { configId, nodeId } = await dynamicNode(s);
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  const bound = await api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.2.3", platform: "linux", hostname: "edge-1" }, false);
  assert.equal(bound.status, 200, JSON.stringify(bound.json));
  const dir = mkdtempSync(join(tmpdir(), "svc-alert-agent-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const profileDir = join(dir, "profile");
  await writeProfile(profileDir, agentProfileSchema.parse(bound.json));
  const bin = join(dir, "bin");
  mkdirSync(bin);
  symlinkSync(join(STANDIN, "awg"), join(bin, "wg"));
  symlinkSync(join(STANDIN, "awg-quick"), join(bin, "wg-quick"));
  const prefix = svcctlPrefix(profileDir);
  const presence = async (want: string) => {
    await eventually(want, async () => ((await status(s, configId, nodeId)).client_presence_state === want ? true : undefined));
  };
  const run = async () => {
    const agent = start(t, prefix.cmd, [...prefix.args, "agent", "run"], {
      PATH: `${bin}:${process.env["PATH"] ?? ""}`,
      SVC_STANDIN_STATE: join(dir, "standin-state"),
      SVC_AGENT_TUNNEL_DIR: join(dir, "tunnels"),
    });
    await agent.printed("agent starting");
    return agent;
  };
  return { configId, nodeId, presence, run };
}

async function setup(t: TestContext, forS: number) {
  const rx = await startReceiver(t);
  const s = await startSseServer(t, {}, { settings: ALERT_TEST_SETTINGS, clock: new ManualClock(Date.now()) });
  const ch = await api(s, "POST", "/api/v1/alerts/channels", { name: "ops", kind: "webhook", url: rx.url });
  const rule = await api(s, "POST", "/api/v1/alerts/rules", { name: "down", event: "node.offline", for_s: forS, channel_ids: [ch.json.channel_id] });
  assert.equal(rule.status, 201, JSON.stringify(rule.json));
  const verified = () => rx.received.map((r) => ({ id: r.headers["webhook-id"], ...(new Webhook(ch.json.secret).verify(r.body, r.headers as Record<string, string>) as { type: string; data: Record<string, any> }) }));
  return { rx, s, verified };
}

test("a real agent SIGKILLed → one signed node.offline; started again → one node.online that resolves it", { timeout: 60_000 }, async (t) => {
  const { rx, s, verified } = await setup(t, 0);
  const node = await realAgentNode(t, s);
  const agent = await node.run();
  await node.presence("online");
  agent.proc.kill("SIGKILL");
  await agent.exited;
  await node.presence("offline");
  await until(() => rx.received.length === 1, "node.offline delivered", 10_000);
  const [offline] = verified();
  assert.equal(offline?.type, "node.offline");
  assert.equal(offline?.data.node_id, node.nodeId);

  const again = await node.run();
  t.after(() => again.proc.kill("SIGKILL"));
  await node.presence("online");
  s.clock.advance(WINDOW_MS); // the channel's group window the offline alert opened
  await until(() => rx.received.length === 2, "node.online delivered", 10_000);
  const online = verified()[1];
  assert.deepEqual([online?.type, online?.data.resolves, online?.data.node_id], ["node.online", offline?.data.alert_id, node.nodeId]);
  s.clock.advance(WINDOW_MS);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(rx.received.length, 2, "exactly one of each");
});

test("for_s 10: a real agent SIGKILLed and started again within 3 s delivers nothing; killed for good, node.offline 10 s later", { timeout: 60_000 }, async (t) => {
  const { rx, s } = await setup(t, 10);
  const node = await realAgentNode(t, s);
  const agent = await node.run();
  await node.presence("online");
  agent.proc.kill("SIGKILL");
  await agent.exited;
  await node.presence("offline");
  s.clock.advance(3_000);
  const again = await node.run();
  t.after(() => again.proc.kill("SIGKILL"));
  await node.presence("online");
  s.clock.advance(60_000);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(rx.received.length, 0, "nothing sent");

  // The same rule does alert a node that stays down.
  again.proc.kill("SIGKILL");
  await again.exited;
  await node.presence("offline");
  s.clock.advance(9_999);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(rx.received.length, 0, "held");
  s.clock.advance(1);
  await until(() => rx.received.length === 1, "node.offline after for_s", 10_000);
  assert.equal(JSON.parse(rx.received[0]?.body ?? "{}").type, "node.offline");
});
