import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { posix, win32 } from "node:path";
import { peerDelta, type PeerChanges } from "./peer-delta.js";
import { interfaceNameSchema, type TunnelProtocol } from "../protocol/envelope.schema.js";
import type { CommandResult, CommandRunner, Toolchain, ToolchainFor } from "./toolchain.types.js";

/**
 * The toolchains of spec §6.3 ("Toolchains by tunnel_protocol") on each platform.
 *
 * Linux and macOS: status `wg show <iface>` / `awg show <iface>` (exit 0 = running), up and down
 * `wg-quick up|down <configPath>` / `awg-quick up|down <configPath>`. The full path to
 * `<iface>.conf` is always passed, never the bare name: wg-quick accepts a path and takes the
 * interface name from the file name (wireguard-tools `src/wg-quick/linux.bash` and
 * `darwin.bash`, `parse_options`), so tests and several agents on one host can each use their
 * own directory. Peers of a running interface change in place with `wg-quick strip <configPath>`,
 * `wg show <iface> peers`, `wg addconf <iface> <file>` and `wg set <iface> peer <key> remove`
 * (`awg-quick` / `awg`), the text passed through a private temp file instead of a shell.
 *
 * Default config directories:
 * - `wireguard` on Linux: `/etc/wireguard` (wg-quick's first search path).
 * - `wireguard` on macOS: `/usr/local/etc/wireguard`. Upstream `darwin.bash` searches
 *   `CONFIG_SEARCH_PATHS=( /etc/wireguard /usr/local/etc/wireguard )`, and Homebrew's
 *   `wireguard-tools` formula keeps `/usr/local/etc/wireguard` in that list on every prefix (on a
 *   non-default prefix such as /opt/homebrew it only appends `#{etc}/wireguard` after it), so this
 *   is the directory every Homebrew install of wg-quick finds by name.
 * - `awg_2` on Linux and macOS: `/etc/amnezia/amneziawg` (amneziawg-tools `linux.bash` and
 *   `darwin.bash`: `CONFIG_SEARCH_PATHS=( /etc/amnezia/amneziawg /usr/local/etc/amnezia/amneziawg )`).
 *
 * Windows (the agent runs as LocalSystem, spec §5):
 * - `wireguard`: `wireguard.exe /installtunnelservice <configPath>` and
 *   `wireguard.exe /uninstalltunnelservice <iface>`; status `sc.exe query WireGuardTunnel$<iface>`
 *   (state 4 RUNNING); diagnostics `wg.exe show <iface>`. Service name from wireguard-windows
 *   `conf/name.go` `ServiceNameOfTunnel`.
 * - `awg_2`: AmneziaWG's `amneziawg.exe` (same `/installtunnelservice` and `/uninstalltunnelservice`
 *   commands, amneziawg-windows-client `main.go`) and `awg.exe` (built from amneziawg-tools as
 *   `awg.exe`, amneziawg-windows-client `build.bat`); both installed in `%ProgramFiles%\AmneziaWG`
 *   (its `installer/wireguard.wxs`). Service name `AmneziaWGTunnel$<iface>`: amneziawg-windows
 *   `services/names.go` returns `"AmneziaWGTunnel$" + tunnelName`, and the Amnezia VPN client's
 *   Windows daemon uses `AmneziaWGTunnel$AmneziaVPN`. Caveat: an older revision of that same
 *   `names.go` returned `"WireGuardTunnel$"`, so a very old AmneziaWG build would register its
 *   tunnels under WireGuard's prefix; only the current name is queried here, because querying
 *   both would make a WireGuard tunnel look like an AmneziaWG one (spec §3.8 inspects both).
 * - Config files: the tunnel services load a plain `.conf` from any path (wireguard-windows
 *   `conf/store.go` `LoadFromPath`; only `.conf.dpapi` files are decrypted) and name the tunnel
 *   after the file. Their own store, `C:\Program Files\WireGuard\Data\Configurations\*.conf.dpapi`,
 *   is DPAPI-encrypted and owned by the manager service, so the agent keeps plain files in its own
 *   directory instead: `%ProgramData%\svc\<protocol>\<iface>.conf`. File modes mean nothing on
 *   Windows: the agent's service installer must restrict `%ProgramData%\svc` to SYSTEM and
 *   Administrators (the files hold private keys).
 *
 * Every method validates the interface name first (wg-quick's rule, plus the extra refusals in
 * {@link assertInterfaceName}) and throws {@link InvalidInterfaceNameError} before any command
 * runs, so an unvalidated string never reaches a tool.
 */

export interface CreateToolchainsOptions {
  platform: NodeJS.Platform;
  run: CommandRunner;
  /** Overrides of the config directory per protocol (tests; several agents on one host). */
  configDirs?: Partial<Record<TunnelProtocol, string>>;
  /** Directory holding every tool (`wg`, `wg-quick`, `awg`, `awg-quick`, or the Windows `.exe`s); default: PATH on Linux/macOS, the install directories on Windows. `sc.exe` always comes from System32. */
  binDir?: string;
  /**
   * Where Windows folders are read from (`ProgramFiles`, `ProgramData`, `SystemRoot`); the agent's
   * entry point passes `process.env`. Defaults: `C:\Program Files`, `C:\ProgramData`, `C:\Windows`.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** Time limits, ms: status and show (default 10 s), up and down (default 20 s). */
  timeouts?: { statusMs?: number; upDownMs?: number };
}

export const DEFAULT_STATUS_TIMEOUT_MS = 10_000;
export const DEFAULT_UP_DOWN_TIMEOUT_MS = 20_000;

/** Longest tool output quoted in an error message (ACK messages are bounded, spec §6.3 / schema). */
const MAX_QUOTED_OUTPUT = 1000;

/** Thrown, before any command runs, for a name that fails {@link assertInterfaceName}. */
export class InvalidInterfaceNameError extends Error {
  readonly code = "INVALID_INTERFACE_NAME";
  constructor(readonly interfaceName: string, reason: string) {
    super(`invalid interface name ${JSON.stringify(interfaceName.slice(0, 40))}: ${reason}`);
    this.name = "InvalidInterfaceNameError";
  }
}

/** Thrown by `up` / `down` when the tool fails; the message carries its exit code and output. */
export class ToolchainCommandError extends Error {
  readonly code = "TOOLCHAIN_COMMAND_FAILED";
  constructor(readonly command: string, readonly result: CommandResult) {
    super(`\`${command}\` failed (exit ${result.code}): ${quoteOutput(result)}`);
    this.name = "ToolchainCommandError";
  }
}

/** Windows device names a tunnel may not take (wireguard-windows `conf/name.go` `reservedNames`). */
const WINDOWS_RESERVED = /^(con|prn|aux|nul|com[1-9]|lpt[1-9])$/i;
/** Words `wg show` / `awg show` read as subcommands rather than interface names. */
const SHOW_KEYWORDS = new Set(["all", "interfaces"]);

/**
 * wg-quick's interface name rule `^[a-zA-Z0-9_=+.-]{1,15}$` (linux.bash `parse_options`, shared
 * with the protocol schema), plus refusals that keep a valid-looking name from meaning something
 * else to a tool: a leading `-` (an option), `.` / `..` (directories), `all` / `interfaces`
 * (`wg show` keywords), and on Windows the reserved device names and a leading or trailing dot
 * (wireguard-windows `TunnelNameIsValid`).
 */
export function assertInterfaceName(name: string, platform: NodeJS.Platform): void {
  if (!interfaceNameSchema.safeParse(name).success) {
    throw new InvalidInterfaceNameError(name, "must match ^[a-zA-Z0-9_=+.-]{1,15}$ (wg-quick)");
  }
  if (name.startsWith("-")) throw new InvalidInterfaceNameError(name, "must not start with '-'");
  if (name === "." || name === "..") throw new InvalidInterfaceNameError(name, "must not be '.' or '..'");
  if (SHOW_KEYWORDS.has(name)) throw new InvalidInterfaceNameError(name, "is a `wg show` keyword");
  if (platform === "win32") {
    if (WINDOWS_RESERVED.test(name.split(".")[0] ?? "")) throw new InvalidInterfaceNameError(name, "is a reserved Windows device name");
    if (name.startsWith(".") || name.endsWith(".")) throw new InvalidInterfaceNameError(name, "must not start or end with '.' on Windows");
  }
}

interface UnixTools {
  status: string; // wg | awg
  quick: string; // wg-quick | awg-quick
}

const UNIX_TOOLS: Record<TunnelProtocol, UnixTools> = {
  wireguard: { status: "wg", quick: "wg-quick" },
  awg_2: { status: "awg", quick: "awg-quick" },
};

interface WindowsTools {
  installDir: string; // under %ProgramFiles%
  service: string; // wireguard.exe | amneziawg.exe
  show: string; // wg.exe | awg.exe
  servicePrefix: string;
}

const WINDOWS_TOOLS: Record<TunnelProtocol, WindowsTools> = {
  wireguard: { installDir: "WireGuard", service: "wireguard.exe", show: "wg.exe", servicePrefix: "WireGuardTunnel$" },
  awg_2: { installDir: "AmneziaWG", service: "amneziawg.exe", show: "awg.exe", servicePrefix: "AmneziaWGTunnel$" },
};

/** Default config directory of a protocol on a platform (see the module comment). */
export function defaultConfigDir(protocol: TunnelProtocol, platform: NodeJS.Platform, env: Readonly<Record<string, string | undefined>> = {}): string {
  if (platform === "win32") return win32.join(env["ProgramData"] ?? "C:\\ProgramData", "svc", protocol);
  if (protocol === "awg_2") return "/etc/amnezia/amneziawg";
  return platform === "darwin" ? "/usr/local/etc/wireguard" : "/etc/wireguard";
}

/** Builds the {@link ToolchainFor} of spec §6.3 for one platform. */
export function createToolchains(opts: CreateToolchainsOptions): ToolchainFor {
  const env = opts.env ?? {};
  const statusMs = opts.timeouts?.statusMs ?? DEFAULT_STATUS_TIMEOUT_MS;
  const upDownMs = opts.timeouts?.upDownMs ?? DEFAULT_UP_DOWN_TIMEOUT_MS;
  const build = (protocol: TunnelProtocol): Toolchain => {
    const configDir = opts.configDirs?.[protocol] ?? defaultConfigDir(protocol, opts.platform, env);
    const ctx: BuildContext = { protocol, platform: opts.platform, run: opts.run, configDir, binDir: opts.binDir, env, statusMs, upDownMs };
    return Object.freeze(opts.platform === "win32" ? windowsToolchain(ctx) : unixToolchain(ctx));
  };
  const chains: Record<TunnelProtocol, Toolchain> = { wireguard: build("wireguard"), awg_2: build("awg_2") };
  return (protocol) => {
    const chain = (chains as Partial<Record<string, Toolchain>>)[protocol];
    if (chain === undefined) throw new Error(`unknown tunnel_protocol ${JSON.stringify(protocol)}`);
    return chain;
  };
}

interface BuildContext {
  protocol: TunnelProtocol;
  platform: NodeJS.Platform;
  run: CommandRunner;
  configDir: string;
  binDir: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  statusMs: number;
  upDownMs: number;
}

function unixToolchain(ctx: BuildContext): Toolchain {
  const names = UNIX_TOOLS[ctx.protocol];
  const tool = (name: string) => (ctx.binDir === undefined ? name : posix.join(ctx.binDir, name));
  const configPath = (iface: string) => {
    assertInterfaceName(iface, ctx.platform);
    return posix.join(ctx.configDir, `${iface}.conf`);
  };
  const quick = async (verb: "up" | "down", iface: string) => {
    const path = configPath(iface);
    await mustSucceed(ctx.run, tool(names.quick), [verb, path], ctx.upDownMs);
  };
  const show = async (iface: string): Promise<CommandResult> => {
    assertInterfaceName(iface, ctx.platform);
    return ctx.run(tool(names.status), ["show", iface], { timeoutMs: ctx.statusMs });
  };
  const dump = async (iface: string): Promise<CommandResult> => {
    assertInterfaceName(iface, ctx.platform);
    return ctx.run(tool(names.status), ["show", iface, "dump"], { timeoutMs: ctx.statusMs });
  };
  const checked = async (file: string, args: string[]): Promise<string> => {
    const result = await ctx.run(file, args, { timeoutMs: ctx.statusMs });
    if (result.code !== 0) throw new ToolchainCommandError([file, ...args].join(" "), result);
    return result.stdout;
  };
  const syncPeers = async (iface: string, previousText: string): Promise<PeerChanges> => {
    const stripped = await checked(tool(names.quick), ["strip", configPath(iface)]);
    const running = (await checked(tool(names.status), ["show", iface, "peers"])).split("\n").map((line) => line.trim()).filter((line) => line !== "");
    const delta = peerDelta(previousText, stripped, running);
    if (delta.addconf !== null) {
      await withPrivateFile(delta.addconf, (file) => mustSucceed(ctx.run, tool(names.status), ["addconf", iface, file], ctx.upDownMs));
    }
    if (delta.remove.length > 0) {
      await mustSucceed(ctx.run, tool(names.status), ["set", iface, ...delta.remove.flatMap((key) => ["peer", key, "remove"])], ctx.upDownMs);
    }
    return { added: delta.added, changed: delta.changed, removed: delta.removed };
  };
  return {
    protocol: ctx.protocol,
    configPath,
    isRunning: async (iface) => (await show(iface)).code === 0,
    up: (iface) => quick("up", iface),
    down: (iface) => quick("down", iface),
    show,
    dump,
    syncPeers,
  };
}

/**
 * Runs `use` on a file holding `text` in a fresh directory of the temp dir (mode 0700, the file
 * 0600: a peer's preshared key is a secret), removed afterwards whatever `use` did.
 */
async function withPrivateFile(text: string, use: (file: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(posix.join(tmpdir(), "svc-peers-"));
  try {
    const file = posix.join(dir, "peers.conf");
    await writeFile(file, text, { mode: 0o600, flag: "wx" });
    await use(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function windowsToolchain(ctx: BuildContext): Toolchain {
  const names = WINDOWS_TOOLS[ctx.protocol];
  const binDir = ctx.binDir ?? win32.join(ctx.env["ProgramFiles"] ?? "C:\\Program Files", names.installDir);
  const scExe = win32.join(ctx.env["SystemRoot"] ?? "C:\\Windows", "System32", "sc.exe");
  const configPath = (iface: string) => {
    assertInterfaceName(iface, ctx.platform);
    return win32.join(ctx.configDir, `${iface}.conf`);
  };
  const show = async (iface: string): Promise<CommandResult> => {
    assertInterfaceName(iface, ctx.platform);
    return ctx.run(win32.join(binDir, names.show), ["show", iface], { timeoutMs: ctx.statusMs });
  };
  const dump = async (iface: string): Promise<CommandResult> => {
    assertInterfaceName(iface, ctx.platform);
    return ctx.run(win32.join(binDir, names.show), ["show", iface, "dump"], { timeoutMs: ctx.statusMs });
  };
  return {
    protocol: ctx.protocol,
    configPath,
    isRunning: async (iface) => {
      assertInterfaceName(iface, ctx.platform);
      const result = await ctx.run(scExe, ["query", `${names.servicePrefix}${iface}`], { timeoutMs: ctx.statusMs });
      // `sc query` prints "STATE : 4 RUNNING"; the number is SERVICE_RUNNING and is not
      // localized. A missing service exits 1060 (ERROR_SERVICE_DOES_NOT_EXIST).
      return result.code === 0 && /STATE\s*:\s*4\b/.test(result.stdout);
    },
    up: async (iface) => {
      const path = configPath(iface);
      await mustSucceed(ctx.run, win32.join(binDir, names.service), ["/installtunnelservice", path], ctx.upDownMs);
    },
    down: async (iface) => {
      assertInterfaceName(iface, ctx.platform);
      await mustSucceed(ctx.run, win32.join(binDir, names.service), ["/uninstalltunnelservice", iface], ctx.upDownMs);
    },
    show,
    dump,
  };
}

async function mustSucceed(run: CommandRunner, file: string, args: readonly string[], timeoutMs: number): Promise<void> {
  const result = await run(file, args, { timeoutMs });
  if (result.code !== 0) throw new ToolchainCommandError([file, ...args].join(" "), result);
}

function quoteOutput(result: CommandResult): string {
  const text = (result.stderr.trim() || result.stdout.trim() || "no output").replace(/\s+/g, " ");
  return text.length > MAX_QUOTED_OUTPUT ? `${text.slice(0, MAX_QUOTED_OUTPUT)}…` : text;
}
