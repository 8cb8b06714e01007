/**
 * Measured link health on real WireGuard (docs/links.md): the service in this process (real
 * SQLite file, embedded broker on port 0, a ManualClock so that the link judgement's "now" stays
 * where the test puts it), five real agents (`runAgent`) whose toolchains run wg-quick +
 * wireguard-go inside each node's network namespace. After start and one ping round every pair
 * is `up`; then one host's interface is deleted and another host gets a peer by hand
 * (`wg set`): after a refresh the first host's four pairs are `down` and the other six stay
 * `up`, and the hand-added peer is drift. DESIGN §4: skipped unless root.
 */
import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { agentProfileSchema } from "../../src/agent/profile.js";
import { runAgent } from "../../src/agent/agent.js";
import { runCommand } from "../../src/agent/exec.js";
import { createToolchains } from "../../src/agent/toolchains.js";
import { testSettings } from "../../src/config.js";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { linkMatrixAnswer, linkRefreshAnswer, nodePeersAnswer } from "../../src/protocol/links.schema.js";
import { createServer } from "../../src/server.js";
import { api } from "../control/agent-harness.js";
import { listenAndLogin } from "../events/sse-harness.js";
import { cleanUpAfter, createLab, type Lab } from "../helpers/netns.js";
import { requireSystem } from "../helpers/system.js";
import { tempDir } from "../helpers/temp-dir.js";
import { WIREGUARD_BINARIES, createWgQuickBin, pingUntilReply, socketPath } from "../helpers/wireguard.js";

const ADMIN_PASSWORD = "correct horse battery staple";

async function waitUntil<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(50);
  }
}

interface Host {
  letter: string;
  ns: string;
  nodeId: string;
  iface: string;
  address: string;
  path: string;
}

test("links on real WireGuard: five agents all up after start and a ping round; a deleted interface's four pairs down, the rest up; a hand-added peer is drift", { timeout: 90_000 }, async (t) => {
  if (!requireSystem(t, { root: true, binaries: WIREGUARD_BINARIES })) return;
  const started: { lab?: Lab; stops: Array<() => Promise<void>>; ifaces: string[]; close?: () => Promise<void> } = { stops: [], ifaces: [] };
  cleanUpAfter(t, "links netns", [
    async () => {
      for (const stop of started.stops) await stop();
    },
    () => started.close?.(),
    () => started.lab?.destroy(),
    async () => {
      for (const iface of started.ifaces) await rm(socketPath(iface), { force: true });
    },
  ]);

  const lab = (started.lab = await createLab(5, { prefix: "svln" }));
  const bin = await createWgQuickBin(lab);
  const server = await createServer(testSettings({ dataDir: tempDir(t, "svc-links-"), adminPassword: ADMIN_PASSWORD }), createLogger("silent"), { clock: new ManualClock() });
  started.close = () => server.close();
  const s = await listenAndLogin(server, ADMIN_PASSWORD);
  const call = async (method: string, path: string, body?: unknown, auth = true) => {
    const r = await api(s, method, path, body, auth);
    assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${JSON.stringify(r.json)}`);
    return r.json;
  };

  const config = await call("POST", "/api/v1/configs", { name: `links-${lab.suffix}`, tunnel_protocol: "wireguard", network_cidr: `10.216.${randomInt(1, 251)}.0/24` });
  const base = `/api/v1/configs/${config.config_id}`;
  const hosts: Host[] = [];
  for (const labNode of lab.nodes) {
    const letter = String.fromCharCode(97 + labNode.index);
    // wireguard-go's control sockets share /var/run/wireguard across namespaces: distinct names.
    const iface = `svln-${lab.suffix}-${letter}`;
    started.ifaces.push(iface);
    const node = await call("POST", `${base}/nodes`, { name: `node-${letter}`, mode: "dynamic", public_address: labNode.underlayAddress, listen_port: 51820, interface_name: iface });
    hosts.push({ letter, ns: labNode.ns, nodeId: node.node_id, iface, address: String(node.address).split("/")[0] ?? "", path: `${base}/nodes/${node.node_id}` });
  }

  for (const h of hosts) {
    const cmd = await call("POST", `${h.path}/bind-command`);
    const token = /--token (\S+)$/.exec(cmd.command)?.[1];
    const profile = agentProfileSchema.parse(await call("POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.0.0", platform: "linux", hostname: h.letter }, false));
    const dir = tempDir(t, `svc-links-agent-${h.letter}-`);
    // The agent's tools run inside the node's namespace, with the lab's wg-quick (wireguard-go) first on PATH.
    const toolchains = createToolchains({
      platform: "linux",
      env: process.env,
      run: (file, args, opts) => runCommand("ip", ["netns", "exec", h.ns, file, ...args], { ...opts, env: { ...process.env, ...bin.env } }),
      configDirs: { wireguard: join(dir, "wireguard"), awg_2: join(dir, "amneziawg") },
    });
    const ctl = new AbortController();
    const running = runAgent({ profile, profileDir: dir, log: () => undefined, signal: ctl.signal, toolchains, isPrivileged: () => true });
    started.stops.push(() => (ctl.abort(), running));
  }

  const status = async (h: Host) => (await call("GET", `${h.path}/endpoint-status`)) as { client_presence_state: string; runtime_state: string; config_version_state: string | null };
  for (const h of hosts) await waitUntil(`${h.letter} online`, 20_000, async () => ((await status(h)).client_presence_state === "online" ? true : undefined));
  // start: the staged config is pushed first, then the interface is brought up (one operation).
  await Promise.all(hosts.map((h) => call("POST", `${h.path}/control`, { action: "start" })));
  for (const h of hosts) {
    await waitUntil(`${h.letter} running the latest config`, 30_000, async () => {
      const st = await status(h);
      return st.runtime_state === "running" && st.config_version_state === "latest" ? true : undefined;
    });
  }
  for (const [i, from] of hosts.entries()) {
    for (const to of hosts.slice(i + 1)) await pingUntilReply(lab, from.ns, to.address);
  }

  const first = linkRefreshAnswer.parse(await call("POST", `${base}/links/refresh`));
  assert.deepEqual([first.asked.length, first.reported.length, first.timed_out.length], [5, 5, 0]);
  assert.equal(first.links.length, 10);
  assert.deepEqual(first.links.map((l) => `${l.link}/${l.configured}`), Array(10).fill("up/ok"), JSON.stringify(first.links));
  for (const l of first.links) assert.ok(l.a_to_b !== null && l.b_to_a !== null && l.a_to_b.latest_handshake_at !== null && l.a_to_b.rx_bytes > 0);
  assert.deepEqual(first.drift, [], "every host runs exactly its staged peers");

  const [gone, tampered] = hosts;
  assert.ok(gone !== undefined && tampered !== undefined);
  await lab.exec(gone.ns, "ip", ["link", "del", "dev", gone.iface]);
  const stranger = (await lab.exec(tampered.ns, "sh", ["-c", "wg genkey | wg pubkey"])).stdout.trim();
  await lab.exec(tampered.ns, "wg", ["set", tampered.iface, "peer", stranger, "allowed-ips", "10.250.0.1/32"]);

  const after = linkRefreshAnswer.parse(await call("POST", `${base}/links/refresh`));
  assert.equal(after.reported.length, 5);
  for (const l of after.links) {
    const touches: boolean = String(l.node_a) === gone.nodeId || String(l.node_b) === gone.nodeId;
    assert.equal(l.link, touches ? "down" : "up", `${l.node_a}–${l.node_b}`);
  }
  assert.equal(after.links.filter((l) => l.link === "down").length, 4);
  const drift = new Map(after.drift.map((d) => [String(d.node_id), d]));
  assert.deepEqual(drift.get(tampered.nodeId)?.extra_peers, [stranger], "the hand-added peer is drift");
  assert.equal(drift.get(gone.nodeId)?.missing_peers.length, 4, "a stopped interface misses every staged peer");

  const matrix = linkMatrixAnswer.parse(await call("GET", `${base}/links`));
  assert.deepEqual(matrix.links, after.links, "the stored reports answer the same matrix");
  const peers = nodePeersAnswer.parse(await call("GET", `${tampered.path}/peers`));
  assert.equal(peers.peers.length, 5);
  assert.deepEqual(peers.peers.filter((p) => p.node_id === null).map((p) => p.public_key), [stranger]);
});
