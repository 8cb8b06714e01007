/**
 * svcctl — the client CLI of the service (spec preamble; DESIGN §2 `src/cli/`).
 *
 *   svcctl bind --server URL --token T [--no-service]   redeem a bind token (spec §4 rule 11),
 *                                                      store the profile, install the service
 *   svcctl agent run                                   run the agent in the foreground
 *   svcctl service install | uninstall | status        the agent as a system service (spec §5)
 *   svcctl status                                      profile and service at a glance
 *
 * Global options: --profile-dir DIR (env SVC_AGENT_DIR; default /etc/svc-agent on Linux,
 * /Library/Application Support/svc-agent on macOS, %ProgramData%\svc-agent on Windows),
 * --json (machine-readable results and errors), --version, --help.
 *
 * Exit codes:
 *   0  ok
 *   1  usage: unknown command or option, missing or malformed argument
 *   2  the server refused: its error body's code and message are printed
 *      (INVALID_BIND_TOKEN, BIND_TOKEN_USED, NODE_NOT_DYNAMIC, MQTT_DISABLED, ...)
 *   3  network or I/O: server unreachable or answering 5xx, profile missing/unreadable/invalid,
 *      a service manager command failed, the agent runtime could not be loaded or failed
 *   4  needs root (Linux, macOS) or an elevated Administrator (Windows)
 *
 * Only this module reads `process.*` (env, argv, platform); everything below takes them as
 * arguments, so tests drive {@link main} in-process with fakes.
 *
 * This module is the program (commands and options, {@link main}) with the commands that read a
 * stored profile (`agent run`, `service`, `status`); `bind` is in bind.ts, the failures and exit
 * codes in cli-error.ts, what commands are given in cli-deps.ts.
 */
import { realpathSync } from "node:fs";
import { hostname as osHostname } from "node:os";
import { resolve as resolvePath } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError, Option } from "commander";
import { ProfileError, profilePath, readProfile, resolveProfileDir, type AgentProfile } from "../agent/profile.js";
import { CLIENT_VERSION } from "../agent/version.js";
import { bind } from "./bind.js";
import { print, profileDirOf, type CliDeps, type Globals, type RunAgent } from "./cli-deps.js";
import { CliError, EXIT, toCliError } from "./cli-error.js";
import {
  agentCommand,
  assertServicePrivileges,
  createServiceHost,
  hasServicePrivileges,
  installService,
  serviceStatus,
  uninstallService,
  type ServiceStatus,
} from "./service/index.js";

export { BIND_TIMEOUT_MS, parseServerUrl } from "./bind.js";
export type { CliDeps, RunAgent } from "./cli-deps.js";
export { CliError, EXIT, type ExitCode } from "./cli-error.js";

const EXIT_CODES_HELP = `
Exit codes:
  0  ok
  1  usage error
  2  the server refused (its error code and message are printed, e.g. INVALID_BIND_TOKEN, BIND_TOKEN_USED)
  3  network or I/O error (server unreachable, profile missing or invalid, service command failed)
  4  needs root (Linux, macOS) or an elevated Administrator (Windows)`;

const HELP_FOOTER = `${EXIT_CODES_HELP}

Examples:
  sudo svcctl bind --server https://mesh.example.com --token <TOKEN>
  svcctl --profile-dir ./agent bind --server http://127.0.0.1:8080 --token <TOKEN> --no-service
  svcctl --json status`;

/**
 * Runs svcctl with `args` (without node and script) and returns the exit code. Never calls
 * `process.exit`; never throws.
 */
export async function main(args: readonly string[], deps: CliDeps): Promise<number> {
  const program = buildProgram(deps);
  const json = args.includes("--json");
  try {
    await program.parseAsync([...args], { from: "user" });
    return EXIT.OK;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    const e = toCliError(err);
    if (json) deps.stderr(`${JSON.stringify({ error: { code: e.code, message: e.message }, exit_code: e.exitCode })}\n`);
    else deps.stderr(`svcctl: ${e.code}: ${e.message}\n`);
    return e.exitCode;
  }
}

/** The commander program; output goes through `deps`, exits become CommanderErrors. */
export function buildProgram(deps: CliDeps): Command {
  const program = new Command("svcctl");
  program
    .description("Client CLI of the svc device-mesh service: bind this host as a dynamic node and run its agent.")
    .exitOverride()
    .configureOutput({ writeOut: (s) => deps.stdout(s), writeErr: (s) => deps.stderr(s) })
    .version(CLIENT_VERSION, "-V, --version", "print the client version (injected at build time)")
    .addOption(
      new Option("--profile-dir <dir>", `profile directory (env SVC_AGENT_DIR; default ${resolveProfileDir(undefined, deps.platform, {})})`),
    )
    .option("--json", "print results and errors as JSON (for scripts)")
    .helpCommand(false)
    .showHelpAfterError("(run with --help for usage)")
    .addHelpText("after", HELP_FOOTER);

  program
    .command("bind")
    .description(
      "redeem a one-time bind token: POST {server}/api/client/bind, store the profile (0600), then install and start the system service",
    )
    .requiredOption("--server <url>", "the service's base URL, as printed in the bind command")
    .requiredOption("--token <token>", "the one-time bind token (valid 5 minutes, usable once)")
    .option("--no-service", "only store the profile; do not install or start the system service")
    .addHelpText("after", EXIT_CODES_HELP)
    .action(async (opts: { server: string; token: string; service: boolean }, cmd: Command) => {
      await bind(opts, cmd.optsWithGlobals<Globals>(), deps);
    });

  const agent = program.command("agent").description("the agent runtime").helpCommand(false);
  agent
    .command("run")
    .description("run the agent in the foreground with the stored profile; logs are JSON lines on stdout (the system service runs this)")
    .addHelpText("after", EXIT_CODES_HELP)
    .action(async (_opts: unknown, cmd: Command) => {
      await agentRun(cmd.optsWithGlobals<Globals>(), deps);
    });

  const service = program
    .command("service")
    .description("the agent as a system service: svc-agent.service (systemd), com.svc.agent (launchd), SvcAgent (Windows)")
    .helpCommand(false);
  service
    .command("install")
    .description("install (or reinstall) the agent service for the stored profile and start it; needs root/Administrator")
    .addHelpText("after", EXIT_CODES_HELP)
    .action(async (_opts: unknown, cmd: Command) => {
      await serviceInstall(cmd.optsWithGlobals<Globals>(), deps);
    });
  service
    .command("uninstall")
    .description("stop and remove the agent service (the profile is kept); needs root/Administrator")
    .addHelpText("after", EXIT_CODES_HELP)
    .action(async (_opts: unknown, cmd: Command) => {
      const g = cmd.optsWithGlobals<Globals>();
      const where = await uninstallService(deps.service);
      print(deps, g, { service: { removed: true, name: where } }, `agent service removed (${where}); the profile is kept`);
    });
  service
    .command("status")
    .description("whether the agent service is installed and running")
    .action(async (_opts: unknown, cmd: Command) => {
      const g = cmd.optsWithGlobals<Globals>();
      const s = await serviceStatus(deps.service);
      print(deps, g, { service: s }, serviceLine(s));
    });

  program
    .command("status")
    .description("the stored profile (config, node, server) and whether the agent service is installed and running")
    .addHelpText("after", EXIT_CODES_HELP)
    .action(async (_opts: unknown, cmd: Command) => {
      await status(cmd.optsWithGlobals<Globals>(), deps);
    });

  return program;
}

async function loadProfile(dir: string): Promise<AgentProfile> {
  try {
    return await readProfile(dir);
  } catch (err) {
    throw toCliError(err);
  }
}

/** Foreground agent: the profile, the runtime from `src/agent/agent.ts`, JSON log lines on stdout. */
async function agentRun(g: Globals, deps: CliDeps): Promise<void> {
  const dir = profileDirOf(g, deps);
  const profile = await loadProfile(dir);
  let runAgent: RunAgent;
  try {
    runAgent = await deps.loadAgent();
  } catch (err) {
    throw new CliError(EXIT.IO, "AGENT_UNAVAILABLE", `cannot load the agent runtime (src/agent/agent.ts): ${(err as Error).message}`, { cause: err });
  }
  const log = (line: object) => deps.stdout(`${JSON.stringify({ time: deps.now().toISOString(), ...line })}\n`);
  const stop = new AbortController();
  const off = deps.onShutdownSignal(() => {
    log({ level: "info", msg: "shutdown signal: stopping the agent" });
    stop.abort();
  });
  log({
    level: "info",
    msg: "agent starting",
    client_version: CLIENT_VERSION,
    config_id: profile.profile.config_id,
    node_id: profile.profile.node_id,
    profile_dir: dir,
  });
  try {
    const tunnelDir = deps.env["SVC_AGENT_TUNNEL_DIR"];
    await runAgent({ profile, profileDir: dir, log, signal: stop.signal, ...(tunnelDir ? { tunnelDir } : {}) });
  } catch (err) {
    log({ level: "error", msg: "agent failed", err: err instanceof Error ? err.message : String(err) });
    throw new CliError(EXIT.IO, "AGENT_FAILED", `the agent stopped with an error: ${(err as Error).message}`, { cause: err });
  } finally {
    off();
  }
  log({ level: "info", msg: "agent stopped" });
}

async function serviceInstall(g: Globals, deps: CliDeps): Promise<void> {
  const dir = profileDirOf(g, deps);
  // before reading a root-only profile gives a worse error
  await assertServicePrivileges(deps.service, "installing the agent service");
  await loadProfile(dir); // a service without a valid profile would only crash-loop
  const where = await installService(deps.service, { command: agentCommand(resolvePath(dir), deps.launcher) });
  print(deps, g, { service: { installed: true, name: where } }, `agent service installed and started (${where})`);
}

function serviceLine(s: ServiceStatus): string {
  if (s.manager === "none") return `service: ${s.detail}`;
  return `service: ${s.name} ${s.installed ? "installed" : "not installed"}, ${s.running ? "running" : "not running"} (${s.manager}: ${s.detail})`;
}

/** Profile and service; a missing profile is a state (not bound), not an error. */
async function status(g: Globals, deps: CliDeps): Promise<void> {
  const dir = profileDirOf(g, deps);
  const file = profilePath(dir);
  let profile: AgentProfile | undefined;
  let problem: CliError | undefined;
  try {
    profile = await readProfile(dir);
  } catch (err) {
    if (!(err instanceof ProfileError && err.kind === "missing")) problem = toCliError(err);
  }
  const service = await serviceStatus(deps.service);
  const p = profile?.profile;
  const json = {
    client_version: CLIENT_VERSION,
    profile_path: file,
    bound: profile !== undefined,
    profile: profile && p ? { config_id: p.config_id, node_id: p.node_id, server_url: p.server_url, mqtt: { host: profile.mqtt.host, port: profile.mqtt.port, tls: profile.mqtt.tls } } : null,
    profile_error: problem ? { code: problem.code, message: problem.message } : null,
    service,
  };
  const lines = [`svcctl ${CLIENT_VERSION}`, `profile: ${file}`];
  if (profile && p) {
    lines.push(
      `  config:  ${p.config_id}`,
      `  node:    ${p.node_id}`,
      `  server:  ${p.server_url}`,
      `  broker:  ${profile.mqtt.host}:${profile.mqtt.port} (${profile.mqtt.tls ? "tls" : "plain"})`,
    );
  } else if (problem) lines.push(`  unusable: ${problem.message}`);
  else lines.push("  not bound: run `svcctl bind --server URL --token T`");
  lines.push(serviceLine(service));
  print(deps, g, json, lines.join("\n"));
  if (problem) throw new CliError(problem.exitCode, problem.code, problem.message);
}

/** The agent runtime, loaded only by `agent run` (bind and status work without it). */
async function loadAgentRuntime(): Promise<RunAgent> {
  const mod: unknown = await import("../agent/agent.js");
  const runAgent = (mod as { runAgent?: unknown }).runAgent;
  if (typeof runAgent !== "function") throw new Error("src/agent/agent.ts does not export runAgent");
  return runAgent as RunAgent;
}

/** The real process: env, platform, stdio, signals, the system's service manager. */
export function processDeps(): CliDeps {
  const platform = process.platform;
  const host = createServiceHost();
  return {
    env: process.env,
    platform,
    hostname: osHostname,
    fetch: globalThis.fetch,
    stdout: (s) => void process.stdout.write(s),
    stderr: (s) => void process.stderr.write(s),
    service: { platform, host, isPrivileged: () => hasServicePrivileges(platform, host) },
    launcher: { execPath: process.execPath, execArgv: process.execArgv, entry: fileURLToPath(import.meta.url) },
    loadAgent: loadAgentRuntime,
    onShutdownSignal(onSignal) {
      const handler = () => onSignal();
      process.once("SIGINT", handler);
      process.once("SIGTERM", handler);
      return () => {
        process.off("SIGINT", handler);
        process.off("SIGTERM", handler);
      };
    },
    now: () => new Date(),
  };
}

/** True when this module is the program node was started with (not when a test imports it). */
function isEntry(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntry()) process.exitCode = await main(process.argv.slice(2), processDeps());
