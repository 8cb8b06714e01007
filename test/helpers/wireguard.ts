import { access, chmod, copyFile, mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ExecOptions, Lab } from "./netns.js";
import { run } from "./netns.js";
import { findOnPath } from "./system.js";

/** Where wireguard-go keeps its control socket; shared by every namespace on the host. */
export const WIREGUARD_RUN_DIR = "/var/run/wireguard";

const USERSPACE_MARK = "[shim] wireguard-go";

/** Binaries a test driving real tunnels in a lab needs. */
export const WIREGUARD_BINARIES = ["ip", "wg", "wg-quick", "wireguard-go", "ping"];

export interface WgKeyPair {
  privateKey: string;
  publicKey: string;
}

/** A key pair from the real `wg genkey` / `wg pubkey`. */
export async function generateWgKeyPair(): Promise<WgKeyPair> {
  const privateKey = (await run("wg", ["genkey"])).stdout.trim();
  const publicKey = (await run("wg", ["pubkey"], { input: `${privateKey}\n` })).stdout.trim();
  return { privateKey, publicKey };
}

/** wg-quick names the interface after the file, so it must be `<interface>.conf`; 0600 keeps it quiet. */
export async function writeWgQuickConfig(dir: string, interfaceName: string, text: string): Promise<string> {
  if (!/^[a-zA-Z0-9_=+.-]{1,15}$/.test(interfaceName)) {
    throw new Error(`"${interfaceName}" is not a valid wg-quick interface name`);
  }
  const path = join(dir, `${interfaceName}.conf`);
  await writeFile(path, text, { mode: 0o600 });
  await chmod(path, 0o600); // the umask cannot widen it, but an existing file keeps its old mode
  return path;
}

interface Tunnel {
  ns: string;
  interfaceName: string;
  confPath: string;
}

/** The bin directory that makes wg-quick run wireguard-go (see {@link createWgQuick}). */
export interface WgQuickBin {
  /** `<lab.dir>/wg-quick-bin`: the `ip` shim and the copy of wg-quick. */
  dir: string;
  /** The copy of wg-quick inside `dir`; run this one, never the installed one. */
  wgQuick: string;
  /**
   * Environment for wg-quick, or for any process (an agent) that runs `wg-quick` by name: `dir`
   * first on PATH, `WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go`, and LOG_LEVEL removed.
   */
  env: Record<string, string | undefined>;
}

export interface WgQuick {
  /** `wg-quick up <confPath>` inside `ns`, then checks that wireguard-go (not the kernel) runs it. */
  up(ns: string, confPath: string, interfaceName: string): Promise<void>;
  /** `wg-quick down` for every tunnel brought up; falls back to removing the control socket. Idempotent. */
  downAll(): Promise<void>;
}

/**
 * Real `wg-quick` driving real `wireguard-go`, whether or not the host has the kernel module.
 *
 * How userspace is forced: wg-quick first runs `ip link add <iface> type wireguard` and only
 * falls back to `$WG_QUICK_USERSPACE_IMPLEMENTATION <iface>` when that fails AND
 * /sys/module/wireguard does not exist, so on a host with the module loaded neither the env
 * variable nor a failing `ip` can force the fallback (wg-quick would exit instead). So the lab
 * gets a bin directory holding an `ip` shim that answers exactly that one command by running
 * `$WG_QUICK_USERSPACE_IMPLEMENTATION <iface>` (set to `wireguard-go`), i.e. the very command
 * wg-quick's own fallback runs, and hands every other `ip` command to the real binary.
 * wg-quick puts its own directory first on PATH (`export PATH="${SELF%/*}:$PATH"`, after
 * `readlink -f`), so a PATH entry alone would lose to /usr/bin/ip: the directory therefore also
 * holds an unmodified copy of the installed wg-quick script, which is what we run.
 * Everything after the link (`wg setconf`, addresses, MTU, routes, `wg-quick down` deleting the
 * link) is wg-quick's ordinary path, served by `wg` through the userspace control socket.
 * `up()` verifies the outcome: `/var/run/wireguard/<iface>.sock` exists, the link is a `tun`,
 * and wg-quick's trace shows the shim ran `wireguard-go <iface>`.
 *
 * That socket directory is shared across namespaces, so every interface name must be distinct.
 */
export async function createWgQuick(lab: Lab): Promise<WgQuick> {
  const { wgQuick: wgQuickCopy, env } = await createWgQuickBin(lab);
  const tunnels: Tunnel[] = [];

  const up = async (ns: string, confPath: string, interfaceName: string): Promise<void> => {
    if (tunnels.some((tunnel) => tunnel.interfaceName === interfaceName)) {
      throw new Error(`interface ${interfaceName} is already up in this lab`);
    }
    tunnels.push({ ns, interfaceName, confPath });
    const { stderr } = await lab.exec(ns, wgQuickCopy, ["up", confPath], { env });
    if (!stderr.includes(`${USERSPACE_MARK} ${interfaceName}`)) {
      throw new Error(`wg-quick up did not go through the wireguard-go shim:\n${stderr}`);
    }
    await assertUserspaceInterface(lab, ns, interfaceName);
  };

  let downing: Promise<void> | undefined;
  const downAll = (): Promise<void> => {
    downing ??= (async () => {
      const errors: unknown[] = [];
      for (const tunnel of tunnels) {
        try {
          await lab.exec(tunnel.ns, wgQuickCopy, ["down", tunnel.confPath], { env });
        } catch (downError) {
          // wireguard-go watches its control socket and exits when the file is deleted;
          // lab.destroy() then kills by pid whatever is still left in the namespace.
          try {
            await rm(socketPath(tunnel.interfaceName), { force: true });
          } catch (rmError) {
            errors.push(downError, rmError);
          }
        }
      }
      if (errors.length > 0) throw new AggregateError(errors, "wg-quick down failed");
    })();
    return downing;
  };

  return { up, downAll };
}

/**
 * Builds the bin directory described at {@link createWgQuick}: `<lab.dir>/wg-quick-bin` holding
 * the `ip` shim and an unmodified copy of the installed wg-quick. A process that runs `wg-quick`
 * by name with `env` (an agent's toolchain) gets the same wireguard-go-forcing behaviour as
 * {@link WgQuick.up}. Rebuilding it is harmless (same files).
 */
export async function createWgQuickBin(lab: Lab): Promise<WgQuickBin> {
  const realIp = findOnPath("ip");
  const installedWgQuick = findOnPath("wg-quick");
  if (realIp === undefined || installedWgQuick === undefined) throw new Error("ip or wg-quick is not on PATH");
  const shimDir = join(lab.dir, "wg-quick-bin");
  await mkdir(shimDir, { recursive: true });
  const wgQuickCopy = join(shimDir, "wg-quick");
  await copyFile(installedWgQuick, wgQuickCopy);
  await chmod(wgQuickCopy, 0o755);
  await writeFile(
    join(shimDir, "ip"),
    [
      "#!/bin/sh",
      "# Written by test/helpers/wireguard.ts: run wireguard-go where wg-quick asks for a kernel link.",
      'if [ "$#" -eq 5 ] && [ "$1" = link ] && [ "$2" = add ] && [ "$4" = type ] && [ "$5" = wireguard ]; then',
      `  echo "${USERSPACE_MARK} $3" >&2`,
      '  exec "${WG_QUICK_USERSPACE_IMPLEMENTATION:-wireguard-go}" "$3"',
      "fi",
      `exec ${realIp} "$@"`,
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  const env: Record<string, string | undefined> = {
    PATH: `${shimDir}:${process.env["PATH"] ?? ""}`,
    WG_QUICK_USERSPACE_IMPLEMENTATION: "wireguard-go",
    // With LOG_LEVEL set, the daemonised wireguard-go keeps our stdout/stderr pipes open and
    // execFile would wait for it forever.
    LOG_LEVEL: undefined,
  };
  return { dir: shimDir, wgQuick: wgQuickCopy, env };
}

export function socketPath(interfaceName: string): string {
  return join(WIREGUARD_RUN_DIR, `${interfaceName}.sock`);
}

/** Throws unless `interfaceName` in `ns` is a TUN device served by a userspace control socket. */
export async function assertUserspaceInterface(lab: Lab, ns: string, interfaceName: string): Promise<void> {
  try {
    await access(socketPath(interfaceName));
  } catch {
    throw new Error(`${socketPath(interfaceName)} is missing: ${interfaceName} is not run by wireguard-go`);
  }
  const { stdout } = await run("ip", ["-n", ns, "-d", "link", "show", "dev", interfaceName]);
  if (!/^\s*tun\b/m.test(stdout)) {
    throw new Error(`${interfaceName} in ${ns} is not a tun device (kernel WireGuard?):\n${stdout}`);
  }
}

/** `wg show <iface> latest-handshakes` as public key → unix seconds (0 = never). */
export async function latestHandshakes(lab: Lab, ns: string, interfaceName: string): Promise<Map<string, number>> {
  const { stdout } = await lab.exec(ns, "wg", ["show", interfaceName, "latest-handshakes"]);
  const handshakes = new Map<string, number>();
  for (const line of stdout.split("\n")) {
    const [publicKey, seconds] = line.trim().split(/\s+/);
    if (publicKey !== undefined && publicKey !== "" && seconds !== undefined) {
      handshakes.set(publicKey, Number(seconds));
    }
  }
  return handshakes;
}

/**
 * Pings `address` from `ns` (`ping -c 1 -W 2`) until one reply comes back, at most `attempts`
 * times. The first packet towards a peer triggers the WireGuard handshake; wireguard-go queues
 * it, so one attempt normally suffices and the bound only absorbs a slow first handshake.
 * Returns the number of attempts used.
 */
export async function pingUntilReply(lab: Lab, ns: string, address: string, attempts = 5): Promise<number> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    try {
      await lab.exec(ns, "ping", ["-n", "-c", "1", "-W", "2", address]);
      return attempt;
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`no reply from ${address} in ${ns} after ${attempts} pings`, { cause: lastError });
}
