import { join } from "node:path";
import type { ServiceHost, ServiceSpec, ServiceStatus } from "./host.js";

/**
 * Linux: the agent as the systemd unit `svc-agent.service`, running as root (spec §5 service
 * identity table). Pure rendering ({@link renderSystemdUnit}, {@link systemdCommands}) is kept
 * apart from the executor, which writes the unit and runs `systemctl` through a runner.
 */

export const SYSTEMD_UNIT_NAME = "svc-agent.service";
export const SYSTEMD_UNIT_DIR = "/etc/systemd/system";

/**
 * One ExecStart word (systemd.syntax(7), systemd.service(5) "Command lines"): `%` becomes `%%`
 * (specifiers) and `$` becomes `$$` (variable expansion); a word with anything outside a safe
 * set is double-quoted with `\` and `"` escaped.
 * @throws Error for control characters (a unit file line cannot carry them)
 */
export function systemdQuote(word: string): string {
  if (word === "") return '""';
  // eslint-disable-next-line no-control-regex -- rejecting control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(word)) throw new Error(`cannot put a control character into a unit file: ${JSON.stringify(word)}`);
  const escaped = word.replace(/%/g, "%%").replace(/\$/g, () => "$$");
  if (/^[A-Za-z0-9_@%$+=:,./-]+$/.test(escaped)) return escaped;
  return `"${escaped.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

export interface SystemdUnitOptions extends ServiceSpec {
  description?: string;
}

/**
 * The unit text. `Restart=always` with no start limit: the agent comes back after any exit, every
 * 5 s, for as long as it takes (a broker outage must not leave the node unmanaged).
 * @param opts.command absolute executable first (systemd requires it), then its arguments
 */
export function renderSystemdUnit(opts: SystemdUnitOptions): string {
  const [exe] = opts.command;
  if (exe === undefined || !exe.startsWith("/")) throw new Error(`ExecStart needs an absolute executable path, got ${JSON.stringify(exe)}`);
  return [
    "# Written by svcctl: the svc mesh agent as a system service (spec §5: svc-agent.service, root).",
    "# Reinstall with `svcctl service install`; remove with `svcctl service uninstall`.",
    "[Unit]",
    `Description=${opts.description ?? "svc mesh agent"}`,
    "Wants=network-online.target",
    "After=network-online.target",
    "StartLimitIntervalSec=0",
    "",
    "[Service]",
    "Type=simple",
    "User=root",
    `ExecStart=${opts.command.map(systemdQuote).join(" ")}`,
    "Restart=always",
    "RestartSec=5",
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  ].join("\n");
}

/**
 * The `systemctl` argv lists, in order. Install restarts rather than `enable --now`: after a
 * re-bind the running agent must pick up the new profile (its old MQTT password was rotated).
 */
export function systemdCommands(): { install: string[][]; uninstall: string[][] } {
  return {
    install: [
      ["systemctl", "daemon-reload"],
      ["systemctl", "enable", SYSTEMD_UNIT_NAME],
      ["systemctl", "restart", SYSTEMD_UNIT_NAME],
    ],
    uninstall: [
      ["systemctl", "disable", "--now", SYSTEMD_UNIT_NAME],
      ["systemctl", "daemon-reload"],
    ],
  };
}

function unitPath(unitDir: string | undefined): string {
  return join(unitDir ?? SYSTEMD_UNIT_DIR, SYSTEMD_UNIT_NAME);
}

/**
 * Writes the unit (0644), reloads systemd, enables and (re)starts the agent.
 * @param unitDir {@link SYSTEMD_UNIT_DIR} unless a test says otherwise
 * @returns the unit path
 */
export async function installSystemd(host: ServiceHost, spec: ServiceSpec, unitDir?: string): Promise<string> {
  const file = unitPath(unitDir);
  await host.writeFile(file, renderSystemdUnit(spec), 0o644);
  for (const argv of systemdCommands().install) await host.mustExec(argv);
  return file;
}

/** Stops and disables the agent (tolerating a unit systemd does not know), removes the unit, reloads. */
export async function uninstallSystemd(host: ServiceHost, unitDir?: string): Promise<string> {
  const file = unitPath(unitDir);
  const [disable, reload] = systemdCommands().uninstall as [string[], string[]];
  await host.mustExec(disable, { tolerate: /not loaded|does not exist|no such file/i });
  await host.removeFile(file);
  await host.mustExec(reload);
  return file;
}

/** `systemctl is-enabled` / `is-active`; installed also when only the unit file exists. */
export async function systemdStatus(host: ServiceHost, unitDir?: string): Promise<ServiceStatus> {
  const file = unitPath(unitDir);
  const enabled = await host.exec(["systemctl", "is-enabled", SYSTEMD_UNIT_NAME]);
  const active = await host.exec(["systemctl", "is-active", SYSTEMD_UNIT_NAME]);
  const enabledWord = enabled.stdout.trim();
  const activeWord = active.stdout.trim();
  return {
    manager: "systemd",
    name: SYSTEMD_UNIT_NAME,
    file,
    installed: host.exists(file) || (enabled.code === 0 && enabledWord !== ""),
    running: active.code === 0 && activeWord === "active",
    detail:
      enabled.code === 127
        ? "systemctl not found"
        : activeWord === "" && active.stderr.trim() !== ""
          ? `systemctl: ${active.stderr.trim().split("\n")[0]}`
          : `enabled=${enabledWord || "unknown"} active=${activeWord || "unknown"}`,
  };
}
