import { createHash } from "node:crypto";
import { writeFileAtomic } from "../lib/atomic-write.js";
import { configPushPayloadSchema, type AckStatus, type ConfigPushPayload, type TunnelProtocol } from "../protocol/envelope.schema.js";
import type { Toolchain, ToolchainFor } from "./toolchain.types.js";

/**
 * The config push sequence on the agent (spec §3.8), for a payload from the config/push topic
 * (spec §6.3):
 *
 * 0. Verify `config_sha256` against the SHA-256 of `config_text` FIRST, before anything is
 *    inspected or stopped: a corrupt or tampered push must never take a working tunnel down.
 *    (§3.8 does not place this check; the payload table in §6.3 defines the digest. Decision.)
 * 1. Inspect the profile interface under `previous_tunnel_protocol` and under `tunnel_protocol`
 *    (once when they are equal), previous first.
 * 2. Stop every running match with its own toolchain, previous first, before the config is
 *    overwritten. The first stop that fails ends the sequence with `failed`; nothing is written,
 *    later matches are not stopped, and nothing already stopped is restarted (the message names
 *    what was stopped, so the operator knows the tunnel is down; a later push or start recovers).
 * 3. Write the new config atomically (temp file in the same directory, fsync, rename, 0600) at
 *    the TARGET toolchain's path. The previous toolchain's file, if any, is left alone.
 * 4. If an interface was running before the update, start it with the target toolchain only;
 *    otherwise only write, never start.
 * 5. `applied` only when every step completed. A failed inspection, write or restart is
 *    `failed` with a message saying what state the interface was left in.
 *
 * Nothing here throws: every outcome is a result for the ACK (spec §3.4: `failed` carries why).
 */

export interface ConfigPushDeps {
  toolchains: ToolchainFor;
  /** Writes the config file; must be atomic (temp file in the same dir + fsync + rename), mode 0600. Default {@link atomicWriteFile}. */
  writeConfig?: (path: string, text: string) => Promise<void>;
  log?: (msg: string) => void;
}

export interface ConfigPushResult {
  status: Exclude<AckStatus, "accepted">;
  message: string;
}

/** Longest error text quoted from a toolchain or the file system, so the ACK message stays bounded. */
const MAX_CAUSE = 1200;
/** ACK messages are at most 4096 characters (ackPayloadSchema). */
const MAX_MESSAGE = 4000;

/**
 * Runs the sequence above for one push.
 * @returns `applied` with what was done, or `failed` with what failed and the state the
 *   interface was left in (message at most 4,000 characters); never throws
 */
export async function applyConfigPush(payload: ConfigPushPayload, deps: ConfigPushDeps): Promise<ConfigPushResult> {
  const log = deps.log ?? (() => {});
  try {
    const push = checkedPush(payload);
    const iface = push.interface_name;
    const target = push.tunnel_protocol;
    const { chains, targetChain, targetPath } = pushToolchains(push, deps.toolchains);
    const running = await runningUnder(iface, chains);
    log(`config push v${push.config_version} for ${iface}: running under [${running.join(", ")}], target ${target}`);
    const stopped = await stopAll(iface, running, chains, log);
    await writePushed(push, targetPath, stopped, deps.writeConfig ?? atomicWriteFile, log);
    if (running.length === 0) {
      return { status: "applied", message: `config v${push.config_version} written to ${targetPath}; ${iface} was not running and was not started` };
    }
    try {
      await targetChain.up(iface);
    } catch (err) {
      throw new PushFailed(`config v${push.config_version} written to ${targetPath}, but starting ${iface} with the ${target} toolchain failed: ${cause(err)}`);
    }
    log(`started ${iface} (${target})`);
    return { status: "applied", message: `config v${push.config_version} written to ${targetPath}; ${iface} restarted with the ${target} toolchain` };
  } catch (err) {
    if (!(err instanceof PushFailed)) throw err;
    const message = err.message.length > MAX_MESSAGE ? `${err.message.slice(0, MAX_MESSAGE)}…` : err.message;
    log(`config push failed: ${message}`);
    return { status: "failed", message };
  }
}

/** A step of the sequence failed; the message is the ACK's (cut to {@link MAX_MESSAGE}). */
class PushFailed extends Error {}

/**
 * The payload re-checked (the caller parses the envelope, but this is the last gate before root
 * tools run), then step 0: the digest (decision above).
 */
function checkedPush(payload: ConfigPushPayload): ConfigPushPayload {
  const parsed = configPushPayloadSchema.safeParse(payload);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "payload"}: ${i.message}`).join("; ");
    throw new PushFailed(`invalid config push payload (${issues}); nothing inspected, stopped or written`);
  }
  const push = parsed.data;
  const actual = sha256Hex(push.config_text);
  if (actual !== push.config_sha256) {
    throw new PushFailed(`config_sha256 mismatch for config v${push.config_version}: expected ${push.config_sha256}, got ${actual}; nothing stopped or written`);
  }
  return push;
}

/** The toolchain of each protocol involved (previous first), the target's, and its config path. */
function pushToolchains(
  push: ConfigPushPayload,
  toolchains: ToolchainFor,
): { chains: Map<TunnelProtocol, Toolchain>; targetChain: Toolchain; targetPath: string } {
  const target = push.tunnel_protocol;
  const protocols: TunnelProtocol[] = push.previous_tunnel_protocol === target ? [target] : [push.previous_tunnel_protocol, target];
  const chains = new Map<TunnelProtocol, Toolchain>();
  try {
    for (const protocol of protocols) chains.set(protocol, toolchains(protocol));
    const targetChain = chains.get(target) ?? toolchains(target);
    return { chains, targetChain, targetPath: targetChain.configPath(push.interface_name) };
  } catch (err) {
    throw new PushFailed(`cannot use the ${target} toolchain for ${push.interface_name}: ${cause(err)}; nothing stopped or written`);
  }
}

/** Step 1: the protocols (of `chains`, in order) under which the interface runs. */
async function runningUnder(iface: string, chains: Map<TunnelProtocol, Toolchain>): Promise<TunnelProtocol[]> {
  const running: TunnelProtocol[] = [];
  for (const [protocol, chain] of chains) {
    try {
      if (await chain.isRunning(iface)) running.push(protocol);
    } catch (err) {
      throw new PushFailed(`inspecting ${iface} with the ${protocol} toolchain failed: ${cause(err)}; nothing stopped or written`);
    }
  }
  return running;
}

/** Step 2: stops every running match with its own toolchain, before overwriting. @returns those stopped */
async function stopAll(iface: string, running: TunnelProtocol[], chains: Map<TunnelProtocol, Toolchain>, log: (msg: string) => void): Promise<TunnelProtocol[]> {
  const stopped: TunnelProtocol[] = [];
  for (const protocol of running) {
    const chain = chains.get(protocol);
    if (chain === undefined) continue;
    try {
      await chain.down(iface);
      stopped.push(protocol);
      log(`stopped ${iface} (${protocol})`);
    } catch (err) {
      const already = stopped.length === 0 ? "" : `; already stopped under ${stopped.join(", ")} and left stopped`;
      throw new PushFailed(`stopping ${iface} with the ${protocol} toolchain failed: ${cause(err)}; config not written${already}`);
    }
  }
  return stopped;
}

/** Step 3: writes the config at the target toolchain's path. */
async function writePushed(
  push: ConfigPushPayload,
  targetPath: string,
  stopped: TunnelProtocol[],
  write: (path: string, text: string) => Promise<void>,
  log: (msg: string) => void,
): Promise<void> {
  try {
    await write(targetPath, push.config_text);
    log(`wrote config v${push.config_version} to ${targetPath}`);
  } catch (err) {
    const left = stopped.length === 0 ? "" : `; ${push.interface_name} was stopped (${stopped.join(", ")}) and is left stopped`;
    throw new PushFailed(`writing ${targetPath} failed: ${cause(err)}${left}`);
  }
}

/** Lower-case hex SHA-256 of the config text's UTF-8 bytes, as `config_sha256` carries it. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/**
 * The default `writeConfig`: creates the directory (and missing parents) with mode 0700 and
 * replaces `path` atomically with mode 0600, fsynced (see {@link writeFileAtomic}), so a crash
 * leaves either the old file or the new one, never a mix. On failure the old file is untouched.
 * (On Windows the modes and the directory fsync are skipped by the OS; see toolchains.ts for
 * the ACL note.)
 */
export async function atomicWriteFile(path: string, text: string): Promise<void> {
  await writeFileAtomic(path, text, { mode: 0o600, mkdir: { mode: 0o700 } });
}

function cause(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.length > MAX_CAUSE ? `${text.slice(0, MAX_CAUSE)}…` : text;
}
