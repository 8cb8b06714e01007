/**
 * A live mesh for measuring how pushes disturb running tunnels (docs/decisions.md "Hitless peer
 * updates"): the service started as `npm start` starts it (MQTT on, embedded broker), one config
 * with the chosen `apply_mode`, dynamic nodes each bound with the console's bind command and
 * served by a real `svcctl agent run` in its own network namespace, real wg-quick + wireguard-go
 * tunnels, and continuous pings between namespaces whose lost replies are counted. Used by the
 * small CI test (test/e2e/hitless.test.ts) and the benchmark (scripts/bench/hitless.ts); root only.
 */
import { randomInt } from "node:crypto";
import { access, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import type { ApplyMode } from "../../src/protocol/enums.js";
import { freeTcpPort, runBindCommand, spawnInNamespace, svcctlPrefix, type LongRunningProcess } from "../../test/helpers/agent.js";
import { login } from "../../test/helpers/api.js";
import { createLab, type Lab, type LabNode } from "../../test/helpers/netns.js";
import { startService, type RunningService } from "../../test/helpers/service.js";
import { createWgQuickBin, socketPath, type WgQuickBin } from "../../test/helpers/wireguard.js";

export const LISTEN_PORT = 51820;
const POLL_MS = 100;
const ONLINE_WITHIN_MS = 40_000;
const COMMAND_WITHIN_MS = 30_000;

const NodeAnswer = z.object({ node_id: z.string(), name: z.string(), address: z.string(), interface_name: z.string() });
const ControlLog = z.object({
  log_id: z.number(),
  request_id: z.string().nullable(),
  kind: z.string(),
  action: z.string().nullable(),
  status: z.string().nullable(),
  message: z.string().nullable(),
});
export type ControlLog = z.infer<typeof ControlLog>;
const EndpointStatus = z.object({ client_presence_state: z.string(), runtime_state: z.string(), config_version_state: z.string().nullable() });

/** One node of the mesh: its namespace, its REST row, its agent. */
export interface Member {
  letter: string;
  lab: LabNode;
  nodeId: string;
  /** Tunnel address without its prefix length. */
  host: string;
  interfaceName: string;
  /** `/api/v1/configs/{config_id}/nodes/{node_id}` */
  path: string;
  profileDir: string;
  tunnelDir: string;
  agent?: LongRunningProcess;
}

export interface MeshLab {
  lab: Lab;
  service: RunningService;
  configId: string;
  members: Member[];
  /** A JSON request as the admin; throws on a non-2xx answer. */
  request(method: string, path: string, body?: unknown): Promise<unknown>;
  /** Creates the dynamic node of lab namespace `index` (public address = its underlay address). */
  addMember(index: number): Promise<Member>;
  /** Runs the console's bind command in the member's namespace. @returns when the bind completed (ms, Date.now()) */
  bind(m: Member): Promise<number>;
  /** Starts `svcctl agent run` in the member's namespace. */
  runAgent(m: Member): void;
  /** Waits (bounded) until the member's endpoint status satisfies `ok`. */
  statusUntil(m: Member, what: string, ok: (s: z.infer<typeof EndpointStatus>) => boolean): Promise<void>;
  /** Sends a control action and waits for its ACK; throws unless it ended `applied`. */
  command(m: Member, action: "start" | "push_config"): Promise<ControlLog>;
  /** The newest control log id of each member (a mark for {@link pushesAfter}). */
  logMarks(members: readonly Member[]): Promise<Map<Member, number>>;
  /** Waits for one closed `push_config` command after each member's mark; throws unless each ended `applied`. */
  pushesAfter(marks: Map<Member, number>): Promise<Map<Member, ControlLog>>;
  /** Everything the agents and the service printed, for a failure message. */
  diagnostics(): string;
  /** Stops agents, takes tunnels down, deletes the namespaces, stops the service. Idempotent. */
  close(): Promise<void>;
}

/**
 * Builds the lab (`namespaces` namespaces with an uplink), starts the service and creates the
 * config. No node exists yet. `close()` must be called whatever happens.
 */
export async function startMeshLab(opts: { namespaces: number; prefix: string; applyMode: ApplyMode }): Promise<MeshLab> {
  const lab = await createLab(opts.namespaces, { prefix: opts.prefix, uplink: true });
  const members: Member[] = [];
  let service: RunningService | undefined;
  let bin: WgQuickBin | undefined;
  const close = closer(lab, members, () => service, () => bin);
  try {
    const uplink = lab.uplink;
    if (uplink === undefined) throw new Error("the lab has no uplink");
    bin = await createWgQuickBin(lab);
    const httpPort = await freeTcpPort(uplink.address);
    service = await startService({
      SVC_HTTP_HOST: uplink.address,
      SVC_HTTP_PORT: String(httpPort),
      SVC_PUBLIC_URL: `http://${uplink.address}:${httpPort}`,
      SVC_ENABLE_MQTT_SERVICES: "true",
      SVC_EMBEDDED_BROKER_HOST: uplink.address,
      SVC_EMBEDDED_BROKER_PORT: "0",
      SVC_MQTT_PUBLIC_HOST: uplink.address,
      SVC_CONFIG_PUSH_DEBOUNCE_MS: "200",
    });
    const request = requester(service.baseUrl, await login(service.baseUrl, service.adminPassword));
    const network = `10.215.${randomInt(1, 251)}.0/24`;
    const config = z.object({ config_id: z.string(), apply_mode: z.string() }).parse(
      await request("POST", "/api/v1/configs", { name: `hitless-${lab.suffix}`, tunnel_protocol: "wireguard", network_cidr: network, apply_mode: opts.applyMode }),
    );
    if (config.apply_mode !== opts.applyMode) throw new Error(`the config's apply_mode is ${config.apply_mode}`);
    return meshLab({ lab, service, bin, request, configId: config.config_id, members, close, prefix: opts.prefix });
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
}

interface Parts {
  lab: Lab;
  service: RunningService;
  bin: WgQuickBin;
  request: MeshLab["request"];
  configId: string;
  members: Member[];
  close: () => Promise<void>;
  prefix: string;
}

function meshLab(p: Parts): MeshLab {
  const { lab, service, request, members } = p;
  const nodesPath = `/api/v1/configs/${p.configId}/nodes`;
  const logs = async (m: Member) => z.object({ logs: z.array(ControlLog) }).parse(await request("GET", `${m.path}/control-logs`)).logs;
  const diagnostics = () =>
    [`--- service ---\n${service.output().slice(-20_000)}`, ...members.map((m) => `--- agent ${m.letter} ---\n${m.agent?.output().slice(-8_000) ?? "(not started)"}`)].join("\n");
  const closedCommand = async (m: Member, match: (log: ControlLog) => boolean, what: string): Promise<ControlLog> => {
    const row = await waitUntil(`node ${m.letter}: ${what}`, COMMAND_WITHIN_MS, async () =>
      (await logs(m)).find((log) => log.kind === "command" && match(log) && log.status !== "pending" && log.status !== "accepted"),
    );
    if (row.status !== "applied") throw new Error(`node ${m.letter}: ${what} ended ${row.status}: ${row.message ?? ""}\n${diagnostics()}`);
    return row;
  };
  return {
    lab,
    service,
    configId: p.configId,
    members,
    request,
    diagnostics,
    close: p.close,
    async addMember(index) {
      const labNode = lab.nodes[index];
      if (labNode === undefined) throw new Error(`the lab has no namespace ${index}`);
      const letter = String.fromCharCode(97 + index);
      const interfaceName = `${p.prefix}-${lab.suffix}-${letter}`;
      const body = { name: `node-${letter}`, mode: "dynamic", public_address: labNode.underlayAddress, listen_port: LISTEN_PORT, interface_name: interfaceName };
      const node = NodeAnswer.parse(await request("POST", nodesPath, body));
      const member: Member = {
        letter,
        lab: labNode,
        nodeId: node.node_id,
        host: node.address.split("/")[0] ?? node.address,
        interfaceName,
        path: `${nodesPath}/${node.node_id}`,
        profileDir: join(lab.dir, `profile-${letter}`),
        tunnelDir: join(lab.dir, `tunnels-${letter}`),
      };
      members.push(member);
      return member;
    },
    async bind(m) {
      const { command } = z.object({ command: z.string() }).parse(await request("POST", `${m.path}/bind-command`));
      await runBindCommand(lab, m.lab.ns, command, m.profileDir);
      return Date.now();
    },
    runAgent(m) {
      const { cmd, args } = svcctlPrefix(m.profileDir);
      m.agent = spawnInNamespace(m.lab.ns, cmd, [...args, "agent", "run"], { env: { ...p.bin.env, SVC_AGENT_TUNNEL_DIR: m.tunnelDir } });
    },
    async statusUntil(m, what, ok) {
      await waitUntil(`node ${m.letter}: ${what}`, ONLINE_WITHIN_MS, async () => {
        if (m.agent !== undefined && !m.agent.running()) throw new Error(`agent ${m.letter} exited\n${diagnostics()}`);
        return ok(EndpointStatus.parse(await request("GET", `${m.path}/endpoint-status`))) ? true : undefined;
      });
    },
    async command(m, action) {
      const answer = z.object({ request_id: z.string() }).parse(await request("POST", `${m.path}/control`, { action }));
      return closedCommand(m, (log) => log.request_id === answer.request_id, `${action} closed by an ACK`);
    },
    async logMarks(list) {
      const marks = new Map<Member, number>();
      for (const m of list) marks.set(m, Math.max(0, ...(await logs(m)).map((log) => log.log_id)));
      return marks;
    },
    async pushesAfter(marks) {
      const closed = new Map<Member, ControlLog>();
      for (const [m, mark] of marks) closed.set(m, await closedCommand(m, (log) => log.action === "push_config" && log.log_id > mark, "the automatic push"));
      return closed;
    },
  };
}

/** The admin's JSON requests over fetch; a non-2xx answer throws with its body. */
function requester(baseUrl: string, token: string): MeshLab["request"] {
  return async (method, path, body) => {
    const res = await fetch(new URL(path, baseUrl), {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
    return text === "" ? undefined : (JSON.parse(text) as unknown);
  };
}

/** Cleanup that runs every step even when one fails: agents, tunnels, namespaces, the service. */
function closer(lab: Lab, members: Member[], service: () => RunningService | undefined, bin: () => WgQuickBin | undefined): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () =>
    (closing ??= (async () => {
      const errors: unknown[] = [];
      const attempt = async (step: () => Promise<unknown>) => {
        try {
          await step();
        } catch (error) {
          errors.push(error);
        }
      };
      for (const m of members) await attempt(async () => m.agent?.stop());
      for (const m of members) {
        await attempt(async () => {
          const wg = bin();
          if (wg === undefined || !(await exists(socketPath(m.interfaceName)))) return;
          await lab.exec(m.lab.ns, wg.wgQuick, ["down", join(m.tunnelDir, "wireguard", `${m.interfaceName}.conf`)], { env: wg.env }).catch(() => rm(socketPath(m.interfaceName), { force: true }));
        });
      }
      await attempt(() => lab.destroy());
      await attempt(async () => service()?.stop());
      if (errors.length > 0) throw new AggregateError(errors, "the mesh lab's cleanup failed");
    })());
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Polls `probe` every 100 ms until it returns a value; throws after `timeoutMs` naming `what`. */
export async function waitUntil<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(POLL_MS);
  }
}

/** Binds, starts the agent of, and starts (push, then start) each member; then every pair answers a ping. */
export async function bringUp(mesh: MeshLab, list: readonly Member[]): Promise<void> {
  for (const m of list) {
    await mesh.bind(m);
    mesh.runAgent(m);
  }
  await Promise.all(list.map((m) => mesh.statusUntil(m, "online", (s) => s.client_presence_state === "online")));
  await Promise.all(list.map((m) => mesh.command(m, "start")));
  await Promise.all(list.map((m) => mesh.statusUntil(m, "running", (s) => s.runtime_state === "running")));
  await Promise.all(list.flatMap((from) => list.filter((to) => to !== from).map((to) => firstReply(mesh.lab, from, to, COMMAND_WITHIN_MS))));
}

/** Pings `to` from `from` once a 200 ms until one reply; @returns Date.now() of the reply. */
export async function firstReply(lab: Lab, from: Member, to: Member, timeoutMs: number): Promise<number> {
  return waitUntil(`a reply from ${to.letter} to ${from.letter}`, timeoutMs, async () => {
    try {
      await lab.exec(from.lab.ns, "ping", ["-n", "-c", "1", "-W", "1", to.host]);
      return Date.now();
    } catch {
      await delay(100);
      return undefined;
    }
  });
}

/** What one continuous ping saw: requests up to its last answered one, and the unanswered among them. */
export interface PingLoss {
  from: string;
  to: string;
  sent: number;
  lost: number;
}

/**
 * Continuous pings (`ping -n -i 0.2`: 5 a second) from each `from` to each `to` in its own
 * namespace, until `stop()`. A request counts as lost when no reply with its sequence number
 * came back while a later one did (iputils ping advances the sequence on a local send error
 * too, so a request refused by a vanished interface counts); requests after the last reply are
 * not counted, so the ones in flight at the stop are not losses.
 */
export function startPings(pairs: ReadonlyArray<{ from: Member; to: Member }>): { stop(): Promise<PingLoss[]> } {
  const running = pairs.map(({ from, to }) => ({ from, to, ping: spawnInNamespace(from.lab.ns, "ping", ["-n", "-i", "0.2", "-W", "1", to.host]) }));
  return {
    async stop() {
      for (const r of running) {
        try {
          process.kill(r.ping.pid, "SIGINT");
        } catch {
          // already exited: its output says why
        }
      }
      const losses: PingLoss[] = [];
      for (const r of running) {
        await Promise.race([r.ping.exited, delay(3_000)]);
        await r.ping.stop(500);
        losses.push({ from: r.from.letter, to: r.to.letter, ...countLoss(r.ping.output()) });
      }
      return losses;
    },
  };
}

/** Requests and unanswered requests in `ping` output (see {@link startPings}). */
export function countLoss(output: string): { sent: number; lost: number } {
  const answered = new Set<number>();
  for (const match of output.matchAll(/bytes from .*icmp_seq=(\d+)/g)) answered.add(Number(match[1]));
  const sent = Math.max(0, ...answered);
  return { sent, lost: sent - answered.size };
}

/** Every ordered pair of distinct members. */
export function orderedPairs(list: readonly Member[]): Array<{ from: Member; to: Member }> {
  return list.flatMap((from) => list.filter((to) => to !== from).map((to) => ({ from, to })));
}

/** The config text the agent of `m` wrote (SVC_AGENT_TUNNEL_DIR layout). */
export function tunnelConfig(m: Member): Promise<string> {
  return readFile(join(m.tunnelDir, "wireguard", `${m.interfaceName}.conf`), "utf8");
}
