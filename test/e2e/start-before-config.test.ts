// Start right after a bind, against the real agent: the service started the way `npm start`
// starts it (default 2 s push debounce), two dynamic nodes bound with the real `svcctl bind`
// in their own network namespaces, each served by a real `svcctl agent run` with wg-quick +
// wireguard-go. Node a gets Start within 100 ms of its bind, before its agent has even
// connected; node b gets Start as soon as its agent is online, before the automatic push's
// debounce ran out (the agent would answer "svc…conf does not exist"). Both starts must apply:
// the service pushes the config first and sends the start after the push's applied ACK, and the
// control log shows the push, then the start (spec §3.5, §3.8, §2.8, §6.4 rule 2).
// DESIGN §4: skipped unless root.
import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { freeTcpPort, runBindCommand, spawnInNamespace, svcctlPrefix, type LongRunningProcess } from "../helpers/agent.js";
import { api, login } from "../helpers/api.js";
import { createLab, type Lab } from "../helpers/netns.js";
import { startService, type RunningService } from "../helpers/service.js";
import { requireSystem } from "../helpers/system.js";
import { WIREGUARD_BINARIES, assertUserspaceInterface, createWgQuickBin, socketPath, type WgQuickBin } from "../helpers/wireguard.js";

const WITHIN_MS = 30_000;

interface CommandRow {
  log_id: number;
  kind: string;
  action: string | null;
  request_id: string | null;
  status: string | null;
  message: string | null;
}

async function waitUntil<T>(what: string, probe: () => Promise<T | undefined>, context: () => string): Promise<T> {
  const deadline = Date.now() + WITHIN_MS;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`timed out waiting for ${what}\n${context()}`);
    await delay(100);
  }
}

test("start within 100 ms of the bind, and start before the first automatic push: the real agent gets the config first, then the start applies", { timeout: 120_000 }, async (t) => {
  if (!requireSystem(t, { root: true, binaries: [...WIREGUARD_BINARIES, "npm", "node"] })) return;
  const started: { lab?: Lab; bin?: WgQuickBin; service?: RunningService; agents: LongRunningProcess[]; tunnels: Array<{ ns: string; iface: string; conf: string }> } = {
    agents: [],
    tunnels: [],
  };
  t.after(async () => {
    for (const agent of started.agents) await agent.stop().catch(() => undefined);
    for (const tunnel of started.tunnels) {
      if (started.lab === undefined || started.bin === undefined) break;
      await started.lab.exec(tunnel.ns, started.bin.wgQuick, ["down", tunnel.conf], { env: started.bin.env }).catch(() => rm(socketPath(tunnel.iface), { force: true }));
    }
    await started.lab?.destroy();
    await started.service?.stop();
  });

  const lab = (started.lab = await createLab(2, { prefix: "svcs", uplink: true }));
  const uplink = lab.uplink;
  assert.ok(uplink !== undefined);
  const bin = (started.bin = await createWgQuickBin(lab));
  const httpPort = await freeTcpPort(uplink.address);
  const service = (started.service = await startService({
    SVC_HTTP_HOST: uplink.address,
    SVC_HTTP_PORT: String(httpPort),
    SVC_PUBLIC_URL: `http://${uplink.address}:${httpPort}`,
    SVC_ENABLE_MQTT_SERVICES: "true",
    SVC_EMBEDDED_BROKER_HOST: uplink.address,
    SVC_EMBEDDED_BROKER_PORT: "0",
    SVC_MQTT_PUBLIC_HOST: uplink.address,
  }));
  const admin = api(service.baseUrl, await login(service.baseUrl, service.adminPassword));
  const config = (await admin.post("/api/v1/configs", { name: `e2e-start-${lab.suffix}`, tunnel_protocol: "wireguard", network_cidr: `10.215.${randomInt(1, 251)}.0/24` })) as { config_id: string };

  const nodes = [];
  for (const labNode of lab.nodes) {
    const letter = String.fromCharCode(97 + labNode.index);
    const iface = `svcs-${lab.suffix}-${letter}`;
    const node = (await admin.post(`/api/v1/configs/${config.config_id}/nodes`, { name: `node-${letter}`, mode: "dynamic", public_address: labNode.underlayAddress, listen_port: 51820, interface_name: iface })) as { node_id: string };
    const tunnelDir = join(lab.dir, `tunnels-${letter}`);
    started.tunnels.push({ ns: labNode.ns, iface, conf: join(tunnelDir, "wireguard", `${iface}.conf`) });
    nodes.push({ letter, ns: labNode.ns, iface, path: `/api/v1/configs/${config.config_id}/nodes/${node.node_id}`, profileDir: join(lab.dir, `profile-${letter}`), tunnelDir, agent: undefined as LongRunningProcess | undefined });
  }
  const [a, b] = nodes;
  assert.ok(a !== undefined && b !== undefined);
  type Node = typeof a;
  const context = (n: Node) => () => `--- agent ${n.letter} ---\n${n.agent?.output() ?? "(not started)"}\n--- service ---\n${service.output().slice(-4000)}`;
  const runAgent = (n: Node) => {
    const { cmd, args } = svcctlPrefix(n.profileDir);
    n.agent = spawnInNamespace(n.ns, cmd, [...args, "agent", "run"], { env: { ...bin.env, SVC_AGENT_TUNNEL_DIR: n.tunnelDir } });
    started.agents.push(n.agent);
  };
  const bindNode = async (n: Node) => {
    const { command } = (await admin.post(`${n.path}/bind-command`)) as { command: string };
    await runBindCommand(lab, n.ns, command, n.profileDir);
  };
  const commands = async (n: Node) =>
    ((await admin.get(`${n.path}/control-logs`)) as { logs: CommandRow[] }).logs.filter((l) => l.kind === "command").sort((x, y) => x.log_id - y.log_id);
  const status = async (n: Node) => (await admin.get(`${n.path}/endpoint-status`)) as { client_presence_state: string; runtime_state: string; config_version_state: string | null };

  /** The start of `requestId` closed by its ACK; the control log holds the push, then the start. */
  const startApplied = async (n: Node, requestId: string) => {
    const rows = await waitUntil(
      `node ${n.letter}: start ${requestId} closed`,
      async () => {
        const r = await commands(n);
        const start = r.find((l) => l.request_id === requestId);
        return start !== undefined && start.status !== "pending" && start.status !== "accepted" ? r : undefined;
      },
      context(n),
    );
    const start = rows.find((l) => l.request_id === requestId);
    assert.equal(start?.status, "applied", `node ${n.letter}: start ended ${start?.status}: ${start?.message}\n${context(n)()}`);
    assert.deepEqual(
      rows.map((r) => [r.action, r.status]),
      [
        ["push_config", "applied"],
        ["start", "applied"],
      ],
      `node ${n.letter}: one operation in the control log, the push first (spec §2.8)`,
    );
    await waitUntil(`node ${n.letter}: runtime running`, async () => ((await status(n)).runtime_state === "running" ? true : undefined), context(n));
    await assertUserspaceInterface(lab, n.ns, n.iface);
  };

  // Node a: Start within 100 ms of the bind; its agent is started at the same moment.
  await bindNode(a);
  const boundAt = performance.now();
  runAgent(a);
  const startA = (await admin.post(`${a.path}/control`, { action: "start" }).catch((err: unknown) => {
    throw new Error(`node a: the start right after the bind was refused\n${context(a)()}`, { cause: err });
  })) as { request_id: string; log: { status: string; message: string } };
  assert.ok(performance.now() - boundAt < 100, `the start was sent ${Math.round(performance.now() - boundAt)} ms after the bind`);
  assert.equal(startA.log.status, "pending");
  assert.match(startA.log.message, /^waiting for the first config/);
  await startApplied(a, startA.request_id);

  // Node b: its agent online, Start before the automatic push's 2 s debounce has run out.
  await bindNode(b);
  runAgent(b);
  await waitUntil("node b online", async () => ((await status(b)).client_presence_state === "online" ? true : undefined), context(b));
  const startB = (await admin.post(`${b.path}/control`, { action: "start" })) as { request_id: string; log: { message: string } };
  assert.match(startB.log.message, /^waiting for the first config/);
  await startApplied(b, startB.request_id);
  assert.equal((await status(b)).config_version_state, "latest");
});
