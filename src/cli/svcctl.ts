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
 */
import { realpathSync } from "node:fs";
import { access, constants } from "node:fs/promises";
import { hostname as osHostname } from "node:os";
import { resolve as resolvePath } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError, Option } from "commander";
import {
  agentProfileSchema,
  describeIssues,
  ensureProfileDir,
  ProfileError,
  profilePath,
  readProfile,
  resolveProfileDir,
  writeProfile,
  type AgentProfile,
} from "../agent/profile.js";
import { CLIENT_VERSION } from "../agent/version.js";
import {
  agentCommand,
  assertServicePrivileges,
  createServiceHost,
  hasServicePrivileges,
  installService,
  ServiceError,
  serviceStatus,
  uninstallService,
  windowsProfileAclCommand,
  type AgentLauncher,
  type ServiceStatus,
  type ServiceTarget,
} from "./service/index.js";

/** The exit codes above. */
export const EXIT = { OK: 0, USAGE: 1, REFUSED: 2, IO: 3, PRIVILEGES: 4 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** How long one bind request may take before it counts as a network failure. */
export const BIND_TIMEOUT_MS = 30_000;

/** A failure with its exit code and a stable code (the server's, or one of svcctl's own). */
export class CliError extends Error {
  readonly exitCode: ExitCode;
  readonly code: string;

  constructor(exitCode: ExitCode, code: string, message: string, opts: { cause?: unknown } = {}) {
    super(message, opts);
    this.name = "CliError";
    this.exitCode = exitCode;
    this.code = code;
  }
}

/** The agent runtime's entry (`src/agent/agent.ts`). */
export type RunAgent = (opts: {
  profile: AgentProfile;
  profileDir: string;
  log: (line: Record<string, unknown>) => void;
  signal?: AbortSignal;
  /** Where tunnel configs go instead of the system directories (env SVC_AGENT_TUNNEL_DIR). */
  tunnelDir?: string;
}) => Promise<void>;

/** Everything svcctl takes from the process, injectable for tests. */
export interface CliDeps {
  env: Record<string, string | undefined>;
  platform: NodeJS.Platform;
  hostname(): string;
  fetch: typeof fetch;
  stdout(text: string): void;
  stderr(text: string): void;
  service: ServiceTarget;
  launcher: AgentLauncher;
  loadAgent(): Promise<RunAgent>;
  /** Calls `onSignal` at SIGINT/SIGTERM; returns the unsubscribe. */
  onShutdownSignal(onSignal: () => void): () => void;
  now(): Date;
}

interface Globals {
  profileDir?: string;
  json?: boolean;
}

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

function toCliError(err: unknown): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof ServiceError) {
    if (err.reason === "privileges") return new CliError(EXIT.PRIVILEGES, "NEEDS_PRIVILEGES", err.message, { cause: err });
    return new CliError(EXIT.IO, err.reason === "unsupported" ? "UNSUPPORTED_PLATFORM" : "SERVICE_COMMAND_FAILED", err.message, { cause: err });
  }
  if (err instanceof ProfileError) {
    if (err.errno === "EACCES" || err.errno === "EPERM") {
      return new CliError(EXIT.PRIVILEGES, "NEEDS_PRIVILEGES", `${err.message} (the profile is readable by root only)`, { cause: err });
    }
    return new CliError(EXIT.IO, err.kind === "missing" ? "PROFILE_MISSING" : err.kind === "invalid" ? "PROFILE_INVALID" : "IO", err.message, { cause: err });
  }
  return fsError(err, "unexpected error");
}

/** An fs error as a CliError: permission problems exit 4, the rest 3. */
function fsError(err: unknown, what: string): CliError {
  const code = (err as { code?: unknown } | null)?.code;
  const message = `${what}: ${err instanceof Error ? err.message : String(err)}`;
  if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
    return new CliError(EXIT.PRIVILEGES, "NEEDS_PRIVILEGES", `${message} (run as root/Administrator, or choose another --profile-dir)`, { cause: err });
  }
  return new CliError(EXIT.IO, "IO", message, { cause: err });
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

function profileDirOf(g: Globals, deps: CliDeps): string {
  return resolveProfileDir(g.profileDir, deps.platform, deps.env);
}

function print(deps: CliDeps, g: Globals, json: object, text: string): void {
  deps.stdout(g.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
}

/** The base URL: http(s), no query or fragment, no trailing slash. */
export function parseServerUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(EXIT.USAGE, "USAGE", `--server must be an http(s) URL, got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new CliError(EXIT.USAGE, "USAGE", `--server must be an http(s) URL, got ${JSON.stringify(raw)}`);
  }
  if (url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
    throw new CliError(EXIT.USAGE, "USAGE", "--server must be the service's base URL, without credentials, query or fragment");
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

/** undici's "fetch failed" hides the reason in `cause`; a timeout is a DOMException. */
function describeFetchError(err: unknown): string {
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) return `no answer within ${BIND_TIMEOUT_MS / 1000} s`;
  const cause = (err as { cause?: unknown } | null)?.cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return typeof code === "string" && !cause.message.includes(code) ? `${code} ${cause.message}` : cause.message;
  }
  return err instanceof Error ? err.message : String(err);
}

/** The service's error body `{error: {code, message}}` (DESIGN §3), if that is what `text` is. */
function errorBody(text: string): { code: string; message: string } | undefined {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body.error?.code === "string") {
      return { code: body.error.code, message: typeof body.error.message === "string" ? body.error.message : "" };
    }
  } catch {
    // not JSON (a proxy's HTML page): reported by status below
  }
  return undefined;
}

function isLoopback(url: string): boolean {
  const host = new URL(url).hostname;
  return host === "localhost" || host === "[::1]" || host.startsWith("127.");
}

/**
 * spec §4 rule 11 from the client side. Everything that can fail locally is checked before the
 * one-time token is spent: privileges for the service, a writable profile directory.
 */
async function bind(opts: { server: string; token: string; service: boolean }, g: Globals, deps: CliDeps): Promise<void> {
  const server = parseServerUrl(opts.server);
  const token = opts.token.trim();
  if (token === "") throw new CliError(EXIT.USAGE, "USAGE", "--token must not be empty");
  const dir = profileDirOf(g, deps);

  await checkBindLocally(opts.service, dir, server, deps);
  const profile = await requestProfile(server, token, deps);

  let file: string;
  try {
    file = await writeProfile(dir, profile);
  } catch (err) {
    throw fsError(err, `the token was used but the profile could not be stored in ${dir}; ask for a new bind command`);
  }

  let serviceName: string | null = null;
  if (opts.service) {
    try {
      serviceName = await installService(deps.service, { command: agentCommand(resolvePath(dir), deps.launcher) });
    } catch (err) {
      const e = toCliError(err);
      throw new CliError(e.exitCode, e.code, `bound and stored ${file}, but the service could not be installed: ${e.message}; fix it and run \`svcctl service install\``, { cause: err });
    }
  }

  const p = profile.profile;
  print(
    deps,
    g,
    { config_id: p.config_id, node_id: p.node_id, server_url: p.server_url, profile_path: file, service: { installed: serviceName !== null, name: serviceName } },
    [
      `bound node ${p.node_id} of config ${p.config_id}`,
      `  server:  ${p.server_url}`,
      `  broker:  ${profile.mqtt.host}:${profile.mqtt.port} (${profile.mqtt.tls ? "tls" : "plain"})`,
      `  profile: ${file} (mode 0600)`,
      serviceName !== null
        ? `  service: ${serviceName} installed and started`
        : "  service: not installed (--no-service); run `svcctl agent run`, or `svcctl service install` as root",
    ].join("\n"),
  );
}

/** Everything `bind` checks before the one-time token is spent (privileges, profile directory). */
async function checkBindLocally(service: boolean, dir: string, server: string, deps: CliDeps): Promise<void> {
  if (service) {
    await assertServicePrivileges(deps.service, "bind installs the agent service, which", ", or pass --no-service (the token was not used)");
  }
  try {
    await ensureProfileDir(dir);
    await access(dir, constants.W_OK);
  } catch (err) {
    throw fsError(err, `cannot write the profile directory ${dir} (the token was not used)`);
  }
  if (deps.platform === "win32") {
    try {
      await deps.service.host.mustExec(windowsProfileAclCommand(dir));
    } catch (err) {
      throw new CliError(EXIT.IO, "IO", `cannot restrict access to ${dir} (the token was not used): ${(err as Error).message}`, { cause: err });
    }
  }
  if (new URL(server).protocol === "http:" && !isLoopback(server)) {
    deps.stderr(`svcctl: warning: ${server} is plain http; the bind token and the MQTT password travel unencrypted\n`);
  }
}

/**
 * `POST /api/client/bind` (spec §2.6) with the token. @returns the profile the server answered
 * @throws CliError NETWORK (unreachable), the server's error code or `HTTP_<status>` (refused),
 *   INVALID_ANSWER (not JSON, or not a profile)
 */
async function requestProfile(server: string, token: string, deps: CliDeps): Promise<AgentProfile> {
  const url = `${server}/api/client/bind`;
  let res: Response;
  let text: string;
  try {
    res = await deps.fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ bind_token: token, server_url: server, client_version: CLIENT_VERSION, platform: deps.platform, hostname: deps.hostname() }),
      signal: AbortSignal.timeout(BIND_TIMEOUT_MS),
    });
    text = await res.text();
  } catch (err) {
    throw new CliError(EXIT.IO, "NETWORK", `cannot reach ${url}: ${describeFetchError(err)}`, { cause: err });
  }
  if (!res.ok) {
    const body = errorBody(text);
    const exit = res.status >= 500 ? EXIT.IO : EXIT.REFUSED;
    if (body) throw new CliError(exit, body.code, `${server} refused the bind (HTTP ${res.status}): ${body.message}`);
    throw new CliError(exit, `HTTP_${res.status}`, `${url} answered HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ""}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new CliError(EXIT.IO, "INVALID_ANSWER", `${url} answered HTTP ${res.status} with a body that is not JSON`);
  }
  const parsed = agentProfileSchema.safeParse(json);
  if (!parsed.success) throw new CliError(EXIT.IO, "INVALID_ANSWER", `${url} answered a profile svcctl cannot use: ${describeIssues(parsed.error)}`);
  return parsed.data;
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
