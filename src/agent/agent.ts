import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import mqtt, { type MqttClient } from "mqtt";
import PQueue from "p-queue";
import { z } from "zod";
import {
  configPushPayloadSchema,
  controlPayloadSchema,
  detectPayloadSchema,
  envelopeSchema,
  infoPayloadSchema,
  interfaceNameSchema,
  MAX_ENVELOPE_BYTES,
  tunnelProtocolSchema,
  willEnvelope,
  type ConfigPushPayload,
  type ControlPayload,
  type Envelope,
  type TunnelProtocol,
} from "../protocol/envelope.schema.js";
import type { AckStatus } from "../protocol/enums.js";
import { nodeTopic, parseTopic, type DownstreamKind, type UpstreamKind } from "../protocol/topics.js";
import type { Clock } from "../clock.js";
import { applyConfigPush, sha256Hex } from "./config-push.js";
import { runCommand } from "./exec.js";
import type { AgentProfile } from "./profile.js";
import type { ToolchainFor } from "./toolchain.types.js";
import { createToolchains } from "./toolchains.js";
import { CLIENT_VERSION } from "./version.js";

/** How long a stopping agent waits for its offline event and the running command, ms. */
const STOP_GRACE_MS = 3000;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * The broker URL of a bind profile (spec §2.6 `mqtt.host`, `mqtt.port`, `mqtt.tls`):
 * `mqtts://` with TLS, an IPv6 literal host in brackets (`mqtt://[2001:db8::1]:1883`).
 */
export function brokerUrl(mqtt: { host: string; port: number; tls: boolean }): string {
  const host = mqtt.host.includes(":") && !mqtt.host.startsWith("[") ? `[${mqtt.host}]` : mqtt.host;
  return `${mqtt.tls ? "mqtts" : "mqtt"}://${host}:${mqtt.port}`;
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

/** The config push the agent last applied: what a bare control `push_config` re-applies. */
const lastPushSchema = z.object({
  interface_name: interfaceNameSchema,
  tunnel_protocol: tunnelProtocolSchema,
  config_version: z.number().int().nonnegative(),
  config_sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
type LastPush = z.infer<typeof lastPushSchema>;

/**
 * Kept across restarts in `state.json` (mode 0600): the profile interface the agent last
 * operated (heartbeats report it), and the version and digest of the last config it applied
 * (the text itself stays only in the tunnel config file).
 */
interface AgentState {
  interface_name: string | null;
  tunnel_protocol: TunnelProtocol | null;
  last_push: LastPush | null;
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
 * - Control `push_config` (spec §6.3) runs the §3.8 push flow: with the config/push fields in its
 *   payload, that push; with the bare control payload, the last config applied to the interface
 *   under that protocol, re-applied (docs/decisions.md "Control `push_config` on the agent").
 * Resolves when `signal` aborts.
 */
export async function runAgent(opts: RunAgentOptions): Promise<void> {
  const { profile, log } = opts;
  const configId = profile.profile.config_id;
  const nodeId = profile.profile.node_id;
  const bootId = randomUUID();
  let sessionId = "";
  const statePath = join(opts.profileDir, "state.json");
  const state: AgentState = await readState(statePath);
  const toolchains =
    opts.toolchains ??
    createToolchains({
      platform: process.platform,
      run: runCommand,
      env: process.env,
      ...(opts.tunnelDir === undefined
        ? {}
        : { configDirs: { wireguard: join(opts.tunnelDir, "wireguard"), awg_2: join(opts.tunnelDir, "amneziawg") } }),
    });
  const isPrivileged = opts.isPrivileged ?? (() => process.platform === "win32" || process.getuid?.() === 0);
  const queue = new PQueue({ concurrency: 1 });

  const envelope = (type: string, payload: Record<string, unknown>, requestId = ""): Envelope => ({
    type,
    request_id: requestId,
    config_id: configId,
    node_id: nodeId,
    boot_id: bootId,
    session_id: sessionId,
    sent_at: new Date().toISOString(),
    payload,
  });

  const client: MqttClient = mqtt.connect(brokerUrl(profile.mqtt), {
    protocolVersion: 4,
    clientId: profile.mqtt.client_id,
    username: profile.mqtt.username,
    password: profile.mqtt.password,
    clean: true,
    keepalive: 60,
    reconnectPeriod: 1000,
    // A refused CONNACK is retried too (with the backoff below): the account may not exist yet
    // (bound while an external broker was down; the backend provisions it when the broker
    // returns, spec §1.8). MQTT.js gives up after a refusal by default.
    reconnectOnConnackError: true,
    connectTimeout: 15_000,
    resubscribe: false,
    ...(profile.mqtt.tls && profile.mqtt.ca_cert ? { ca: profile.mqtt.ca_cert } : {}),
    will: {
      topic: nodeTopic(configId, nodeId, "event"),
      payload: Buffer.from(JSON.stringify(willEnvelope(configId, nodeId, new Date().toISOString()))),
      qos: 1,
      retain: false,
    },
  });

  const publish = async (kind: UpstreamKind, env: Envelope): Promise<void> => {
    await client.publishAsync(nodeTopic(configId, nodeId, kind), JSON.stringify(env), { qos: 1, retain: false });
  };
  const safePublish = (kind: UpstreamKind, env: Envelope) =>
    publish(kind, env).catch((err: unknown) => log({ level: "warn", msg: "publish failed", kind, err: String(err) }));

  const wgOnline = async (): Promise<boolean> => {
    if (state.interface_name === null || state.tunnel_protocol === null) return false;
    try {
      return await toolchains(state.tunnel_protocol).isRunning(state.interface_name);
    } catch {
      return false;
    }
  };
  const heartbeat = async () => {
    await safePublish("heartbeat", envelope("heartbeat", { client_online: true, wg_online: await wgOnline() }));
  };

  // Reconnect with backoff: 1 s doubling to 30 s, reset on a successful connect.
  let backoff = 1000;
  client.on("close", () => {
    backoff = Math.min(backoff * 2, 30_000);
    client.options.reconnectPeriod = backoff;
  });
  client.on("error", (err) => log({ level: "warn", msg: "mqtt error", err: err.message }));
  client.on("connect", () => {
    backoff = 1000;
    client.options.reconnectPeriod = backoff;
    sessionId = randomUUID();
    const topics = (["config_push", "control", "detect", "info"] as const).map((k) => nodeTopic(configId, nodeId, k));
    client.subscribe(topics, { qos: 1 }, (err) => {
      if (err) log({ level: "error", msg: "subscribe failed", err: err.message });
    });
    log({ level: "info", msg: "connected", session_id: sessionId });
    void safePublish("event", envelope("event", { level: "info", event: "mqtt_connected", message: `agent ${CLIENT_VERSION} connected` }));
    void heartbeat();
  });

  // spec §6.4 rule 7: one heartbeat per interval, re-armed after each (not counted from connects).
  const timers = opts.heartbeatTimers ?? { setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms), clearTimeout: (h: unknown) => clearTimeout(h as NodeJS.Timeout) };
  const heartbeatEvery = opts.heartbeatMs ?? HEARTBEAT_INTERVAL_MS;
  let heartbeatTimer: unknown;
  const armHeartbeat = (): void => {
    heartbeatTimer = timers.setTimeout(() => {
      armHeartbeat();
      void heartbeat();
    }, heartbeatEvery);
  };
  armHeartbeat();

  client.on("message", (topic, payload) => {
    const parsed = parseTopic(topic);
    if (parsed === null || parsed.direction !== "downstream" || parsed.configId !== configId || parsed.nodeId !== nodeId) {
      log({ level: "warn", msg: "message on an unexpected topic dropped", topic });
      return;
    }
    if (payload.length > MAX_ENVELOPE_BYTES) {
      log({ level: "warn", msg: "oversize message dropped", topic });
      return;
    }
    let env: Envelope;
    try {
      const r = envelopeSchema.safeParse(JSON.parse(payload.toString("utf8")));
      if (!r.success || r.data.config_id !== configId || r.data.node_id !== nodeId || r.data.request_id === "") {
        log({ level: "warn", msg: "malformed command dropped", topic });
        return;
      }
      env = r.data;
    } catch {
      log({ level: "warn", msg: "malformed command dropped", topic });
      return;
    }
    const kind = parsed.kind as DownstreamKind;
    const ackKind = `${kind}_ack` as UpstreamKind;
    // spec §3.4: accepted = received or queued.
    if (kind !== "detect") void safePublish(ackKind, envelope("ack", { status: "accepted", message: "", action: actionOf(kind, env) }, env.request_id));
    void queue.add(async () => {
      const result = await handle(kind, env).catch((err: unknown) => ({
        status: "failed" as const,
        message: err instanceof Error ? err.message : String(err),
        extra: {},
      }));
      await safePublish(
        ackKind,
        envelope("ack", { status: result.status, message: result.message, action: actionOf(kind, env), ...result.extra }, env.request_id),
      );
      log({ level: "info", msg: "command done", kind, request_id: env.request_id, status: result.status });
    });
  });

  type Result = { status: Exclude<AckStatus, "accepted">; message: string; extra: Record<string, unknown> };

  const privilegeError = async (requestId: string, action: string): Promise<Result | null> => {
    if (isPrivileged()) return null;
    const message = "the agent lacks privileges: it must run as a system service as root (svcctl service install)";
    await safePublish("event", envelope("event", { level: "error", event: "privilege_error", message, request_id: requestId, action }));
    return { status: "failed", message, extra: {} };
  };

  const remember = async (interfaceName: string, protocol: TunnelProtocol, push?: ConfigPushPayload) => {
    const lastPush: LastPush | null =
      push === undefined
        ? state.last_push
        : { interface_name: push.interface_name, tunnel_protocol: push.tunnel_protocol, config_version: push.config_version, config_sha256: push.config_sha256 };
    if (
      state.interface_name === interfaceName &&
      state.tunnel_protocol === protocol &&
      JSON.stringify(state.last_push) === JSON.stringify(lastPush)
    ) {
      return;
    }
    state.interface_name = interfaceName;
    state.tunnel_protocol = protocol;
    state.last_push = lastPush;
    await writeFile(statePath, JSON.stringify(state), { mode: 0o600 }).catch((err: unknown) =>
      // Not fatal: heartbeats then report the interface only until the next restart.
      log({ level: "warn", msg: "could not write the agent state file", path: statePath, err: String(err) }),
    );
  };

  const handle = async (kind: DownstreamKind, env: Envelope): Promise<Result> => {
    switch (kind) {
      case "detect": {
        const p = detectPayloadSchema.parse(env.payload);
        let running = false;
        try {
          running = await toolchains(p.tunnel_protocol).isRunning(p.interface_name);
        } catch {
          running = false;
        }
        return {
          status: "applied",
          message: "",
          extra: { client_online: true, wg_online: running, platform: process.platform, client_version: CLIENT_VERSION },
        };
      }
      case "config_push":
        return push(env.request_id, configPushPayloadSchema.parse(env.payload));
      case "control": {
        const p = controlPayloadSchema.parse(env.payload);
        if (p.action === "wg_show") return show(env.request_id, p.tunnel_protocol, p.interface_name);
        if (p.action === "push_config") return controlPush(env);
        const denied = await privilegeError(env.request_id, p.action);
        if (denied) return denied;
        const tc = toolchains(p.tunnel_protocol);
        await remember(p.interface_name, p.tunnel_protocol);
        if (p.action === "start") {
          if (await tc.isRunning(p.interface_name)) return { status: "applied", message: "already running", extra: {} };
          await tc.up(p.interface_name);
          return { status: "applied", message: "started", extra: {} };
        }
        if (!(await tc.isRunning(p.interface_name))) return { status: "applied", message: "already stopped", extra: {} };
        await tc.down(p.interface_name);
        return { status: "applied", message: "stopped", extra: {} };
      }
      case "info": {
        const p = infoPayloadSchema.parse(env.payload);
        return show(env.request_id, p.tunnel_protocol, p.interface_name);
      }
    }
  };

  /** The §3.8 sequence for one push payload; an applied push is remembered in state.json. */
  const push = async (requestId: string, p: ConfigPushPayload): Promise<Result> => {
    const denied = await privilegeError(requestId, "push_config");
    if (denied) return denied;
    const r = await applyConfigPush(p, { toolchains });
    if (r.status === "applied") await remember(p.interface_name, p.tunnel_protocol, p);
    return { status: r.status, message: r.message, extra: { config_version: p.config_version, config_sha256: p.config_sha256 } };
  };

  /**
   * spec §6.3 control `push_config` ("trigger the config push flow"; docs/decisions.md "Control
   * `push_config` on the agent"):
   * - a payload that also carries the config push fields (§6.3 config/push) runs exactly that push;
   * - the bare control payload (action, tunnel_protocol, interface_name) re-runs the §3.8 sequence
   *   with the last config this agent applied to that interface under that protocol: the file at
   *   the toolchain's path, used only while its SHA-256 still equals the digest of that push (a
   *   file changed by hand is refused, nothing stopped). Without one the ACK is `failed`.
   */
  const controlPush = async (env: Envelope): Promise<Result> => {
    const full = configPushPayloadSchema.safeParse(env.payload);
    if (full.success) return push(env.request_id, full.data);
    const p: ControlPayload = controlPayloadSchema.parse(env.payload);
    const denied = await privilegeError(env.request_id, "push_config");
    if (denied) return denied;
    const last = state.last_push;
    if (last === null || last.interface_name !== p.interface_name || last.tunnel_protocol !== p.tunnel_protocol) {
      return {
        status: "failed",
        message: `no config for ${p.interface_name} under ${p.tunnel_protocol} has been applied by this agent yet; the server sends configs on config/push`,
        extra: {},
      };
    }
    const path = toolchains(p.tunnel_protocol).configPath(p.interface_name);
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (err) {
      return { status: "failed", message: `cannot read ${path} to re-apply config v${last.config_version}: ${String(err)}; nothing stopped or written`, extra: {} };
    }
    if (sha256Hex(text) !== last.config_sha256) {
      return {
        status: "failed",
        message: `${path} changed since config v${last.config_version} was applied; nothing stopped or written (the server can push the staged config)`,
        extra: {},
      };
    }
    return push(env.request_id, {
      action: "push_config",
      tunnel_protocol: p.tunnel_protocol,
      previous_tunnel_protocol: p.tunnel_protocol,
      interface_name: p.interface_name,
      config_version: last.config_version,
      config_sha256: last.config_sha256,
      config_text: text,
    });
  };

  /** Raw `wg`/`awg` output goes out as command_output events; the ACK only marks completion. */
  const show = async (requestId: string, protocol: TunnelProtocol, interfaceName: string): Promise<Result> => {
    const denied = await privilegeError(requestId, "wg_show");
    if (denied) return denied;
    const out = await toolchains(protocol).show(interfaceName);
    for (const [stream, text] of [
      ["stdout", out.stdout],
      ["stderr", out.stderr],
    ] as const) {
      if (text.length === 0) continue;
      await safePublish(
        "event",
        envelope("event", { level: "info", event: "command_output", message: "", request_id: requestId, action: "wg_show", stream, output: text }, requestId),
      );
    }
    return out.code === 0
      ? { status: "applied", message: "", extra: {} }
      : { status: "failed", message: `${protocol === "awg_2" ? "awg" : "wg"} show exited with ${out.code}`, extra: {} };
  };

  await new Promise<void>((resolve) => {
    const stop = () => {
      timers.clearTimeout(heartbeatTimer);
      const finish = () => {
        client.end(true, {}, () => resolve());
      };
      if (client.connected) {
        // A clean stop is an explicit offline signal too (no will is sent on a clean disconnect).
        // Bounded: a broker that is already gone never answers the PUBACK.
        const sent = publish("event", envelope("event", { level: "info", event: "offline", message: "agent stopped" }));
        void Promise.race([sent, delay(STOP_GRACE_MS)])
          .catch(() => undefined)
          .then(() => Promise.race([queue.onIdle(), delay(STOP_GRACE_MS)]))
          .then(() => client.end(true, {}, () => resolve()));
      } else {
        finish();
      }
    };
    if (opts.signal?.aborted) stop();
    else opts.signal?.addEventListener("abort", stop, { once: true });
  });
}

function actionOf(kind: DownstreamKind, env: Envelope): string {
  const action = env.payload["action"];
  if (typeof action === "string" && action.length <= 32) return action;
  return kind === "detect" ? "detect" : kind;
}

async function readState(path: string): Promise<AgentState> {
  try {
    const raw = JSON.parse(await readFile(path, "utf8")) as Partial<Record<keyof AgentState, unknown>>;
    const protocol = raw.tunnel_protocol === "wireguard" || raw.tunnel_protocol === "awg_2" ? raw.tunnel_protocol : null;
    const iface = typeof raw.interface_name === "string" && /^[a-zA-Z0-9_=+.-]{1,15}$/.test(raw.interface_name) ? raw.interface_name : null;
    const lastPush = lastPushSchema.safeParse(raw.last_push);
    return { interface_name: iface, tunnel_protocol: protocol, last_push: lastPush.success ? lastPush.data : null };
  } catch {
    return { interface_name: null, tunnel_protocol: null, last_push: null };
  }
}
