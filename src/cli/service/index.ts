import { isAbsolute, resolve as resolvePath } from "node:path";
import { fileURLToPath } from "node:url";
import { ServiceError, type ServiceHost, type ServiceSpec, type ServiceStatus } from "./host.js";
import { installLaunchd, launchdStatus, uninstallLaunchd } from "./launchd.js";
import { installSystemd, systemdStatus, uninstallSystemd } from "./systemd.js";
import { installWindows, uninstallWindows, windowsStatus } from "./windows.js";

/**
 * The agent as a system service, per platform (spec §5 rule 4 and its identity table: Windows
 * `SvcAgent` as LocalSystem, Linux `svc-agent.service` as root, macOS a LaunchDaemon as root).
 *
 * Each platform module has pure renderers (unit text, plist text, `sc.exe` argv lists) and an
 * executor working through a {@link ServiceHost}, so tests can run the executors against a temp
 * directory and a recording runner.
 */

export { createServiceHost, execRunner, ServiceError } from "./host.js";
export type { ServiceErrorReason, ServiceHost, ServiceSpec, ServiceStatus } from "./host.js";
export { renderSystemdUnit, systemdCommands, systemdQuote, SYSTEMD_UNIT_DIR, SYSTEMD_UNIT_NAME } from "./systemd.js";
export { renderLaunchdPlist, launchdCommands, LAUNCHD_LABEL, LAUNCH_DAEMONS_DIR } from "./launchd.js";
export {
  windowsServiceCommands,
  windowsReinstallCommands,
  windowsUninstallCommands,
  windowsProfileAclCommand,
  windowsBinPath,
  windowsQuote,
  WINDOWS_SERVICE_NAME,
} from "./windows.js";

/** Where the service lives and who may change it. */
export interface ServiceTarget {
  platform: NodeJS.Platform;
  host: ServiceHost;
  /** Root (POSIX) or Administrator (Windows); see {@link hasServicePrivileges}. */
  isPrivileged(): Promise<boolean>;
  /** Test overrides of the system directories. */
  paths?: { systemdUnitDir?: string; launchDaemonsDir?: string };
}

/**
 * Whether this process may install a system service: uid 0 on Linux and macOS; on Windows an
 * elevated Administrator (`net session` succeeds only then). Never throws.
 */
export async function hasServicePrivileges(
  platform: NodeJS.Platform,
  host: ServiceHost,
  getuid: (() => number) | undefined = process.getuid,
): Promise<boolean> {
  if (platform === "win32") return (await host.exec(["net", "session"])).code === 0;
  return getuid?.() === 0;
}

const IDENTITY: Record<string, string> = { linux: "root", darwin: "root", win32: "an elevated Administrator" };

/**
 * @param what the operation, e.g. "installing the agent service"
 * @param note appended to the message
 * @throws ServiceError `privileges` when not root / not an elevated Administrator
 */
export async function assertServicePrivileges(target: ServiceTarget, what: string, note = ""): Promise<void> {
  if (await target.isPrivileged()) return;
  const who = IDENTITY[target.platform] ?? "root";
  const hint = target.platform === "win32" ? "run it from an elevated prompt" : "run it with sudo";
  throw new ServiceError(
    "privileges",
    `${what} needs ${who}: the agent runs as a system service with ${target.platform === "win32" ? "LocalSystem" : "root"} identity (spec §5); ${hint}${note}`,
  );
}

function unsupported(platform: string): ServiceError {
  return new ServiceError("unsupported", `no system service support for platform ${platform} (supported: linux, darwin, win32)`);
}

/**
 * Installs (or reinstalls) the agent service and starts it; a reinstall restarts it, so a re-bound
 * agent picks up its new profile.
 * @returns the unit file, plist file or Windows service name
 * @throws ServiceError `privileges` (not root / not elevated; nothing changed), `unsupported`,
 *   `command` (a service manager command failed); fs errors writing the unit or plist
 */
export async function installService(target: ServiceTarget, spec: ServiceSpec): Promise<string> {
  await assertServicePrivileges(target, "installing the agent service");
  switch (target.platform) {
    case "linux":
      return installSystemd(target.host, spec, target.paths?.systemdUnitDir);
    case "darwin":
      return installLaunchd(target.host, spec, target.paths?.launchDaemonsDir);
    case "win32":
      return installWindows(target.host, spec);
    default:
      throw unsupported(target.platform);
  }
}

/** Stops and removes the agent service (the profile stays). @throws like {@link installService} */
export async function uninstallService(target: ServiceTarget): Promise<string> {
  await assertServicePrivileges(target, "removing the agent service");
  switch (target.platform) {
    case "linux":
      return uninstallSystemd(target.host, target.paths?.systemdUnitDir);
    case "darwin":
      return uninstallLaunchd(target.host, target.paths?.launchDaemonsDir);
    case "win32":
      return uninstallWindows(target.host);
    default:
      throw unsupported(target.platform);
  }
}

/** Whether the agent service is installed and running; needs no privileges, never throws. */
export async function serviceStatus(target: ServiceTarget): Promise<ServiceStatus> {
  switch (target.platform) {
    case "linux":
      return systemdStatus(target.host, target.paths?.systemdUnitDir);
    case "darwin":
      return launchdStatus(target.host, target.paths?.launchDaemonsDir);
    case "win32":
      return windowsStatus(target.host);
    default:
      return { manager: "none", name: "", file: null, installed: false, running: false, detail: unsupported(target.platform).message };
  }
}

/** How this svcctl was started, so the service can start the agent the same way. */
export interface AgentLauncher {
  /** `process.execPath` */
  execPath: string;
  /** `process.execArgv`: loaders such as tsx are kept, debugging and test flags dropped. */
  execArgv: readonly string[];
  /** Absolute path of the svcctl entry (the bundle, or src/cli/svcctl.ts in a checkout). */
  entry: string;
  /** Resolves a bare loader specifier (`--import tsx`) to a URL; `import.meta.resolve` by default. */
  resolve?: (specifier: string) => string;
}

const LOADER_FLAGS = new Set(["--import", "--require", "-r", "--loader", "--experimental-loader"]);
const PLAIN_FLAGS = new Set(["--enable-source-maps", "--no-warnings"]);

function isBareSpecifier(s: string): boolean {
  return !s.startsWith(".") && !isAbsolute(s) && !/^[a-z][a-z0-9+.-]*:/i.test(s);
}

/**
 * The argv a service runs: `<node> [loader flags] <entry> agent run --profile-dir <dir>`.
 * Bare loader specifiers are resolved now (a service starts in `/`, where `--import tsx` would
 * not be found); relative ones against the current directory.
 */
export function agentCommand(profileDir: string, launcher: AgentLauncher): string[] {
  const resolveSpec = launcher.resolve ?? ((s: string) => import.meta.resolve(s));
  const pinned = (flag: string, value: string): string => {
    let v = value;
    if (isBareSpecifier(v)) {
      try {
        v = resolveSpec(v);
      } catch {
        return value; // unresolvable here: keep it as given
      }
    } else if (v.startsWith(".")) v = resolvePath(v);
    if ((flag === "--require" || flag === "-r") && v.startsWith("file:")) v = fileURLToPath(v);
    return v;
  };
  const flags: string[] = [];
  const argv = launcher.execArgv;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    const eq = arg.indexOf("=");
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    if (LOADER_FLAGS.has(name)) {
      const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
      if (value !== undefined) flags.push(name, pinned(name, value));
    } else if (PLAIN_FLAGS.has(arg)) {
      flags.push(arg);
    }
  }
  return [launcher.execPath, ...flags, launcher.entry, "agent", "run", "--profile-dir", profileDir];
}
