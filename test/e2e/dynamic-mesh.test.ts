// The real dynamic mesh: the service started the way `npm start` starts it (MQTT services on,
// embedded broker), three dynamic nodes created over HTTP, each bound by running the console's
// bind command word for word with the real `svcctl` inside the node's own network namespace,
// each served by a real `svcctl agent run` there, and everything after that driven through REST
// and SSE only: config push, start, pings over the tunnels, stop, detect, wg_show, reset-client.
// Tunnels are real wg-quick + wireguard-go (the lab's shim directory first on the agents' PATH).
// The agents reach the service through the lab's uplink (a veth from the root namespace to the
// lab's bridge): no traffic leaves our own namespaces and veths. DESIGN §4: skipped unless root.
import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { access, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { openStream, type SseClient, type SseFrame } from "../events/sse-harness.js";
import type { LongRunningProcess } from "../helpers/agent.js";
import { freeTcpPort, runBindCommand, spawnInNamespace, svcctlPrefix } from "../helpers/agent.js";
import { api, login } from "../helpers/api.js";
import type { ExecResult, Lab, LabNode } from "../helpers/netns.js";
import { createLab, run } from "../helpers/netns.js";
import type { RunningService } from "../helpers/service.js";
import { startService } from "../helpers/service.js";
import { requireSystem } from "../helpers/system.js";
import type { WgQuickBin } from "../helpers/wireguard.js";
import { WIREGUARD_BINARIES, assertUserspaceInterface, createWgQuickBin, pingUntilReply, socketPath } from "../helpers/wireguard.js";

const LISTEN_PORT = 51820;
const STREAM_PATH = "/api/v1/events/stream";

/** Bounds of the waits below; together they keep the test well inside its 120 s. */
const ONLINE_WITHIN_MS = 30_000;
const COMMAND_WITHIN_MS = 20_000;
const POLL_MS = 100;

const ConfigAnswer = z.object({ config_id: z.string().min(1), tunnel_protocol: z.literal("wireguard") });

const NodeAnswer = z.object({
  node_id: z.string().min(1),
  config_id: z.string(),
  name: z.string(),
  mode: z.literal("dynamic"),
  interface_name: z.string(),
  address: z.string().min(1),
  public_address: z.string().nullable(),
  listen_port: z.number().int().nullable(),
  public_key: z.string().min(1),
});
type NodeAnswer = z.infer<typeof NodeAnswer>;

const BindCommandAnswer = z.object({ command: z.string().min(1), expires_at: z.string().min(1) });

/** What `svcctl bind` stores: the bind answer (spec §2.6). */
const StoredProfile = z.object({
  profile: z.object({ config_id: z.string(), node_id: z.string(), server_url: z.string() }),
  mqtt: z.object({ host: z.string(), port: z.number().int(), tls: z.boolean(), username: z.string(), client_id: z.string() }),
});
type StoredProfile = z.infer<typeof StoredProfile>;

const EndpointStatus = z.object({
  config_id: z.string(),
  node_id: z.string(),
  client_initialized: z.boolean(),
  client_presence_state: z.enum(["online", "dropped", "offline"]),
  runtime_state: z.enum(["unknown", "running", "stopped"]),
  last_reachable_at: z.string().nullable(),
  config_version_state: z.enum(["latest", "pending"]).nullable(),
  staged_config: z.object({ config_version: z.number(), config_sha256: z.string().nullable() }),
  confirmed_config: z.object({ config_version: z.number().nullable(), config_sha256: z.string().nullable() }),
});
type EndpointStatus = z.infer<typeof EndpointStatus>;

const ControlLog = z.object({
  log_id: z.number(),
  node_id: z.string(),
  request_id: z.string().nullable(),
  kind: z.enum(["command", "output", "event"]),
  action: z.string().nullable(),
  status: z.enum(["pending", "accepted", "applied", "failed", "timed_out"]).nullable(),
  message: z.string().nullable(),
  stream: z.string().nullable(),
  output: z.string().nullable(),
});
type ControlLog = z.infer<typeof ControlLog>;

const ControlAnswer = z.object({ request_id: z.string().min(1), log: ControlLog });
const ControlLogsAnswer = z.object({ logs: z.array(ControlLog) });
const ControlLogFramePayload = z.object({ config_id: z.string(), node_id: z.string(), log: ControlLog });

/** One node of the mesh: the lab namespace, the node over HTTP, its agent's directories and process. */
interface MeshNode {
  letter: string;
  lab: LabNode;
  node: NodeAnswer;
  /** `/api/v1/configs/{config_id}/nodes/{node_id}` */
  path: string;
  profileDir: string;
  tunnelDir: string;
  profile?: StoredProfile;
  agent?: LongRunningProcess;
}

/** The tunnel address without its prefix length. */
function hostOf(address: string): string {
  return address.split("/")[0] ?? address;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The config file the agent writes (RunAgentOptions.tunnelDir: `<tunnelDir>/wireguard/<iface>.conf`). */
function tunnelConfigPath(mesh: MeshNode): string {
  return join(mesh.tunnelDir, "wireguard", `${mesh.node.interface_name}.conf`);
}

/**
 * Where the agent would write the config if it ignored SVC_AGENT_TUNNEL_DIR (the toolchain's
 * Linux default). The file name carries the lab's random suffix, so a file there is ours.
 */
function systemConfigPath(mesh: MeshNode): string {
  return join("/etc/wireguard", `${mesh.node.interface_name}.conf`);
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Polls `probe` every 100 ms until it returns a value other than undefined; bounded by
 * `timeoutMs`. On timeout the error names `what` and the last value seen (and `context()`).
 */
async function waitUntil<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined> | T | undefined,
  context?: () => string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    last = value;
    if (Date.now() >= deadline) break;
    await delay(POLL_MS);
  }
  const tail = context === undefined ? "" : `\n${context()}`;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})${tail}`);
}

/** The broker port from the service's "listening" line (`mqtt_port`). */
function listeningMqttPort(output: string): number {
  for (const line of output.split("\n")) {
    try {
      const record = JSON.parse(line) as { msg?: unknown; mqtt_port?: unknown };
      if (record.msg === "listening" && typeof record.mqtt_port === "number") return record.mqtt_port;
    } catch {
      // not a JSON log line (npm's banner)
    }
  }
  throw new Error(`no "listening" line with mqtt_port in the service output:\n${output}`);
}

/** JSON log lines of the service printed after `offset`. */
function serviceRecordsSince(service: RunningService, offset: number): Array<Record<string, unknown>> {
  const records: Array<Record<string, unknown>> = [];
  for (const line of service.output().slice(offset).split("\n")) {
    try {
      const record: unknown = JSON.parse(line);
      if (typeof record === "object" && record !== null) records.push(record as Record<string, unknown>);
    } catch {
      // a partial or non-JSON line
    }
  }
  return records;
}

/** The frame matching `match` among those received so far, waiting (bounded) for it to arrive. */
function waitForFrame(stream: SseClient, what: string, match: (frame: SseFrame) => boolean, timeoutMs = COMMAND_WITHIN_MS): Promise<SseFrame> {
  return waitUntil(what, timeoutMs, () => stream.frames.find(match), () => `frames so far: ${stream.frames.map((f) => f.event).join(", ")}`);
}

async function pingFails(lab: Lab, ns: string, address: string): Promise<boolean> {
  try {
    await lab.exec(ns, "ping", ["-n", "-c", "1", "-W", "1", address]);
    return false;
  } catch {
    return true;
  }
}

async function linkExists(lab: Lab, ns: string, interfaceName: string): Promise<boolean> {
  try {
    await lab.exec(ns, "ip", ["link", "show", "dev", interfaceName]);
    return true;
  } catch {
    return false;
  }
}

test(
  "dynamic mesh: three dynamic nodes bound with the real svcctl run agents in their namespaces; push, start, ping, stop, detect, wg_show and reset-client all driven over REST and SSE",
  { timeout: 120_000 },
  async (t) => {
    if (!requireSystem(t, { root: true, binaries: [...WIREGUARD_BINARIES, "npm", "node"] })) return;

    const started: { lab?: Lab; bin?: WgQuickBin; service?: RunningService; stream?: SseClient; mesh: MeshNode[] } = { mesh: [] };
    const bindResults: Array<{ letter: string; result: ExecResult }> = [];
    // Runs even when the test fails midway: the SSE stream closed, every agent stopped (its
    // process group, wireguard-go included), tunnels left behind taken down, the namespaces and
    // the uplink deleted with anything still running in them, the lab's temp dir (profiles,
    // tunnel configs) removed, and the service's process group stopped.
    t.after(async () => {
      const errors: unknown[] = [];
      const attempt = async (step: () => Promise<unknown> | unknown): Promise<void> => {
        try {
          await step();
        } catch (error) {
          errors.push(error);
        }
      };
      await attempt(() => started.stream?.destroy());
      for (const mesh of started.mesh) await attempt(() => mesh.agent?.stop());
      for (const mesh of started.mesh) {
        await attempt(async () => {
          const { lab, bin } = started;
          if (lab === undefined || bin === undefined || !(await exists(socketPath(mesh.node.interface_name)))) return;
          try {
            await lab.exec(mesh.lab.ns, bin.wgQuick, ["down", tunnelConfigPath(mesh)], { env: bin.env });
          } catch {
            // wireguard-go exits when its control socket is deleted; destroy() kills the rest.
            await rm(socketPath(mesh.node.interface_name), { force: true });
          }
        });
      }
      // An agent that ignored SVC_AGENT_TUNNEL_DIR wrote into the host's /etc/wireguard: remove it.
      for (const mesh of started.mesh) await attempt(() => rm(systemConfigPath(mesh), { force: true }));
      await attempt(() => started.lab?.destroy());
      await attempt(async () => {
        const uplinkName = started.lab?.uplink?.interfaceName;
        if (uplinkName === undefined) return;
        const { stdout } = await run("ip", ["-o", "link", "show"]);
        if (stdout.includes(`: ${uplinkName}@`)) throw new Error(`the uplink ${uplinkName} is still in the root namespace`);
      });
      await attempt(() => started.service?.stop());
      if (errors.length > 0) throw new AggregateError(errors, "dynamic mesh cleanup failed");
    });

    try {
      const lab = (started.lab = await createLab(3, { prefix: "svcd", uplink: true }));
      const uplink = lab.uplink;
      assert.ok(uplink !== undefined, "the lab has an uplink");
      const bin = (started.bin = await createWgQuickBin(lab));

      const httpPort = await freeTcpPort(uplink.address);
      const publicUrl = `http://${uplink.address}:${httpPort}`;
      const service = (started.service = await startService({
        SVC_HTTP_HOST: uplink.address,
        SVC_HTTP_PORT: String(httpPort),
        SVC_PUBLIC_URL: publicUrl,
        SVC_ENABLE_MQTT_SERVICES: "true",
        SVC_EMBEDDED_BROKER_HOST: uplink.address,
        SVC_EMBEDDED_BROKER_PORT: "0",
        SVC_MQTT_PUBLIC_HOST: uplink.address,
        SVC_CONFIG_PUSH_DEBOUNCE_MS: "200",
      }));
      const { baseUrl } = service;
      assert.equal(baseUrl, publicUrl, "the service listens on the uplink address");
      const mqttPort = listeningMqttPort(service.output());
      const token = await login(baseUrl, service.adminPassword);
      const admin = api(baseUrl, token);

      const config = ConfigAnswer.parse(
        await admin.post("/api/v1/configs", {
          name: `e2e-dynamic-mesh-${lab.suffix}`,
          tunnel_protocol: "wireguard",
          network_cidr: `10.214.${randomInt(1, 251)}.0/24`,
        }),
      );
      const nodesPath = `/api/v1/configs/${config.config_id}/nodes`;

      const mesh = started.mesh;
      for (const labNode of lab.nodes) {
        const letter = String.fromCharCode(97 + labNode.index);
        // wireguard-go's control sockets share /var/run/wireguard across namespaces: distinct names.
        const interfaceName = `svcd-${lab.suffix}-${letter}`;
        const node = NodeAnswer.parse(
          await admin.post(nodesPath, {
            name: `node-${letter}`,
            mode: "dynamic",
            public_address: labNode.underlayAddress,
            listen_port: LISTEN_PORT,
            interface_name: interfaceName,
          }),
        );
        assert.equal(node.interface_name, interfaceName);
        mesh.push({
          letter,
          lab: labNode,
          node,
          path: `${nodesPath}/${node.node_id}`,
          profileDir: join(lab.dir, `profile-${letter}`),
          tunnelDir: join(lab.dir, `tunnels-${letter}`),
        });
      }
      const status = async (m: MeshNode): Promise<EndpointStatus> => EndpointStatus.parse(await admin.get(`${m.path}/endpoint-status`));
      const logs = async (m: MeshNode): Promise<ControlLog[]> => ControlLogsAnswer.parse(await admin.get(`${m.path}/control-logs`)).logs;
      const agentOutput = (m: MeshNode): string => `--- agent ${m.letter} output ---\n${m.agent?.output() ?? "(not started)"}`;
      /** Bounded wait for a node's endpoint status to satisfy `ok`; fails fast if its agent died. */
      const statusUntil = (m: MeshNode, what: string, ok: (s: EndpointStatus) => boolean, timeoutMs = COMMAND_WITHIN_MS) => {
        let last: EndpointStatus | undefined;
        return waitUntil(
          `node ${m.letter}: ${what}`,
          timeoutMs,
          async () => {
            if (m.agent !== undefined && !m.agent.running()) throw new Error(`agent ${m.letter} exited\n${agentOutput(m)}`);
            last = await status(m);
            return ok(last) ? last : undefined;
          },
          () => `last status: ${JSON.stringify(last)}\n${agentOutput(m)}`,
        );
      };
      /** Sends a control action over REST (202) and waits for its control log to be closed by an ACK. */
      const command = async (m: MeshNode, action: "push_config" | "start" | "stop" | "wg_show"): Promise<ControlLog> => {
        const answer = ControlAnswer.parse(await admin.post(`${m.path}/control`, { action }));
        assert.equal(answer.log.kind, "command");
        assert.equal(answer.log.action, action);
        // spec §3.4 / §6.4 rule 2: only an ACK with the same request_id closes the command.
        const closed = await waitUntil(
          `node ${m.letter}: ${action} (${answer.request_id}) closed by an ACK`,
          COMMAND_WITHIN_MS,
          async () => {
            const row = (await logs(m)).find((log) => log.kind === "command" && log.request_id === answer.request_id);
            return row !== undefined && row.status !== "pending" && row.status !== "accepted" ? row : undefined;
          },
          () => agentOutput(m),
        );
        assert.equal(closed.status, "applied", `node ${m.letter}: ${action} ended ${closed.status}: ${closed.message ?? ""}\n${agentOutput(m)}`);
        return closed;
      };

      // --- Bind: the console's command, word for word, inside each node's namespace. ---
      for (const m of mesh) {
        const { command: bindCommand } = BindCommandAnswer.parse(await admin.post(`${m.path}/bind-command`));
        // spec §4 rule 10: a one-time token in a `svcctl bind` command naming the public URL.
        assert.match(bindCommand, new RegExp(`^svcctl bind --server ${escapeRegExp(publicUrl)} --token \\S+$`));
        bindResults.push({ letter: m.letter, result: await runBindCommand(lab, m.lab.ns, bindCommand, m.profileDir) });
        const profile = (m.profile = StoredProfile.parse(JSON.parse(await readFile(join(m.profileDir, "profile.json"), "utf8"))));
        assert.deepEqual(profile.profile, { config_id: config.config_id, node_id: m.node.node_id, server_url: publicUrl });
        // The profile sends the agent to the broker's actual port on the uplink, in plain MQTT.
        assert.equal(profile.mqtt.host, uplink.address);
        assert.equal(profile.mqtt.port, mqttPort);
        assert.equal(profile.mqtt.tls, false);
        // spec §4 rule 11 / §3.1: bound, and offline until the first signal.
        const bound = await status(m);
        assert.equal(bound.client_initialized, true);
        assert.equal(bound.client_presence_state, "offline");
      }

      // --- Agents: `svcctl agent run` as a long-running child in each namespace. ---
      for (const m of mesh) {
        const { cmd, args } = svcctlPrefix(m.profileDir);
        m.agent = spawnInNamespace(m.lab.ns, cmd, [...args, "agent", "run"], {
          env: { ...bin.env, SVC_AGENT_TUNNEL_DIR: m.tunnelDir },
        });
      }
      // spec §3.1: the first reachable signal (the agent's mqtt_connected event and heartbeat) → online.
      for (const m of mesh) await statusUntil(m, "online", (s) => s.client_presence_state === "online", ONLINE_WITHIN_MS);

      // --- Config push (spec §3.8, §3.5). ---
      for (const m of mesh) {
        await command(m, "push_config");
        const s = await statusUntil(m, "config_version_state latest", (s) => s.config_version_state === "latest");
        assert.equal(s.confirmed_config.config_sha256, s.staged_config.config_sha256);
        if (!(await exists(tunnelConfigPath(m))) && (await exists(systemConfigPath(m)))) {
          assert.fail(`agent ${m.letter} ignored SVC_AGENT_TUNNEL_DIR: it wrote ${systemConfigPath(m)}, not ${tunnelConfigPath(m)}`);
        }
        const text = await readFile(tunnelConfigPath(m), "utf8");
        assert.match(text, new RegExp(`^ListenPort\\s*=\\s*${LISTEN_PORT}\\s*$`, "m"));
        assert.equal(text.match(/^\[Peer\]\s*$/gm)?.length, mesh.length - 1, "one [Peer] per other node");
        // spec §3.8 step 4: the interface was not running, so the push only wrote the config.
        assert.equal(await linkExists(lab, m.lab.ns, m.node.interface_name), false, `node ${m.letter}: push did not start the tunnel`);
      }

      // --- Start (spec §3.3: running = the client reports the profile interface running). ---
      for (const m of mesh) {
        await command(m, "start");
        await statusUntil(m, "runtime running", (s) => s.runtime_state === "running");
        await assertUserspaceInterface(lab, m.lab.ns, m.node.interface_name);
      }
      for (const from of mesh) {
        for (const to of mesh) if (from !== to) await pingUntilReply(lab, from.lab.ns, hostOf(to.node.address));
      }

      // --- Stop one node. ---
      const [nodeA, nodeB, nodeC] = mesh;
      assert.ok(nodeA !== undefined && nodeB !== undefined && nodeC !== undefined);
      await command(nodeC, "stop");
      await statusUntil(nodeC, "runtime stopped", (s) => s.runtime_state === "stopped");
      assert.equal(await linkExists(lab, nodeC.lab.ns, nodeC.node.interface_name), false, "node c's tunnel is down");
      for (const from of [nodeA, nodeB]) {
        assert.equal(await pingFails(lab, from.lab.ns, hostOf(nodeC.node.address)), true, `node ${from.letter} no longer reaches node c`);
      }
      await pingUntilReply(lab, nodeA.lab.ns, hostOf(nodeB.node.address));

      // --- Detect (spec §6.4 rule 8): an SSE subscriber starts the rounds; each ACK refreshes
      // last_reachable_at (spec §6.4 rule 3) and its wg_online sets the runtime state (§3.3). ---
      const reachableBefore = new Map<MeshNode, number>();
      for (const m of mesh) reachableBefore.set(m, Date.parse((await status(m)).last_reachable_at ?? "1970-01-01T00:00:00Z"));
      const newest = Math.max(...reachableBefore.values());
      while (Date.now() <= newest + 1) await delay(2); // so a later ACK shows as a later millisecond
      const stream = (started.stream = await openStream(`${baseUrl}${STREAM_PATH}`, { authorization: `Bearer ${token}` }));
      assert.equal(stream.status, 200, "the SSE stream opens with the bearer token (spec §5)");
      // spec §6.5 rule 1: the stream opens with system.status.updated and system.clock.sync.
      await waitForFrame(stream, "system.clock.sync", (f) => f.event === "system.clock.sync");
      assert.equal(stream.frames[0]?.event, "system.status.updated");
      for (const m of mesh) {
        const before = reachableBefore.get(m) ?? 0;
        const after = await statusUntil(m, "last_reachable_at advanced by a detect ACK", (s) => Date.parse(s.last_reachable_at ?? "") > before);
        assert.equal(after.client_presence_state, "online");
        // wg_online of the detect ACK: only the profile interface (spec §6.3).
        assert.equal(after.runtime_state, m === nodeC ? "stopped" : "running", `node ${m.letter} after the detect round`);
      }

      // --- wg_show (spec §6.5 diagnostics flow): output as an event → a log → control.log.created. ---
      const showAnswer = ControlAnswer.parse(await admin.post(`${nodeA.path}/control`, { action: "wg_show" }));
      const outputFrame = await waitForFrame(stream, "control.log.created with node a's wg_show stdout", (f) => {
        if (f.event !== "control.log.created") return false;
        const payload = ControlLogFramePayload.safeParse(f.json.payload);
        return payload.success && payload.data.node_id === nodeA.node.node_id && payload.data.log.kind === "output" && payload.data.log.stream === "stdout";
      });
      assert.equal(outputFrame.json.type, "control.log.created");
      const outputLog = ControlLogFramePayload.parse(outputFrame.json.payload).log;
      assert.equal(outputLog.request_id, showAnswer.request_id, "the output belongs to this wg_show");
      assert.equal(outputLog.action, "wg_show");
      assert.match(outputLog.output ?? "", /interface: /);
      assert.match(outputLog.output ?? "", /peer: /);
      assert.ok((outputLog.output ?? "").includes(nodeA.node.interface_name));
      // spec §6.4 rule 4: the info ACK only marks completion; it carries no output.
      const showLog = await waitUntil("node a: wg_show closed by its info ACK", COMMAND_WITHIN_MS, async () => {
        const row = (await logs(nodeA)).find((log) => log.kind === "command" && log.request_id === showAnswer.request_id);
        return row?.status === "applied" || row?.status === "failed" ? row : undefined;
      });
      assert.equal(showLog.status, "applied");
      assert.equal(showLog.output, null);

      // --- Reset client (spec §4 rule 12, §3.1). ---
      const clientId = nodeC.profile?.mqtt.client_id ?? "";
      const agentC = nodeC.agent;
      assert.ok(agentC !== undefined);
      const serviceOffset = service.output().length;
      const agentOffset = agentC.outputLength();
      const reset = EndpointStatus.parse(await admin.post(`${nodeC.path}/reset-client`));
      assert.equal(reset.client_initialized, false);
      assert.equal(reset.client_presence_state, "offline");
      assert.equal(reset.runtime_state, "unknown");
      // The agent is cut off and keeps reconnecting with its old credentials, which the broker
      // now refuses (spec §4 rule 12: old MQTT credentials must stop working).
      await waitUntil(
        "the broker refusing node c's agent after the reset",
        COMMAND_WITHIN_MS,
        () =>
          serviceRecordsSince(service, serviceOffset).find(
            (record) => typeof record["msg"] === "string" && record["msg"].startsWith("mqtt connect refused") && record["clientId"] === clientId,
          ),
        () => agentOutput(nodeC),
      );
      assert.ok(agentC.running(), `agent c keeps running (and retrying)\n${agentOutput(nodeC)}`);
      assert.doesNotMatch(agentC.outputSince(agentOffset), /"msg":"connected"/, "agent c never connected again");
      const afterReset = await status(nodeC);
      assert.equal(afterReset.client_presence_state, "offline");
      assert.equal(afterReset.client_initialized, false);
      for (const m of [nodeA, nodeB]) {
        const s = await status(m);
        assert.equal(s.client_presence_state, "online", `node ${m.letter} stays online`);
        assert.equal(s.client_initialized, true);
        assert.equal(s.runtime_state, "running");
      }
    } catch (error) {
      const sections: string[] = [];
      if (started.service !== undefined) sections.push(`--- service output ---\n${started.service.output()}`);
      for (const { letter, result } of bindResults) sections.push(`--- svcctl bind ${letter} ---\n${result.stdout}${result.stderr}`);
      for (const m of started.mesh) if (m.agent !== undefined) sections.push(`--- agent ${m.letter} output ---\n${m.agent.output()}`);
      for (const line of sections.join("\n").trimEnd().split("\n")) t.diagnostic(line);
      throw error;
    }
  },
);
