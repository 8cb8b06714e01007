import { access, constants } from "node:fs/promises";
import { resolve as resolvePath } from "node:path";
import { agentProfileSchema, describeIssues, ensureProfileDir, writeProfile, type AgentProfile } from "../agent/profile.js";
import { CLIENT_VERSION } from "../agent/version.js";
import { print, profileDirOf, type CliDeps, type Globals } from "./cli-deps.js";
import { CliError, EXIT, fsError, toCliError } from "./cli-error.js";
import { agentCommand, assertServicePrivileges, installService, windowsProfileAclCommand } from "./service/index.js";

/**
 * `svcctl bind`: redeems a one-time bind token at the server (spec §2.6, §4 rule 11), stores the
 * profile it answers, and installs the agent service. Whatever can fail locally is checked
 * before the token is spent.
 */

/** How long one bind request may take before it counts as a network failure. */
export const BIND_TIMEOUT_MS = 30_000;

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
export async function bind(opts: { server: string; token: string; service: boolean }, g: Globals, deps: CliDeps): Promise<void> {
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
