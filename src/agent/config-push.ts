import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { writeFileAtomic } from "../lib/atomic-write.js";
import { configPushPayloadSchema, type AckStatus, type ConfigPushPayload, type TunnelProtocol } from "../protocol/envelope.schema.js";
import type { PeerChanges } from "./peer-delta.js";
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
 * Hitless (a payload with `apply_mode: "hitless"`, an extension of §6.3; docs/decisions.md
 * "Hitless peer updates"): when the protocol is unchanged, the interface runs under it, the
 * toolchain can change peers in place ({@link Toolchain.syncPeers}) and the `[Interface]` section
 * of the file on disk equals the new one's ({@link interfaceSection}), step 2 is skipped: the file
 * is written atomically as in step 3 and the running interface takes from it the peers that
 * differ (added, changed, removed; `wg addconf` and `wg set`, src/agent/peer-delta.ts), so the
 * interface and the tunnels to unchanged peers are never touched. The interface's Address holds
 * the config's whole network, so every peer's AllowedIPs is already routed through it: no route
 * is added. Anything else, including a failed peer update, runs steps 1-5; the ACK's message
 * says which path ran and, after a fallback, why.
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
  const write = deps.writeConfig ?? atomicWriteFile;
  try {
    const push = checkedPush(payload);
    const tools = pushToolchains(push, deps.toolchains);
    let why = "";
    if (push.apply_mode === "hitless") {
      const hitless = await applyHitless(push, tools, write, log);
      if ("applied" in hitless) return hitless.applied;
      why = hitless.why;
    }
    return await restartSequence(push, tools, write, log, why);
  } catch (err) {
    if (!(err instanceof PushFailed)) throw err;
    const message = err.message.length > MAX_MESSAGE ? `${err.message.slice(0, MAX_MESSAGE)}…` : err.message;
    log(`config push failed: ${message}`);
    return { status: "failed", message };
  }
}

/** Steps 1-5 of the spec's sequence; `why` says, after a hitless fallback, why it was not hitless. */
async function restartSequence(push: ConfigPushPayload, tools: PushToolchains, write: WriteConfig, log: (msg: string) => void, why: string): Promise<ConfigPushResult> {
  const iface = push.interface_name;
  const target = push.tunnel_protocol;
  const { chains, targetChain, targetPath } = tools;
  const running = await runningUnder(iface, chains);
  log(`config push v${push.config_version} for ${iface}: running under [${running.join(", ")}], target ${target}`);
  const stopped = await stopAll(iface, running, chains, log);
  const left = stopped.length === 0 ? "" : `; ${iface} was stopped (${stopped.join(", ")}) and is left stopped`;
  await writePushed(push, targetPath, left, write, log);
  if (running.length === 0) {
    return { status: "applied", message: `config v${push.config_version} written to ${targetPath}; ${iface} was not running and was not started` };
  }
  try {
    await targetChain.up(iface);
  } catch (err) {
    throw new PushFailed(`config v${push.config_version} written to ${targetPath}, but starting ${iface} with the ${target} toolchain failed: ${cause(err)}`);
  }
  log(`started ${iface} (${target})`);
  const note = why === "" ? "" : ` (not applied without restart: ${why})`;
  return { status: "applied", message: `config v${push.config_version} written to ${targetPath}; ${iface} restarted with the ${target} toolchain${note}` };
}

/**
 * The hitless path (module comment): `applied` when the running interface took the new peers in
 * place, else why not (empty when the interface is not running: the spec's sequence then only
 * writes, and nothing restarts). @throws PushFailed when the file cannot be written
 */
async function applyHitless(
  push: ConfigPushPayload,
  tools: PushToolchains,
  write: WriteConfig,
  log: (msg: string) => void,
): Promise<{ applied: ConfigPushResult } | { why: string }> {
  const iface = push.interface_name;
  const chain = tools.targetChain;
  const check = await hitlessBlocker(push, tools);
  if ("blocker" in check) {
    if (check.blocker !== "") log(`config push v${push.config_version} for ${iface}: not hitless (${check.blocker}); stop, write, start`);
    return { why: check.blocker };
  }
  await writePushed(push, tools.targetPath, `; ${iface} keeps running with its previous peers`, write, log);
  const tool = push.tunnel_protocol === "awg_2" ? "awg" : "wg";
  let changes: PeerChanges;
  try {
    if (chain.syncPeers === undefined) throw new Error("no peer update on this platform");
    changes = await chain.syncPeers(iface, check.previous);
  } catch (err) {
    log(`updating the peers of ${iface} in place failed: ${cause(err)}; stop, write, start`);
    return { why: `the peer update failed: ${cause(err)}` };
  }
  const what = `${tool}: peers ${changes.added} added, ${changes.changed} changed, ${changes.removed} removed`;
  log(`applied config v${push.config_version} to the running ${iface} (${what})`);
  return { applied: { status: "applied", message: `config v${push.config_version} written to ${tools.targetPath}; applied without restart (${what}) to the running ${iface}` } };
}

/**
 * Why the push cannot be applied in place (`blocker`: "" when the interface is not running,
 * nothing to keep up; a reason for the ACK otherwise), or the file the interface runs from when
 * it can. An inspection that fails is a reason: the spec's sequence inspects again and reports it.
 */
async function hitlessBlocker(push: ConfigPushPayload, tools: PushToolchains): Promise<{ blocker: string } | { previous: string }> {
  if (push.previous_tunnel_protocol !== push.tunnel_protocol) return { blocker: "the tunnel protocol changed" };
  if (tools.targetChain.syncPeers === undefined) return { blocker: "this platform's toolchain cannot change peers in place" };
  try {
    if (!(await tools.targetChain.isRunning(push.interface_name))) return { blocker: "" };
  } catch (err) {
    return { blocker: `inspecting ${push.interface_name} failed: ${cause(err)}` };
  }
  let previous: string;
  try {
    previous = await readFile(tools.targetPath, "utf8");
  } catch (err) {
    return { blocker: `the previous config cannot be read: ${cause(err)}` };
  }
  const before = interfaceSection(previous);
  return before !== null && before === interfaceSection(push.config_text) ? { previous } : { blocker: "the [Interface] section changed" };
}

/**
 * The `[Interface]` section of a config text, for comparison: its lines trimmed, without blank
 * lines and whole-line comments, in order. Null when the text has no `[Interface]` section or
 * more than one (wg-quick would refuse it; it is never equal to anything).
 */
export function interfaceSection(text: string): string | null {
  let section: string[] | null = null;
  let inInterface = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line.startsWith("[")) {
      inInterface = /^\[interface\]$/i.test(line);
      if (inInterface && section !== null) return null;
      if (inInterface) section = [];
      continue;
    }
    if (inInterface && line !== "" && !line.startsWith("#")) section?.push(line);
  }
  return section === null ? null : section.join("\n");
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

/** The toolchains of one push (see {@link pushToolchains}). */
interface PushToolchains {
  chains: Map<TunnelProtocol, Toolchain>;
  targetChain: Toolchain;
  targetPath: string;
}

type WriteConfig = (path: string, text: string) => Promise<void>;

/** The toolchain of each protocol involved (previous first), the target's, and its config path. */
function pushToolchains(push: ConfigPushPayload, toolchains: ToolchainFor): PushToolchains {
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

/** Step 3: writes the config at the target toolchain's path; `left` says, on failure, the interface's state. */
async function writePushed(push: ConfigPushPayload, targetPath: string, left: string, write: WriteConfig, log: (msg: string) => void): Promise<void> {
  try {
    await write(targetPath, push.config_text);
    log(`wrote config v${push.config_version} to ${targetPath}`);
  } catch (err) {
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
