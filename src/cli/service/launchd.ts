import { join } from "node:path";
import type { ServiceHost, ServiceSpec, ServiceStatus } from "./host.js";

/**
 * macOS: the agent as the LaunchDaemon `com.svc.agent`, running as root (spec §5 service identity
 * table). Pure rendering ({@link renderLaunchdPlist}, {@link launchdCommands}) is kept apart from
 * the executor, which writes the plist and runs `launchctl` through a runner.
 */

export const LAUNCHD_LABEL = "com.svc.agent";
export const LAUNCH_DAEMONS_DIR = "/Library/LaunchDaemons";
export const LAUNCHD_LOG_FILE = "/Library/Logs/svc-agent.log";
const TARGET = `system/${LAUNCHD_LABEL}`;

/** XML text and attribute escaping. */
export function xmlEscape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c] ?? c);
}

export interface LaunchdPlistOptions extends ServiceSpec {
  /** Where the agent's JSON log lines go (stdout and stderr); {@link LAUNCHD_LOG_FILE} by default. */
  logFile?: string;
}

/**
 * The LaunchDaemon plist: started at boot (`RunAtLoad`), restarted whenever it exits
 * (`KeepAlive`, at most every 5 s), as root (`UserName`).
 */
export function renderLaunchdPlist(opts: LaunchdPlistOptions): string {
  const log = xmlEscape(opts.logFile ?? LAUNCHD_LOG_FILE);
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    "<!-- Written by svcctl: the svc mesh agent as a LaunchDaemon (spec §5: root). -->",
    '<plist version="1.0">',
    "<dict>",
    "  <key>Label</key>",
    `  <string>${LAUNCHD_LABEL}</string>`,
    "  <key>ProgramArguments</key>",
    "  <array>",
    ...opts.command.map((arg) => `    <string>${xmlEscape(arg)}</string>`),
    "  </array>",
    "  <key>UserName</key>",
    "  <string>root</string>",
    "  <key>RunAtLoad</key>",
    "  <true/>",
    "  <key>KeepAlive</key>",
    "  <true/>",
    "  <key>ThrottleInterval</key>",
    "  <integer>5</integer>",
    "  <key>StandardOutPath</key>",
    `  <string>${log}</string>`,
    "  <key>StandardErrorPath</key>",
    `  <string>${log}</string>`,
    "</dict>",
    "</plist>",
    "",
  ].join("\n");
}

/**
 * The `launchctl` argv lists. Install first boots out a loaded copy (so a re-bind restarts the
 * agent with the new profile) and enables the label (a disabled label refuses to bootstrap).
 */
export function launchdCommands(plistPath: string): { install: string[][]; uninstall: string[][] } {
  return {
    install: [
      ["launchctl", "bootout", TARGET],
      ["launchctl", "enable", TARGET],
      ["launchctl", "bootstrap", "system", plistPath],
    ],
    uninstall: [["launchctl", "bootout", TARGET]],
  };
}

function plistPath(dir: string | undefined): string {
  return join(dir ?? LAUNCH_DAEMONS_DIR, `${LAUNCHD_LABEL}.plist`);
}

/** launchctl's answers for a label that is not loaded. */
const NOT_LOADED = /no such process|could not find|not loaded/i;

/**
 * Writes the plist (0644, root-owned as the one running this), then boots the daemon in.
 * @param daemonsDir {@link LAUNCH_DAEMONS_DIR} unless a test says otherwise
 * @returns the plist path
 */
export async function installLaunchd(host: ServiceHost, spec: ServiceSpec, daemonsDir?: string): Promise<string> {
  const file = plistPath(daemonsDir);
  await host.writeFile(file, renderLaunchdPlist(spec), 0o644);
  const [bootout, ...rest] = launchdCommands(file).install as [string[], ...string[][]];
  await host.mustExec(bootout, { tolerate: NOT_LOADED });
  for (const argv of rest) await host.mustExec(argv);
  return file;
}

/** Boots the daemon out (tolerating one that is not loaded) and removes the plist. */
export async function uninstallLaunchd(host: ServiceHost, daemonsDir?: string): Promise<string> {
  const file = plistPath(daemonsDir);
  for (const argv of launchdCommands(file).uninstall) await host.mustExec(argv, { tolerate: NOT_LOADED });
  await host.removeFile(file);
  return file;
}

/** `launchctl print system/com.svc.agent`: loaded, and `state = running`. */
export async function launchdStatus(host: ServiceHost, daemonsDir?: string): Promise<ServiceStatus> {
  const file = plistPath(daemonsDir);
  const res = await host.exec(["launchctl", "print", TARGET]);
  const state = /^\s*state = (\S+)/m.exec(res.stdout)?.[1];
  return {
    manager: "launchd",
    name: LAUNCHD_LABEL,
    file,
    installed: host.exists(file) || res.code === 0,
    running: res.code === 0 && state === "running",
    detail: res.code === 127 ? "launchctl not found" : res.code === 0 ? `loaded state=${state ?? "unknown"}` : "not loaded",
  };
}
