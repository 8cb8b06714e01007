import type { ServiceHost, ServiceSpec, ServiceStatus } from "./host.js";

/**
 * Windows: the agent as the service `SvcAgent`, running as LocalSystem, started automatically
 * (spec §5 service identity table). Pure argv builders ({@link windowsServiceCommands}) are kept
 * apart from the executor, which runs `sc.exe` through a runner.
 */

export const WINDOWS_SERVICE_NAME = "SvcAgent";
export const WINDOWS_DISPLAY_NAME = "svc mesh agent";
const DESCRIPTION = "Runs the svc mesh agent: the node's MQTT control channel and its WireGuard/AmneziaWG tunnel.";

/** sc.exe exit codes (Win32 error numbers). */
const ERROR_SERVICE_DOES_NOT_EXIST = 1060;
const ERROR_SERVICE_NOT_ACTIVE = 1062;

/**
 * One word of a Windows command line as `CommandLineToArgvW` / the MSVC runtime parse it: quoted
 * when it holds whitespace or a quote, backslashes doubled only before a quote.
 */
export function windowsQuote(word: string): string {
  if (word !== "" && !/[\s"]/.test(word)) return word;
  let out = '"';
  let backslashes = 0;
  for (const ch of word) {
    if (ch === "\\") {
      backslashes++;
      continue;
    }
    out += ch === '"' ? `${"\\".repeat(backslashes * 2 + 1)}"` : `${"\\".repeat(backslashes)}${ch}`;
    backslashes = 0;
  }
  return `${out}${"\\".repeat(backslashes * 2)}"`;
}

/** The service's command line (`binPath=`), each word quoted for Windows. */
export function windowsBinPath(command: readonly string[]): string {
  return command.map(windowsQuote).join(" ");
}

/** The argument list shared by `sc.exe create` and `sc.exe config` (note sc's `name= value` pairs). */
function serviceArgs(spec: ServiceSpec): string[] {
  return ["binPath=", windowsBinPath(spec.command), "obj=", "LocalSystem", "start=", "auto", "DisplayName=", WINDOWS_DISPLAY_NAME];
}

/**
 * The `sc.exe` argv lists of a fresh install, in order: create (LocalSystem, automatic start),
 * description, restart on failure (every 5 s, counter reset daily), start.
 */
export function windowsServiceCommands(spec: ServiceSpec): string[][] {
  return [
    ["sc.exe", "create", WINDOWS_SERVICE_NAME, ...serviceArgs(spec)],
    ["sc.exe", "description", WINDOWS_SERVICE_NAME, DESCRIPTION],
    ["sc.exe", "failure", WINDOWS_SERVICE_NAME, "reset=", "86400", "actions=", "restart/5000/restart/5000/restart/5000"],
    ["sc.exe", "start", WINDOWS_SERVICE_NAME],
  ];
}

/**
 * The `sc.exe` argv lists when `SvcAgent` already exists: stop it, reconfigure in place (a
 * delete + create races with "marked for deletion"), then the rest of a fresh install.
 */
export function windowsReinstallCommands(spec: ServiceSpec): string[][] {
  const [, ...rest] = windowsServiceCommands(spec);
  return [["sc.exe", "stop", WINDOWS_SERVICE_NAME], ["sc.exe", "config", WINDOWS_SERVICE_NAME, ...serviceArgs(spec)], ...rest];
}

/** The `sc.exe` argv lists that remove the service. */
export function windowsUninstallCommands(): string[][] {
  return [
    ["sc.exe", "stop", WINDOWS_SERVICE_NAME],
    ["sc.exe", "delete", WINDOWS_SERVICE_NAME],
  ];
}

/**
 * Restricts the profile directory to SYSTEM and Administrators (by SID, so any locale), with
 * inheritance: the profile holds the node's MQTT password, and %ProgramData% is readable by
 * every local user. File modes mean nothing on Windows; this is the 0700/0600 equivalent.
 */
export function windowsProfileAclCommand(dir: string): string[] {
  return ["icacls", dir, "/inheritance:r", "/grant:r", "*S-1-5-18:(OI)(CI)F", "*S-1-5-32-544:(OI)(CI)F"];
}

/** Whether a failure is sc.exe saying the service does not exist or is not running. */
const NOT_THERE = new RegExp(`${ERROR_SERVICE_DOES_NOT_EXIST}|${ERROR_SERVICE_NOT_ACTIVE}|does not exist|has not been started`, "i");

async function exists(host: ServiceHost): Promise<boolean> {
  const res = await host.exec(["sc.exe", "query", WINDOWS_SERVICE_NAME]);
  return res.code === 0;
}

/** Creates (or reconfigures) and starts `SvcAgent`. @returns the service name */
export async function installWindows(host: ServiceHost, spec: ServiceSpec): Promise<string> {
  if (await exists(host)) {
    const [stop, ...rest] = windowsReinstallCommands(spec) as [string[], ...string[][]];
    await host.mustExec(stop, { tolerate: NOT_THERE });
    for (const argv of rest) await host.mustExec(argv);
  } else {
    for (const argv of windowsServiceCommands(spec)) await host.mustExec(argv);
  }
  return WINDOWS_SERVICE_NAME;
}

/** Stops and deletes `SvcAgent`, tolerating one that is not running or not there. */
export async function uninstallWindows(host: ServiceHost): Promise<string> {
  for (const argv of windowsUninstallCommands()) await host.mustExec(argv, { tolerate: NOT_THERE });
  return WINDOWS_SERVICE_NAME;
}

/** `sc.exe query SvcAgent`: exists, and `STATE : 4 RUNNING`. */
export async function windowsStatus(host: ServiceHost): Promise<ServiceStatus> {
  const res = await host.exec(["sc.exe", "query", WINDOWS_SERVICE_NAME]);
  const state = /STATE\s*:\s*\d+\s+(\w+)/.exec(res.stdout)?.[1];
  return {
    manager: "windows-scm",
    name: WINDOWS_SERVICE_NAME,
    file: null,
    installed: res.code === 0,
    running: res.code === 0 && state === "RUNNING",
    detail: res.code === 127 ? "sc.exe not found" : res.code === 0 ? `state=${state ?? "unknown"}` : "not installed",
  };
}
