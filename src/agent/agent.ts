import { join } from "node:path";
import PQueue from "p-queue";
import type { Clock } from "../lib/clock.js";
import { actionOf, AgentCommands, parseCommand, type Command } from "./agent-commands.js";
import { AgentLink } from "./agent-link.js";
import { AgentStateFile } from "./agent-state.js";
import { runCommand } from "./exec.js";
import { publishPeersReport, reportsPeersAfter } from "./peer-report.js";
import type { AgentProfile } from "./profile.js";
import type { ToolchainFor } from "./toolchain.types.js";
import { createToolchains } from "./toolchains.js";
import { CLIENT_VERSION } from "./version.js";

export { brokerUrl } from "./agent-link.js";

/** How long a stopping agent waits for its offline event and the running command, ms. */
const STOP_GRACE_MS = 3000;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** spec §6.4 rule 7: the heartbeat interval, fixed on the client. */
export const HEARTBEAT_INTERVAL_MS = 30 * 60 * 1000;

export interface RunAgentOptions {
  profile: AgentProfile;
  /** Directory of the profile; the agent keeps its small state file there. */
  profileDir: string;
  /** One JSON log line. Secrets are never passed to it. */
  log: (line: Record<string, unknown>) => void;
  /** Aborting stops the agent cleanly (an explicit offline event, then disconnect). */
  signal?: AbortSignal;
  /** Tunnel tools; by default the platform's, with configs under `tunnelDir` when given. */
  toolchains?: ToolchainFor;
  /** Where tunnel configs are written instead of the toolchains' system directories (tests, several agents on one host). */
  tunnelDir?: string;
  /** Heartbeat interval override, ms (tests); the product's is fixed at 30 minutes. */
  heartbeatMs?: number;
  /**
   * Timers of the heartbeat schedule (tests pass a ManualClock to count heartbeats over simulated
   * time). Default: Node's own timers, referenced (the agent is a long-running process).
   */
  heartbeatTimers?: Pick<Clock, "setTimeout" | "clearTimeout">;
  /**
   * spec §5: whether the agent has the privileges commands need (root; LocalSystem on Windows).
   * Default: uid 0 on Linux and macOS; on Windows the service installer guarantees LocalSystem.
   */
  isPrivileged?: () => boolean;
}

/**
 * The agent runtime (spec §5, §6; DESIGN §2 `src/agent`): one MQTT worker for the current profile.
 *
 * - A fresh `boot_id` per process and `session_id` per MQTT session; the will of spec §6.3.
 * - On connect: subscribes to its four downstream topics (a clean session, so every connect),
 *   publishes event `mqtt_connected` and a heartbeat, then a heartbeat every 30 minutes.
 * - Commands run one at a time; each gets an `accepted` ACK on receipt, then `applied` or
 *   `failed` with a readable message. ACKs never carry output (spec §6.4 rule 4): `wg_show`
 *   output goes out as `command_output` events, stdout and stderr apart. Nothing is retained.
 * - Not root → an `event` with a clear error and ACK `failed` (spec §5).
 * - After each detect ACK, applied push and applied start, the profile interface's peers go out
 *   as an `event` `wg_peers` (docs/links.md), still inside the command's queue slot.
 * - Control `push_config` (spec §6.3) runs the §3.8 push flow: with the config/push fields in its
 *   payload, that push; with the bare control payload, the last config applied to the interface
 *   under that protocol, re-applied (docs/history/decisions-2026.md "Control `push_config` on the agent").
 * Resolves when `signal` aborts.
 */
export async function runAgent(opts: RunAgentOptions): Promise<void> {
  const { profile, log } = opts;
  const state = await AgentStateFile.open(join(opts.profileDir, "state.json"), log);
  const toolchains = opts.toolchains ?? platformToolchains(opts.tunnelDir);
  const link = new AgentLink(profile, log);
  const isPrivileged = opts.isPrivileged ?? (() => process.platform === "win32" || process.getuid?.() === 0);
  const commands = new AgentCommands({ link, toolchains, state, isPrivileged });
  const queue = new PQueue({ concurrency: 1 });

  const heartbeat = async () => {
    await link.safePublish("heartbeat", link.envelope("heartbeat", { client_online: true, wg_online: await wgOnline(state, toolchains) }));
  };
  link.onConnect(() => {
    void link.safePublish("event", link.envelope("event", { level: "info", event: "mqtt_connected", message: `agent ${CLIENT_VERSION} connected` }));
    void heartbeat();
  });
  const stopHeartbeats = scheduleHeartbeats(opts, heartbeat);
  link.client.on("message", (topic, payload) => {
    const command = parseCommand(topic, payload, link.configId, link.nodeId, log);
    if (command !== null) enqueueCommand(command, { link, commands, queue, log, peers: { link, state, toolchains, log, isPrivileged } });
  });

  await aborted(opts.signal);
  stopHeartbeats();
  await stopLink(link, queue);
}

/** The platform's tunnel tools; with `tunnelDir`, their configs go under it. */
function platformToolchains(tunnelDir: string | undefined): ToolchainFor {
  return createToolchains({
    platform: process.platform,
    run: runCommand,
    env: process.env,
    ...(tunnelDir === undefined ? {} : { configDirs: { wireguard: join(tunnelDir, "wireguard"), awg_2: join(tunnelDir, "amneziawg") } }),
  });
}

/** Whether the interface the agent last operated is up (false when none, or when asking fails). */
async function wgOnline(state: AgentStateFile, toolchains: ToolchainFor): Promise<boolean> {
  const { interface_name: iface, tunnel_protocol: protocol } = state.current;
  if (iface === null || protocol === null) return false;
  try {
    return await toolchains(protocol).isRunning(iface);
  } catch {
    return false;
  }
}

/**
 * spec §6.4 rule 7: one heartbeat per interval, re-armed after each (not counted from connects).
 * @returns stops the schedule
 */
function scheduleHeartbeats(opts: RunAgentOptions, heartbeat: () => Promise<void>): () => void {
  const timers = opts.heartbeatTimers ?? { setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms), clearTimeout: (h: unknown) => clearTimeout(h as NodeJS.Timeout) };
  const every = opts.heartbeatMs ?? HEARTBEAT_INTERVAL_MS;
  let timer: unknown;
  const arm = (): void => {
    timer = timers.setTimeout(() => {
      arm();
      void heartbeat();
    }, every);
  };
  arm();
  return () => timers.clearTimeout(timer);
}

/**
 * ACKs a command `accepted` on receipt (spec §3.4: received or queued; not for detect), runs it
 * after the ones before it, then ACKs how it ended (a thrown error is `failed` with its message).
 */
function enqueueCommand(
  { kind, env }: Command,
  d: { link: AgentLink; commands: AgentCommands; queue: PQueue; log: RunAgentOptions["log"]; peers: Parameters<typeof publishPeersReport>[0] },
): void {
  const ackKind = `${kind}_ack` as const;
  const action = actionOf(kind, env);
  if (kind !== "detect") void d.link.safePublish(ackKind, d.link.envelope("ack", { status: "accepted", message: "", action }, env.request_id));
  void d.queue.add(async () => {
    const result = await d.commands.run(kind, env).catch((err: unknown) => ({
      status: "failed" as const,
      message: err instanceof Error ? err.message : String(err),
      extra: {},
    }));
    await d.link.safePublish(ackKind, d.link.envelope("ack", { status: result.status, message: result.message, action, ...result.extra }, env.request_id));
    d.log({ level: "info", msg: "command done", kind, request_id: env.request_id, status: result.status });
    if (reportsPeersAfter(kind, action, result.status)) await publishPeersReport(d.peers, env.request_id);
  });
}

/** Resolves when `signal` aborts (never without one). */
function aborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) resolve();
    else signal?.addEventListener("abort", () => resolve(), { once: true });
  });
}

/**
 * Ends the session. Connected: an explicit offline event first (no will is sent on a clean
 * disconnect), then the running command; each wait bounded by {@link STOP_GRACE_MS}, since a
 * broker that is already gone never answers the PUBACK.
 */
async function stopLink(link: AgentLink, queue: PQueue): Promise<void> {
  if (link.client.connected) {
    const sent = link.publish("event", link.envelope("event", { level: "info", event: "offline", message: "agent stopped" }));
    await Promise.race([sent, delay(STOP_GRACE_MS)]).catch(() => undefined);
    await Promise.race([queue.onIdle(), delay(STOP_GRACE_MS)]);
  }
  await new Promise<void>((resolve) => link.client.end(true, {}, () => resolve()));
}
