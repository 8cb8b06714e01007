import { readFile } from "node:fs/promises";
import {
  configPushPayloadSchema,
  controlPayloadSchema,
  detectPayloadSchema,
  envelopeSchema,
  infoPayloadSchema,
  MAX_ENVELOPE_BYTES,
  type ConfigPushPayload,
  type ControlPayload,
  type Envelope,
  type TunnelProtocol,
} from "../protocol/envelope.schema.js";
import type { AckStatus } from "../protocol/enums.js";
import { parseTopic, type DownstreamKind } from "../protocol/topics.js";
import type { AgentLink } from "./agent-link.js";
import type { AgentStateFile } from "./agent-state.js";
import { applyConfigPush, sha256Hex } from "./config-push.js";
import type { ToolchainFor } from "./toolchain.types.js";
import { CLIENT_VERSION } from "./version.js";

/** How a command ended: the final ACK's status and message, and the ACK's extra fields. */
export type CommandResult = { status: Exclude<AckStatus, "accepted">; message: string; extra: Record<string, unknown> };

/** A downstream command that passed the checks of {@link parseCommand}. */
export interface Command {
  kind: DownstreamKind;
  env: Envelope;
}

/**
 * Checks one downstream message (spec §6.1, §6.2): a downstream topic of this node, within the
 * size cap, a valid envelope with this node's ids and a `request_id`. Anything else is logged
 * and dropped (null).
 */
export function parseCommand(topic: string, payload: Buffer, configId: string, nodeId: string, log: (line: Record<string, unknown>) => void): Command | null {
  const parsed = parseTopic(topic);
  if (parsed === null || parsed.direction !== "downstream" || parsed.configId !== configId || parsed.nodeId !== nodeId) {
    log({ level: "warn", msg: "message on an unexpected topic dropped", topic });
    return null;
  }
  if (payload.length > MAX_ENVELOPE_BYTES) {
    log({ level: "warn", msg: "oversize message dropped", topic });
    return null;
  }
  try {
    const r = envelopeSchema.safeParse(JSON.parse(payload.toString("utf8")));
    if (r.success && r.data.config_id === configId && r.data.node_id === nodeId && r.data.request_id !== "") {
      return { kind: parsed.kind as DownstreamKind, env: r.data };
    }
  } catch {
    // not JSON: dropped below
  }
  log({ level: "warn", msg: "malformed command dropped", topic });
  return null;
}

/** The `action` an ACK names: the payload's own (when a short string), else the command kind. */
export function actionOf(kind: DownstreamKind, env: Envelope): string {
  const action = env.payload["action"];
  if (typeof action === "string" && action.length <= 32) return action;
  return kind === "detect" ? "detect" : kind;
}

export interface AgentCommandsDeps {
  link: AgentLink;
  toolchains: ToolchainFor;
  state: AgentStateFile;
  /** spec §5: whether the agent has the privileges commands need. */
  isPrivileged: () => boolean;
}

/**
 * Runs one command of spec §6.3 and says how it ended. Not privileged → a `privilege_error`
 * event and `failed` (spec §5); `wg_show` output goes out as `command_output` events, stdout
 * and stderr apart (spec §6.4 rule 4); control `push_config` runs the §3.8 push flow (see
 * {@link AgentCommands.controlPush}).
 */
export class AgentCommands {
  readonly #d: AgentCommandsDeps;

  constructor(deps: AgentCommandsDeps) {
    this.#d = deps;
  }

  /** Runs a command; a payload its kind's schema refuses throws (the caller ACKs `failed`). */
  async run(kind: DownstreamKind, env: Envelope): Promise<CommandResult> {
    switch (kind) {
      case "detect":
        return this.#detect(env);
      case "config_push":
        return this.#push(env.request_id, configPushPayloadSchema.parse(env.payload));
      case "control":
        return this.#control(env);
      case "info": {
        const p = infoPayloadSchema.parse(env.payload);
        return this.#show(env.request_id, p.tunnel_protocol, p.interface_name);
      }
    }
  }

  async #detect(env: Envelope): Promise<CommandResult> {
    const p = detectPayloadSchema.parse(env.payload);
    let running = false;
    try {
      running = await this.#d.toolchains(p.tunnel_protocol).isRunning(p.interface_name);
    } catch {
      running = false;
    }
    return {
      status: "applied",
      message: "",
      extra: { client_online: true, wg_online: running, platform: process.platform, client_version: CLIENT_VERSION },
    };
  }

  async #control(env: Envelope): Promise<CommandResult> {
    const p = controlPayloadSchema.parse(env.payload);
    if (p.action === "wg_show") return this.#show(env.request_id, p.tunnel_protocol, p.interface_name);
    if (p.action === "push_config") return this.controlPush(env);
    const denied = await this.#privilegeError(env.request_id, p.action);
    if (denied) return denied;
    const tc = this.#d.toolchains(p.tunnel_protocol);
    await this.#d.state.remember(p.interface_name, p.tunnel_protocol);
    if (p.action === "start") {
      if (await tc.isRunning(p.interface_name)) return { status: "applied", message: "already running", extra: {} };
      await tc.up(p.interface_name);
      return { status: "applied", message: "started", extra: {} };
    }
    if (!(await tc.isRunning(p.interface_name))) return { status: "applied", message: "already stopped", extra: {} };
    await tc.down(p.interface_name);
    return { status: "applied", message: "stopped", extra: {} };
  }

  async #privilegeError(requestId: string, action: string): Promise<CommandResult | null> {
    if (this.#d.isPrivileged()) return null;
    const { link } = this.#d;
    const message = "the agent lacks privileges: it must run as a system service as root (svcctl service install)";
    await link.safePublish("event", link.envelope("event", { level: "error", event: "privilege_error", message, request_id: requestId, action }));
    return { status: "failed", message, extra: {} };
  }

  /** The §3.8 sequence for one push payload; an applied push is remembered in state.json. */
  async #push(requestId: string, p: ConfigPushPayload): Promise<CommandResult> {
    const denied = await this.#privilegeError(requestId, "push_config");
    if (denied) return denied;
    const r = await applyConfigPush(p, { toolchains: this.#d.toolchains });
    if (r.status === "applied") await this.#d.state.remember(p.interface_name, p.tunnel_protocol, p);
    return { status: r.status, message: r.message, extra: { config_version: p.config_version, config_sha256: p.config_sha256 } };
  }

  /**
   * spec §6.3 control `push_config` ("trigger the config push flow"; docs/history/decisions-2026.md "Control
   * `push_config` on the agent"):
   * - a payload that also carries the config push fields (§6.3 config/push) runs exactly that push;
   * - the bare control payload (action, tunnel_protocol, interface_name) re-runs the §3.8 sequence
   *   with the last config this agent applied to that interface under that protocol: the file at
   *   the toolchain's path, used only while its SHA-256 still equals the digest of that push (a
   *   file changed by hand is refused, nothing stopped). Without one the ACK is `failed`.
   */
  async controlPush(env: Envelope): Promise<CommandResult> {
    const full = configPushPayloadSchema.safeParse(env.payload);
    if (full.success) return this.#push(env.request_id, full.data);
    const p: ControlPayload = controlPayloadSchema.parse(env.payload);
    const denied = await this.#privilegeError(env.request_id, "push_config");
    if (denied) return denied;
    const last = this.#d.state.current.last_push;
    if (last === null || last.interface_name !== p.interface_name || last.tunnel_protocol !== p.tunnel_protocol) {
      return {
        status: "failed",
        message: `no config for ${p.interface_name} under ${p.tunnel_protocol} has been applied by this agent yet; the server sends configs on config/push`,
        extra: {},
      };
    }
    const path = this.#d.toolchains(p.tunnel_protocol).configPath(p.interface_name);
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
    return this.#push(env.request_id, {
      action: "push_config",
      tunnel_protocol: p.tunnel_protocol,
      previous_tunnel_protocol: p.tunnel_protocol,
      interface_name: p.interface_name,
      config_version: last.config_version,
      config_sha256: last.config_sha256,
      config_text: text,
    });
  }

  /** Raw `wg`/`awg` output goes out as command_output events; the ACK only marks completion. */
  async #show(requestId: string, protocol: TunnelProtocol, interfaceName: string): Promise<CommandResult> {
    const denied = await this.#privilegeError(requestId, "wg_show");
    if (denied) return denied;
    const { link } = this.#d;
    const out = await this.#d.toolchains(protocol).show(interfaceName);
    for (const [stream, text] of [
      ["stdout", out.stdout],
      ["stderr", out.stderr],
    ] as const) {
      if (text.length === 0) continue;
      await link.safePublish(
        "event",
        link.envelope("event", { level: "info", event: "command_output", message: "", request_id: requestId, action: "wg_show", stream, output: text }, requestId),
      );
    }
    return out.code === 0
      ? { status: "applied", message: "", extra: {} }
      : { status: "failed", message: `${protocol === "awg_2" ? "awg" : "wg"} show exited with ${out.code}`, extra: {} };
  }
}
