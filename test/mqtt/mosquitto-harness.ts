import assert from "node:assert/strict";
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { promisify } from "node:util";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings, type Settings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import { api } from "../control/agent-harness.js";
import { listenAndLogin } from "../events/sse-harness.js";
import { freeTcpPort } from "../helpers/agent.js";
import { repoRoot } from "../helpers/service.js";
import { findOnPath, requireSystem } from "../helpers/system.js";

/**
 * A real Mosquitto 2.0 (Debian package) for tests (DESIGN §4): started on a free loopback port
 * with a config derived from deploy/mosquitto/mosquitto.conf (the one the deployment uses) and
 * its own dynamic-security.json made by `mosquitto_ctrl dynsec init`. Killed and removed after
 * the test. Every wait is bounded; nothing sleeps for a timer of the code under test.
 */

export const TEMPLATE = join(repoRoot, "deploy", "mosquitto", "mosquitto.conf");
export const ADMIN_USER = "svc-admin";
const execFileP = promisify(execFile);

/** mosquitto, also from /usr/sbin when PATH lacks it (Debian puts it there). */
function binary(name: string, sbin: boolean): string | undefined {
  const onPath = findOnPath(name);
  if (onPath !== undefined) return onPath;
  const fallback = join(sbin ? "/usr/sbin" : "/usr/bin", name);
  return existsSync(fallback) ? fallback : undefined;
}

/** The dynamic security plugin: the template's path, or the same file under another multiarch directory. */
function pluginPath(template: string): string {
  const named = /^plugin (\S+)$/m.exec(template)?.[1];
  if (named !== undefined && existsSync(named)) return named;
  for (const dir of readdirSync("/usr/lib")) {
    const candidate = join("/usr/lib", dir, "mosquitto_dynamic_security.so");
    if (existsSync(candidate)) return candidate;
  }
  return named ?? "mosquitto_dynamic_security.so";
}

/**
 * The test's config: the deployment template with the listener on `127.0.0.1:{port}`, the state
 * file and the persistence file in `dir`, and `user` set to whoever runs the test (as root mosquitto would otherwise drop
 * to user `mosquitto`, who cannot write a root-owned temp directory; see docs/history/decisions-2026.md "deploy/mosquitto/mosquitto.conf").
 */
export function deriveConfig(template: string, opts: { port: number; dir: string; user: string; includeDir?: string }): string {
  const lines = template.split("\n").map((line) => {
    if (/^listener\s/.test(line)) return `listener ${opts.port} 127.0.0.1`;
    // The deployment's extra listeners: the test's own directory, or none.
    if (/^include_dir\s/.test(line)) return opts.includeDir === undefined ? "" : `include_dir ${opts.includeDir}`;
    if (/^plugin_opt_config_file\s/.test(line)) return `plugin_opt_config_file ${join(opts.dir, "dynamic-security.json")}`;
    if (/^persistence_location\s/.test(line)) return `persistence_location ${opts.dir}/`;
    if (/^plugin\s/.test(line)) return `plugin ${pluginPath(template)}`;
    if (/^user\s/.test(line)) return "";
    return line;
  });
  for (const directive of ["listener", "plugin_opt_config_file", "retain_available", "max_queued_messages", "allow_anonymous", "persistence_location"]) {
    assert.ok(lines.some((l) => l.startsWith(`${directive} `)), `the template sets ${directive}`);
  }
  return `${lines.join("\n")}\nuser ${opts.user}\n`;
}

/** The deployment's TLS listener (deploy/mosquitto/conf.d/svc-tls.conf). */
export const TLS_TEMPLATE = join(repoRoot, "deploy", "mosquitto", "conf.d", "svc-tls.conf");

/**
 * The test's TLS listener: the deployment's fragment with the listener on `127.0.0.1:{port}` and
 * the certificate files taken from `certDir` (server.pem, server.key, ca.pem: the names the
 * fragment uses).
 */
export function deriveTlsConfig(fragment: string, opts: { port: number; certDir: string }): string {
  const lines = fragment.split("\n").map((line) => {
    if (/^listener\s/.test(line)) return `listener ${opts.port} 127.0.0.1`;
    const file = /^(certfile|keyfile|cafile)\s+\S*\/([^/\s]+)$/.exec(line);
    return file === null ? line : `${file[1]} ${join(opts.certDir, file[2] ?? "")}`;
  });
  for (const directive of ["listener", "max_qos", "certfile", "keyfile"]) {
    assert.ok(lines.some((l) => l.startsWith(`${directive} `)), `the TLS fragment sets ${directive}`);
  }
  return `${lines.join("\n")}\n`;
}

export interface MosquittoBroker {
  port: number;
  /** The TLS listener's port when started with `tls`. */
  tlsPort: number | undefined;
  url: string;
  dir: string;
  adminUser: string;
  adminPassword: string;
  running(): boolean;
  /** Starts mosquitto (again, with the same state file) and resolves once it listens. */
  start(): Promise<void>;
  /** Ends it (SIGKILL by default: a crash) and resolves once it exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Everything mosquitto logged. */
  output(): string;
}

/**
 * Prepares a Mosquitto with dynamic security on a free port; `start: false` leaves it stopped
 * (a broker that is down at first). Returns undefined when the test was skipped (mosquitto
 * missing and SVC_TEST_REQUIRE_SYSTEM is not "1").
 */
export async function mosquitto(t: TestContext, opts: { start?: boolean; tls?: { certDir: string } } = {}): Promise<MosquittoBroker | undefined> {
  const bin = binary("mosquitto", true);
  const ctrl = binary("mosquitto_ctrl", false);
  if (bin === undefined || ctrl === undefined) {
    if (!requireSystem(t, { binaries: ["mosquitto", "mosquitto_ctrl"] })) return undefined;
    throw new Error("unreachable: requireSystem found what binary() did not");
  }
  const dir = mkdtempSync(join(tmpdir(), "svc-mosquitto-"));
  const port = await freeTcpPort("127.0.0.1");
  const adminPassword = randomBytes(18).toString("base64url");
  await execFileP(ctrl, ["dynsec", "init", join(dir, "dynamic-security.json"), ADMIN_USER, adminPassword]);
  const conf = join(dir, "mosquitto.conf");
  let tlsPort: number | undefined;
  let includeDir: string | undefined;
  if (opts.tls !== undefined) {
    tlsPort = await freeTcpPort("127.0.0.1");
    includeDir = join(dir, "conf.d");
    mkdirSync(includeDir);
    writeFileSync(join(includeDir, "svc-tls.conf"), deriveTlsConfig(readFileSync(TLS_TEMPLATE, "utf8"), { port: tlsPort, certDir: opts.tls.certDir }));
  }
  writeFileSync(conf, deriveConfig(readFileSync(TEMPLATE, "utf8"), { port, dir, user: userInfo().username, ...(includeDir === undefined ? {} : { includeDir }) }));
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let out = "";
  const m: MosquittoBroker = {
    port,
    tlsPort,
    url: `mqtt://127.0.0.1:${port}`,
    dir,
    adminUser: ADMIN_USER,
    adminPassword,
    running: () => child !== undefined && child.exitCode === null && child.signalCode === null,
    output: () => out,
    async start() {
      assert.equal(m.running(), false, "mosquitto already runs");
      const proc = spawn(bin, ["-c", conf], { stdio: ["ignore", "pipe", "pipe"] });
      child = proc;
      exited = new Promise((resolve) => proc.once("exit", () => resolve()));
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`mosquitto did not start within 10 s:\n${out}`)), 10_000);
        const onData = (chunk: Buffer) => {
          out += chunk.toString("utf8");
          if (/mosquitto version \S+ running/.test(out.slice(-2000))) {
            clearTimeout(timer);
            resolve();
          }
        };
        proc.stdout?.on("data", onData);
        proc.stderr?.on("data", onData);
        proc.once("exit", (code) => {
          clearTimeout(timer);
          reject(new Error(`mosquitto exited with ${code}:\n${out}`));
        });
      });
    },
    async stop(signal = "SIGKILL") {
      if (!m.running()) return;
      child?.kill(signal);
      await exited;
    },
  };
  t.after(async () => {
    await m.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  if (opts.start !== false) await m.start();
  return m;
}

/** Waits for a real asynchronous outcome (a reconnection, a reconciliation); bounded. */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const ADMIN_PASSWORD = "correct horse battery staple";

/** The real service (REST on 127.0.0.1:0, SQLite in a temp dir) using `m` as its broker. */
export interface Service {
  server: AppContext;
  baseUrl: string;
  token: string;
  dataDir: string;
  close(): Promise<void>;
  api(method: string, path: string, body?: unknown, auth?: boolean): Promise<{ status: number; json: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any -- bodies are checked field by field
}

/** Settings of a service whose broker is `m` (fast reconnects for tests). */
export function mosquittoSettings(m: Pick<MosquittoBroker, "url" | "port" | "adminUser" | "adminPassword">, dataDir: string, extra: Partial<Settings> = {}): Settings {
  return testSettings({
    dataDir,
    adminPassword: ADMIN_PASSWORD,
    mqttBroker: "mosquitto",
    mqttUrl: m.url,
    mosquittoAdminUsername: m.adminUser,
    mosquittoAdminPassword: m.adminPassword,
    mqttPublicHost: "127.0.0.1",
    mqttPublicPort: m.port,
    mqttReconnectMinMs: 50,
    mqttReconnectMaxMs: 400,
    ...extra,
  });
}

export async function startService(t: TestContext, settings: Settings): Promise<Service> {
  const server = await createServer(settings, createLogger("silent"), { clock: new ManualClock() });
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= server.close());
  t.after(async () => {
    await close();
    rmSync(settings.dataDir, { recursive: true, force: true });
  });
  const { baseUrl, token } = await listenAndLogin(server, ADMIN_PASSWORD);
  const s: Service = {
    server,
    baseUrl,
    token,
    dataDir: settings.dataDir,
    close,
    api(method, path, body, auth = true) {
      return api(s, method, path, body, auth);
    },
  };
  return s;
}

export function tempDataDir(): string {
  return mkdtempSync(join(tmpdir(), "svc-mosq-svc-"));
}

/** A dynamic node in a new config. */
export async function dynamicNode(s: Service, name = "edge"): Promise<{ configId: string; nodeId: string }> {
  const config = await s.api("POST", "/api/v1/configs", { name: `c-${randomBytes(3).toString("hex")}`, tunnel_protocol: "wireguard", network_cidr: "10.77.0.0/24" });
  assert.equal(config.status, 201, JSON.stringify(config.json));
  const node = await s.api("POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name, mode: "dynamic", public_address: "192.0.2.7" });
  assert.equal(node.status, 201, JSON.stringify(node.json));
  return { configId: config.json.config_id, nodeId: node.json.node_id };
}

/** bind-command then bind (spec §4 rules 10-11): the profile. */
export async function bindNode(s: Service, configId: string, nodeId: string) {
  const cmd = await s.api("POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  assert.equal(cmd.status, 200, JSON.stringify(cmd.json));
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  assert.ok(token);
  const res = await s.api("POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.2.3", platform: "linux", hostname: "edge-1" }, false);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json as {
    profile: { config_id: string; node_id: string; server_url: string };
    mqtt: { host: string; port: number; tls: boolean; username: string; password: string; client_id: string };
    topics: Record<string, string>;
  };
}

export async function endpointStatus(s: Service, configId: string, nodeId: string) {
  return (await s.api("GET", `/api/v1/configs/${configId}/nodes/${nodeId}/endpoint-status`)).json;
}
