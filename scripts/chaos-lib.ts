/**
 * The chaos run, shared by `npm run chaos` (scripts/chaos.ts, the full run)
 * and its short version test/chaos/chaos-short.test.ts.
 *
 * Real processes and real wires only: an external Mosquitto 2 with dynamic security (the
 * deployment's mosquitto.conf), the backend as a child process (scripts/chaos-backend.ts, i.e.
 * src/main.ts's start) on one persistent data directory, and N stand-in agents in this process
 * (MQTT.js clients speaking the spec §6.2–6.3 protocol with their bind profiles). Commands go in
 * over REST (`POST .../control`, DESIGN §5) while the run SIGKILLs and restarts Mosquitto and
 * the backend and drops agent connections at random. Afterwards it counts, Jepsen-style, from the
 * database the backend wrote (spec §2.8, §3.4, §6.4 rules 1–2):
 *
 * - sent: commands the REST API answered 202 (with a request_id);
 * - applied / failed / timed_out: their one terminal status;
 * - lost: sent, but no control log row carries the request_id;
 * - duplicated: more than one command row for one request_id;
 * - stuck: a row still `pending` or `accepted` after the command timeout has passed;
 * - phantom: `applied` although the agent never sent an `applied` ACK for it;
 * - indeterminate: the request died with the backend, so the client cannot know (Jepsen's
 *   "info"); rows of such requests ("orphans") are checked for a terminal status too.
 *
 * It then checks that every node's presence converges to the truth (the stand-in is up → online;
 * ended → offline or dropped) within online TTL + detect timeout, that `PRAGMA integrity_check`
 * answers `ok`, and that Mosquitto's dynamic-security clients equal the database's bound nodes.
 * Time is real time here (faults across processes); every wait is bounded.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import SQLite from "better-sqlite3";
import mqtt, { type MqttClient } from "mqtt";
import { deriveConfig, TEMPLATE } from "../test/mqtt/mosquitto-harness.js";
import { freeTcpPort } from "../test/helpers/agent.js";
import { repoRoot } from "../test/helpers/service.js";
import { mulberry32 } from "../test/security/seed.js";
import { findOnPath } from "../test/helpers/system.js";

const execFileP = promisify(execFile);

export interface ChaosOptions {
  /** Seed of every random choice (nodes, actions, failures, fault order, downtimes, drops). */
  seed: number;
  /** Stand-in agents (one dynamic node each); ≤ 18 (bind is rate limited to 20 a minute). */
  agents: number;
  /** Commands to get answered 202 at least. */
  commands: number;
  /** SIGKILL + restart of Mosquitto. */
  brokerRestarts: number;
  /** SIGKILL + restart of the backend. */
  backendKills: number;
  /** reset-client + bind of a random node while commands flow (spec §4 rules 11–12); its stand-in switches to the new credentials. */
  rebinds: number;
  /** REST requests in flight at once. */
  concurrency: number;
  /** SVC_COMMAND_TIMEOUT_S. */
  commandTimeoutS: number;
  /** SVC_DETECT_TIMEOUT_S. */
  detectTimeoutS: number;
  /** The backend's online TTL (CHAOS_ONLINE_TTL_MS), ms. */
  onlineTtlMs: number;
  /** Stand-in heartbeat interval, ms (< online TTL, spec §6.4 rule 7). */
  heartbeatMs: number;
  /** Mean ms between random agent connection drops. */
  dropEveryMs: number;
  /** Share of commands the stand-in answers `failed`. */
  failRate: number;
  /** Progress lines (the script prints them; the test keeps them for a failure message). */
  log(line: string): void;
}

export interface ChaosReport {
  seed: number;
  agents: number;
  durationMs: number;
  sent: number;
  applied: number;
  failed: number;
  /** Of `failed`: the publish to the broker was refused (broker down), so the agent never saw it. */
  failedPublish: number;
  timedOut: number;
  lost: number;
  duplicated: number;
  stuck: number;
  phantom: number;
  /** Requests whose answer died with the backend. */
  indeterminate: number;
  /** Command rows whose request_id no 202 answer carried (from indeterminate requests). */
  orphans: number;
  orphansStuck: number;
  /** Config pushes the backend sent by itself (after a bind, spec §3.5), answered `applied` by the stand-in; checked for a terminal status too. */
  automaticPushes: number;
  /** Requests refused before the backend took them (connection refused), retried. */
  refused: number;
  /** Non-202 answers by status. */
  rejected: Record<string, number>;
  /** Commands delivered to a stand-in more than once (QoS 1 redelivery), executed once. */
  redelivered: number;
  /** Commands the agent answered `applied` but the database holds as timed_out / failed (ACK lost in a fault). */
  appliedButNotRecorded: number;
  /** Recorded failed because the publish was refused, yet the agent received (and answered) it. */
  failedPublishButDelivered: number;
  brokerRestarts: number;
  backendKills: number;
  rebinds: number;
  drops: number;
  /** From the end of the last fault until every node's presence matched the truth, ms. */
  convergenceMs: number | null;
  convergenceBoundMs: number;
  /** Nodes (config/node: presence vs truth) not converged within the bound plus slack. */
  notConverged: string[];
  integrity: string;
  brokerAccounts: number;
  databaseAccounts: number;
  accountsEqual: boolean;
  accountsDiff: string[];
}

// ---- seeded randomness ----------------------------------------------------------------------

function pick<T>(rnd: () => number, items: readonly T[]): T {
  return items[Math.floor(rnd() * items.length)] as T;
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(everyMs);
  }
}

// ---- Mosquitto ------------------------------------------------------------------------------

function sysBinary(name: string, sbin: boolean): string {
  const found = findOnPath(name) ?? join(sbin ? "/usr/sbin" : "/usr/bin", name);
  if (!existsSync(found)) throw new Error(`${name} not found (install mosquitto and mosquitto-clients)`);
  return found;
}

/** Whether mosquitto and mosquitto_ctrl are installed (the test skips or fails without them). */
export function mosquittoInstalled(): boolean {
  try {
    sysBinary("mosquitto", true);
    sysBinary("mosquitto_ctrl", false);
    return true;
  } catch {
    return false;
  }
}

class Broker {
  child: ChildProcess | undefined;
  out = "";
  readonly adminUser = "svc-admin";
  readonly adminPassword = randomBytes(18).toString("base64url");
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  static async create(dir: string): Promise<Broker> {
    const b = new Broker(dir, await freeTcpPort("127.0.0.1"));
    await execFileP(sysBinary("mosquitto_ctrl", false), ["dynsec", "init", join(dir, "dynamic-security.json"), b.adminUser, b.adminPassword]);
    let template = readFileSync(TEMPLATE, "utf8");
    const plugin = /^plugin (\S+)$/m.exec(template)?.[1];
    if (plugin !== undefined && !existsSync(plugin)) {
      const found = readdirSync("/usr/lib").map((d) => join("/usr/lib", d, "mosquitto_dynamic_security.so")).find((p) => existsSync(p));
      if (found !== undefined) template = template.replace(plugin, found);
    }
    writeFileSync(join(dir, "mosquitto.conf"), deriveConfig(template, { port: b.port, dir, user: userInfo().username }));
    return b;
  }

  get url(): string {
    return `mqtt://127.0.0.1:${this.port}`;
  }

  running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async start(): Promise<void> {
    const proc = spawn(sysBinary("mosquitto", true), ["-c", join(this.dir, "mosquitto.conf")], { stdio: ["ignore", "pipe", "pipe"] });
    this.child = proc;
    const mark = this.out.length;
    const onData = (chunk: Buffer) => {
      this.out = (this.out + chunk.toString("utf8")).slice(-200_000);
    };
    proc.stdout.on("data", onData);
    proc.stderr.on("data", onData);
    await until("mosquitto to listen", () => (proc.exitCode !== null ? Promise.reject(new Error(`mosquitto exited:\n${this.out}`)) : /running/.test(this.out.slice(Math.max(0, mark - 10)))), 10_000, 20);
  }

  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const c = this.child;
    if (c === undefined || !this.running()) return;
    const exited = new Promise((r) => c.once("exit", r));
    c.kill(signal);
    await exited;
  }

  /** Usernames of the dynamic-security clients, as the live broker lists them. */
  async clients(): Promise<string[]> {
    const { stdout } = await execFileP(sysBinary("mosquitto_ctrl", false), ["-h", "127.0.0.1", "-p", String(this.port), "-u", this.adminUser, "-P", this.adminPassword, "dynsec", "listClients"]);
    return stdout.split("\n").map((l) => l.trim()).filter((l) => l !== "");
  }
}

// ---- the backend ----------------------------------------------------------------------------

class Backend {
  child: ChildProcess | undefined;
  out = "";
  readonly adminPassword = randomBytes(18).toString("base64url");
  constructor(
    readonly dataDir: string,
    readonly port: number,
    readonly env: Record<string, string>,
  ) {}

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get dbFile(): string {
    return join(this.dataDir, "svc.db");
  }

  /** Starts scripts/chaos-backend.ts and resolves on its "listening" line (60 s bound). */
  async start(): Promise<void> {
    const proc = spawn(process.execPath, ["--import", "tsx", join(repoRoot, "scripts", "chaos-backend.ts")], {
      cwd: repoRoot,
      env: { ...process.env, ...this.env, SVC_DATA_DIR: this.dataDir, SVC_ADMIN_PASSWORD: this.adminPassword, SVC_HTTP_HOST: "127.0.0.1", SVC_HTTP_PORT: String(this.port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = proc;
    const mark = this.out.length;
    const onData = (chunk: Buffer) => {
      this.out = (this.out + chunk.toString("utf8")).slice(-200_000);
    };
    proc.stdout.on("data", onData);
    proc.stderr.on("data", onData);
    await until(
      "the backend to listen",
      () => (proc.exitCode !== null ? Promise.reject(new Error(`backend exited ${proc.exitCode}:\n${this.out.slice(-4000)}`)) : this.out.slice(Math.max(0, mark - 10)).includes('"msg":"listening"')),
      60_000,
      25,
    ).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n${this.out.slice(-4000)}`);
    });
  }

  running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Ends the backend with `signal` (SIGKILL: a crash; SIGTERM: the ordered shutdown, 15 s bound). */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const c = this.child;
    if (c === undefined || !this.running()) return;
    const exited = new Promise((r) => c.once("exit", r));
    c.kill(signal);
    const t = setTimeout(() => c.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(t);
  }
}

// ---- REST -----------------------------------------------------------------------------------

type Answer = { status: number; json: any }; // eslint-disable-line @typescript-eslint/no-explicit-any -- REST bodies read field by field

async function rest(b: Backend, token: string | null, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${b.baseUrl}${path}`, {
    method,
    headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return { status: res.status, json: text === "" ? undefined : JSON.parse(text) };
}

/** True when fetch failed before the server could have taken the request (nothing listening). */
function refusedBeforeSent(err: unknown): boolean {
  const cause = (err as { cause?: { code?: string } }).cause;
  return cause?.code === "ECONNREFUSED";
}

interface Profile {
  profile: { config_id: string; node_id: string };
  mqtt: { username: string; password: string; client_id: string };
  topics: Record<string, string>;
}

// ---- stand-in agents ------------------------------------------------------------------------

class StandIn {
  client: MqttClient | null = null;
  /** The truth: the agent process runs (and so keeps reconnecting and heartbeating). */
  up = false;
  /** request_id → final ACK status this agent sent (executed once; redeliveries re-ACK). */
  readonly done = new Map<string, "applied" | "failed">();
  redelivered = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  readonly #boot = randomBytes(6).toString("hex");

  constructor(
    public p: Profile,
    readonly brokerUrl: string,
    readonly rnd: () => number,
    readonly opts: Pick<ChaosOptions, "heartbeatMs" | "failRate">,
  ) {}

  get key(): string {
    return `${this.p.profile.config_id}/${this.p.profile.node_id}`;
  }

  #envelope(type: string, payload: Record<string, unknown>, requestId = "", session = ""): string {
    return JSON.stringify({ type, request_id: requestId, config_id: this.p.profile.config_id, node_id: this.p.profile.node_id, boot_id: session === "" ? "" : this.#boot, session_id: session, sent_at: new Date().toISOString(), payload });
  }

  start(): void {
    this.up = true;
    const session = randomBytes(6).toString("hex");
    const client = mqtt.connect(this.brokerUrl, {
      protocolVersion: 4,
      clean: true,
      clientId: this.p.mqtt.client_id,
      username: this.p.mqtt.username,
      password: this.p.mqtt.password,
      reconnectPeriod: 200,
      connectTimeout: 3000,
      keepalive: 5,
      will: { topic: this.p.topics["event"] ?? "", payload: Buffer.from(this.#envelope("event", { level: "info", event: "offline", message: "connection lost" })), qos: 1, retain: false },
    });
    this.client = client;
    client.on("error", () => undefined); // not authorized while the backend reconciles, refused while the broker is down: it retries
    client.on("connect", () => {
      const t = this.p.topics;
      client.subscribe([t["config_push"] ?? "", t["control"] ?? "", t["detect"] ?? "", t["info"] ?? ""], { qos: 1 }, () => {
        client.publish(t["event"] ?? "", this.#envelope("event", { level: "info", event: "mqtt_connected", message: "connected" }, "", session), { qos: 1 });
      });
    });
    client.on("message", (topic, buf) => this.#onMessage(client, topic, buf, session));
    this.#heartbeat = setInterval(() => {
      if (client.connected) client.publish(this.p.topics["heartbeat"] ?? "", this.#envelope("heartbeat", { client_online: true, wg_online: true }, "", session), { qos: 1 });
    }, this.opts.heartbeatMs);
  }

  #onMessage(client: MqttClient, topic: string, buf: Buffer, session: string): void {
    let env: { request_id?: string; payload?: { action?: string; tunnel_protocol?: string } };
    try {
      env = JSON.parse(buf.toString("utf8"));
    } catch {
      return;
    }
    const rid = env.request_id ?? "";
    const t = this.p.topics;
    const ack = (ackTopic: string, payload: Record<string, unknown>) => client.publish(ackTopic, this.#envelope("ack", payload, rid, session), { qos: 1 });
    if (topic === t["detect"]) {
      ack(t["detect_ack"] ?? "", { status: "applied", message: "", action: "detect", client_online: true, wg_online: true, platform: "linux", client_version: "chaos" });
      return;
    }
    if (topic === t["config_push"]) {
      const push = env.payload as { config_version?: number; config_sha256?: string } | undefined;
      ack(t["config_push_ack"] ?? "", { status: "applied", message: "", action: "push_config", config_version: push?.config_version, config_sha256: push?.config_sha256 });
      return;
    }
    if (topic !== t["control"] && topic !== t["info"]) return;
    const action = env.payload?.action ?? "";
    const ackTopic = (topic === t["control"] ? t["control_ack"] : t["info_ack"]) ?? "";
    const before = this.done.get(rid);
    if (before !== undefined) {
      this.redelivered += 1;
      ack(ackTopic, { status: before, message: before === "failed" ? "chaos: refused" : "", action });
      return;
    }
    const status = this.rnd() < this.opts.failRate ? "failed" : "applied";
    this.done.set(rid, status);
    ack(ackTopic, { status: "accepted", message: "", action });
    if (action === "wg_show") {
      client.publish(t["event"] ?? "", this.#envelope("event", { level: "info", event: "command_output", message: "", request_id: rid, action, stream: "stdout", output: "interface: wg0\n" }, rid, session), { qos: 1 });
    }
    ack(ackTopic, { status, message: status === "failed" ? "chaos: refused" : "", action });
  }

  /** An abrupt connection loss (the broker sends the will); MQTT.js reconnects by itself. */
  drop(): void {
    this.client?.stream.destroy();
  }

  /** The agent process ends: abruptly (will → offline) or with DISCONNECT (no will → dropped after the TTL). */
  async stop(abrupt: boolean): Promise<void> {
    this.up = false;
    clearInterval(this.#heartbeat);
    const c = this.client;
    this.client = null;
    if (c === null) return;
    c.options.reconnectPeriod = 0;
    if (abrupt) {
      c.stream.destroy();
      await c.endAsync(true);
    } else {
      await Promise.race([c.endAsync(false), delay(3000)]);
      await c.endAsync(true);
    }
  }
}

// ---- the run --------------------------------------------------------------------------------

interface SentCommand {
  requestId: string;
  node: string;
}

interface Run {
  o: ChaosOptions;
  rnd: () => number;
  broker: Broker;
  backend: Backend;
  token: string;
  agents: StandIn[];
  sent: Map<string, SentCommand>;
  indeterminate: number;
  refused: number;
  rejected: Record<string, number>;
  brokerRestarts: number;
  backendKills: number;
  rebinds: number;
  drops: number;
  faultsDone: boolean;
}

/** Login, one config, `agents` dynamic nodes, each bound (spec §4 rules 10–11). */
async function setupNodes(run: Run): Promise<Profile[]> {
  const { backend } = run;
  const login = await rest(backend, null, "POST", "/api/v1/auth/login", { password: backend.adminPassword });
  if (login.status !== 200) throw new Error(`login answered ${login.status}`);
  run.token = login.json.access_token;
  const config = await rest(backend, run.token, "POST", "/api/v1/configs", { name: "chaos", tunnel_protocol: "wireguard", network_cidr: "10.99.0.0/24" });
  if (config.status !== 201) throw new Error(`create config answered ${config.status}: ${JSON.stringify(config.json)}`);
  const profiles: Profile[] = [];
  for (let i = 0; i < run.o.agents; i++) {
    const node = await rest(backend, run.token, "POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: `agent-${i}`, mode: "dynamic", public_address: `192.0.2.${i + 1}`, auto_pair: false });
    if (node.status !== 201) throw new Error(`create node answered ${node.status}: ${JSON.stringify(node.json)}`);
    const cmd = await rest(backend, run.token, "POST", `/api/v1/configs/${config.json.config_id}/nodes/${node.json.node_id}/bind-command`);
    const bindToken = /--token (\S+)$/.exec(String(cmd.json?.command))?.[1];
    const bound = await rest(backend, null, "POST", "/api/client/bind", { bind_token: bindToken, server_url: backend.baseUrl, client_version: "chaos", platform: "linux", hostname: `chaos-${i}` });
    if (bound.status !== 200) throw new Error(`bind answered ${bound.status}: ${JSON.stringify(bound.json)}`);
    profiles.push(bound.json as Profile);
  }
  return profiles;
}

/** One REST worker: sends commands until `stop()` says enough. */
async function sender(run: Run, stop: () => boolean): Promise<void> {
  const actions = ["start", "stop", "start", "stop", "wg_show"] as const;
  while (!stop()) {
    const agent = pick(run.rnd, run.agents);
    const action = pick(run.rnd, actions);
    try {
      const a = await rest(run.backend, run.token, "POST", `/api/v1/configs/${agent.p.profile.config_id}/nodes/${agent.p.profile.node_id}/control`, { action });
      if (a.status === 202 && typeof a.json?.request_id === "string") {
        if (run.sent.has(a.json.request_id)) throw new Error(`request_id ${a.json.request_id} answered twice`);
        run.sent.set(a.json.request_id, { requestId: a.json.request_id, node: agent.key });
        // The broker is down (the command ended failed at once): back off as an operator would.
        if (a.json.log?.status === "failed") await delay(100);
      } else {
        run.rejected[String(a.status)] = (run.rejected[String(a.status)] ?? 0) + 1;
        await delay(20);
      }
    } catch (err) {
      if (refusedBeforeSent(err)) run.refused += 1;
      else run.indeterminate += 1;
      await delay(50);
    }
  }
}

/** The faults in a seeded order, each started once `sent` passes its share of the target. */
async function injectFaults(run: Run): Promise<void> {
  const { o, rnd } = run;
  type Fault = "broker" | "backend" | "rebind";
  const faults: Fault[] = [...Array<Fault>(o.brokerRestarts).fill("broker"), ...Array<Fault>(o.backendKills).fill("backend"), ...Array<Fault>(o.rebinds).fill("rebind")];
  for (let i = faults.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [faults[i], faults[j]] = [faults[j] as Fault, faults[i] as Fault];
  }
  for (const [i, fault] of faults.entries()) {
    const at = Math.floor(((i + 1) * o.commands) / (faults.length + 1));
    await until(`${at} commands sent`, () => run.sent.size >= at, 30 * 60_000, 20);
    const downMs = 100 + Math.floor(rnd() * 1400);
    if (fault === "rebind") {
      const agent = pick(rnd, run.agents);
      await rebind(run, agent);
      run.rebinds += 1;
      o.log(`fault ${i + 1}/${faults.length}: ${agent.key} reset and bound again (sent ${run.sent.size})`);
      continue;
    }
    if (fault === "broker") {
      await run.broker.kill();
      await delay(downMs);
      await run.broker.start();
      run.brokerRestarts += 1;
    } else {
      await run.backend.kill();
      await delay(downMs);
      await run.backend.start();
      run.backendKills += 1;
    }
    o.log(`fault ${i + 1}/${faults.length}: ${fault} down ${downMs} ms, restarted (sent ${run.sent.size})`);
  }
  run.faultsDone = true;
}

/** A REST call retried while the backend is down or the bind rate limit (20 a minute) answers 429; 90 s bound. */
async function restRetry(run: Run, token: string | null, method: string, path: string, body?: unknown): Promise<Answer> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      const a = await rest(run.backend, token, method, path, body);
      if (a.status !== 429 || Date.now() > deadline) return a;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await delay(500);
  }
}

/** reset-client, then bind-command and bind: the stand-in ends its connection and starts over with the new profile. */
async function rebind(run: Run, agent: StandIn): Promise<void> {
  const base = `/api/v1/configs/${agent.p.profile.config_id}/nodes/${agent.p.profile.node_id}`;
  const reset = await restRetry(run, run.token, "POST", `${base}/reset-client`);
  if (reset.status !== 200) throw new Error(`reset-client answered ${reset.status}: ${JSON.stringify(reset.json)}`);
  const cmd = await restRetry(run, run.token, "POST", `${base}/bind-command`);
  const bindToken = /--token (\S+)$/.exec(String(cmd.json?.command))?.[1];
  const bound = await restRetry(run, null, "POST", "/api/client/bind", { bind_token: bindToken, server_url: run.backend.baseUrl, client_version: "chaos", platform: "linux", hostname: agent.key });
  if (bound.status !== 200) throw new Error(`bind answered ${bound.status}: ${JSON.stringify(bound.json)}`);
  await agent.stop(false);
  agent.p = bound.json as Profile;
  agent.start();
}

/** Random abrupt drops of agent connections until the faults are over. */
async function dropAgents(run: Run): Promise<void> {
  while (!run.faultsDone || run.sent.size < run.o.commands) {
    await delay(Math.floor(run.rnd() * 2 * run.o.dropEveryMs));
    const a = pick(run.rnd, run.agents);
    if (a.client?.connected === true) {
      a.drop();
      run.drops += 1;
    }
  }
}

function presenceMatches(a: StandIn, presence: string): boolean {
  return a.up ? presence === "online" : presence === "offline" || presence === "dropped";
}

/** Ends a seeded quarter of the agents abruptly and a quarter with DISCONNECT; polls until every presence matches. */
async function converge(run: Run, report: ChaosReport): Promise<void> {
  const order = [...run.agents].sort(() => run.rnd() - 0.5);
  const quarter = Math.max(1, Math.floor(order.length / 4));
  await Promise.all(order.slice(0, quarter).map((a) => a.stop(true)));
  await Promise.all(order.slice(quarter, 2 * quarter).map((a) => a.stop(false)));
  const t0 = Date.now();
  run.o.log(`final truth: ${run.agents.filter((a) => a.up).length} up, ${quarter} ended abruptly, ${quarter} ended with DISCONNECT`);
  let last: string[] = [];
  const ok = await until(
    "presence convergence",
    async () => {
      last = [];
      for (const a of run.agents) {
        const s = await rest(run.backend, run.token, "GET", `/api/v1/configs/${a.p.profile.config_id}/nodes/${a.p.profile.node_id}/endpoint-status`);
        const presence = String(s.json?.client_presence_state);
        if (!presenceMatches(a, presence)) last.push(`${a.key}: ${presence}, truth ${a.up ? "up" : "down"}`);
      }
      return last.length === 0;
    },
    report.convergenceBoundMs + 15_000,
    100,
  ).catch(() => false);
  report.convergenceMs = ok ? Date.now() - t0 : null;
  report.notConverged = last;
}

/** Waits (bounded by the command timeout) until no command row is open. */
async function drainCommands(run: Run): Promise<void> {
  const db = new SQLite(run.backend.dbFile, { readonly: true, fileMustExist: true });
  try {
    const open = db.prepare("SELECT COUNT(*) AS n FROM control_logs WHERE kind = 'command' AND status IN ('pending', 'accepted')");
    await until("no open command", () => (open.get() as { n: number }).n === 0, run.o.commandTimeoutS * 1000 + 15_000, 200).catch(() => undefined);
  } finally {
    db.close();
  }
}

/** The broker's node accounts against the database's bound nodes (reconciled after the last restart). */
async function compareAccounts(run: Run, report: ChaosReport): Promise<void> {
  const dbUsers = (): string[] => {
    const db = new SQLite(run.backend.dbFile, { readonly: true, fileMustExist: true });
    try {
      return (db.prepare("SELECT mqtt_username AS u FROM node_client_state WHERE client_initialized = 1 AND mqtt_username IS NOT NULL").all() as Array<{ u: string }>).map((r) => r.u).sort();
    } finally {
      db.close();
    }
  };
  let diff: string[] = [];
  let brokerCount = 0;
  let dbCount = 0;
  await until(
    "broker accounts = database accounts",
    async () => {
      const broker = (await run.broker.clients()).filter((u) => u.startsWith("n:")).sort();
      const db = dbUsers();
      brokerCount = broker.length;
      dbCount = db.length;
      diff = [...broker.filter((u) => !db.includes(u)).map((u) => `only at the broker: ${u}`), ...db.filter((u) => !broker.includes(u)).map((u) => `only in the database: ${u}`)];
      return diff.length === 0;
    },
    20_000,
    250,
  ).catch(() => undefined);
  report.brokerAccounts = brokerCount;
  report.databaseAccounts = dbCount;
  report.accountsDiff = diff;
  report.accountsEqual = diff.length === 0;
}

/** Counts the terminal statuses from the database (the backend is stopped by then). */
function account(run: Run, report: ChaosReport): void {
  const db = new SQLite(run.backend.dbFile, { readonly: true, fileMustExist: true });
  try {
    report.integrity = (db.pragma("integrity_check") as Array<{ integrity_check: string }>).map((r) => r.integrity_check).join("; ");
    const rows = db.prepare("SELECT request_id AS rid, action, status, message, COUNT(*) OVER (PARTITION BY request_id) AS n FROM control_logs WHERE kind = 'command'").all() as Array<{ rid: string | null; action: string | null; status: string; message: string | null; n: number }>;
    const acked = new Map<string, "applied" | "failed">();
    for (const a of run.agents) for (const [rid, s] of a.done) acked.set(rid, s);
    const seen = new Set<string>();
    for (const r of rows) {
      if (r.rid === null) continue;
      if (r.n > 1 && !seen.has(r.rid)) report.duplicated += 1;
      seen.add(r.rid);
      const mine = run.sent.has(r.rid);
      if (!mine && r.action === "push_config") report.automaticPushes += 1;
      else if (!mine) report.orphans += 1;
      if (r.status === "pending" || r.status === "accepted") {
        if (mine) report.stuck += 1;
        else report.orphansStuck += 1;
        continue;
      }
      if (!mine) continue;
      if (r.status === "applied") report.applied += 1;
      if (r.status === "failed") report.failed += 1;
      if (r.status === "failed" && (r.message ?? "").startsWith("publish to the broker failed")) report.failedPublish += 1;
      if (r.status === "timed_out") report.timedOut += 1;
      if (r.status === "applied" && acked.get(r.rid) !== "applied") report.phantom += 1;
      if (r.status !== "applied" && acked.get(r.rid) === "applied") report.appliedButNotRecorded += 1;
      if (r.status === "failed" && (r.message ?? "").startsWith("publish to the broker failed") && acked.has(r.rid)) report.failedPublishButDelivered += 1;
    }
    for (const rid of run.sent.keys()) if (!seen.has(rid)) report.lost += 1;
  } finally {
    db.close();
  }
}

function emptyReport(o: ChaosOptions): ChaosReport {
  return {
    seed: o.seed, agents: o.agents, durationMs: 0, sent: 0, applied: 0, failed: 0, failedPublish: 0, timedOut: 0, lost: 0, duplicated: 0, stuck: 0, phantom: 0,
    indeterminate: 0, orphans: 0, orphansStuck: 0, automaticPushes: 0, refused: 0, rejected: {}, redelivered: 0, appliedButNotRecorded: 0, failedPublishButDelivered: 0, brokerRestarts: 0, backendKills: 0, rebinds: 0, drops: 0,
    convergenceMs: null, convergenceBoundMs: o.onlineTtlMs + o.detectTimeoutS * 1000, notConverged: [], integrity: "", brokerAccounts: 0, databaseAccounts: 0, accountsEqual: false, accountsDiff: [],
  };
}

/**
 * Runs one chaos run and returns its counts. Never throws for a finding (the caller judges the
 * report); throws when the run itself cannot proceed (mosquitto missing, the backend does not start).
 * Removes its temp directories and ends every process it started.
 */
export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), "svc-chaos-"));
  const report = emptyReport(o);
  const broker = await Broker.create(dir);
  const backend = new Backend(join(dir, "data"), await freeTcpPort("127.0.0.1"), {
    SVC_LOG_LEVEL: "warn",
    SVC_ENABLE_MQTT_SERVICES: "true",
    SVC_MQTT_BROKER: "mosquitto",
    SVC_MQTT_URL: broker.url,
    SVC_MOSQUITTO_ADMIN_USERNAME: broker.adminUser,
    SVC_MOSQUITTO_ADMIN_PASSWORD: broker.adminPassword,
    SVC_MQTT_PUBLIC_HOST: "127.0.0.1",
    SVC_MQTT_PUBLIC_PORT: String(broker.port),
    SVC_MQTT_RECONNECT_MIN_MS: "50",
    SVC_MQTT_RECONNECT_MAX_MS: "500",
    SVC_COMMAND_TIMEOUT_S: String(o.commandTimeoutS),
    SVC_DETECT_TIMEOUT_S: String(o.detectTimeoutS),
    SVC_CONTROL_LOG_RETENTION: "1000000",
    SVC_CONFIG_PUSH_DEBOUNCE_MS: "0",
    CHAOS_ONLINE_TTL_MS: String(o.onlineTtlMs),
  });
  const run: Run = { o, rnd: mulberry32(o.seed), broker, backend, token: "", agents: [], sent: new Map(), indeterminate: 0, refused: 0, rejected: {}, brokerRestarts: 0, backendKills: 0, rebinds: 0, drops: 0, faultsDone: false };
  try {
    await broker.start();
    await backend.start();
    const profiles = await setupNodes(run);
    run.agents = profiles.map((p, i) => new StandIn(p, broker.url, mulberry32(o.seed * 31 + i), o));
    for (const a of run.agents) a.start();
    o.log(`${run.agents.length} agents bound; sending ${o.commands} commands with ${o.brokerRestarts} broker restarts, ${o.backendKills} backend SIGKILLs and ${o.rebinds} rebinds`);
    const enough = () => run.sent.size >= o.commands && run.faultsDone;
    await Promise.all([injectFaults(run), dropAgents(run), ...Array.from({ length: o.concurrency }, () => sender(run, enough))]);
    o.log(`sent ${run.sent.size}; waiting for presence to converge and commands to close`);
    await converge(run, report);
    await drainCommands(run);
    await compareAccounts(run, report);
    await backend.kill("SIGTERM");
    account(run, report);
  } finally {
    await Promise.all(run.agents.map((a) => a.stop(true).catch(() => undefined)));
    await backend.kill();
    await broker.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  report.sent = run.sent.size;
  report.indeterminate = run.indeterminate;
  report.refused = run.refused;
  report.rejected = run.rejected;
  report.brokerRestarts = run.brokerRestarts;
  report.backendKills = run.backendKills;
  report.rebinds = run.rebinds;
  report.drops = run.drops;
  report.redelivered = run.agents.reduce((n, a) => n + a.redelivered, 0);
  report.durationMs = Date.now() - started;
  return report;
}

/** The report as the table `npm run chaos` prints and docs/reliability.md quotes. */
export function formatReport(r: ChaosReport): string {
  const rows: Array<[string, string | number]> = [
    ["seed", r.seed],
    ["agents", r.agents],
    ["duration", `${(r.durationMs / 1000).toFixed(1)} s`],
    ["broker restarts (SIGKILL)", r.brokerRestarts],
    ["backend restarts (SIGKILL)", r.backendKills],
    ["reset-client + bind again", r.rebinds],
    ["agent connection drops", r.drops],
    ["sent (202)", r.sent],
    ["applied", r.applied],
    ["failed", `${r.failed} (${r.failedPublish} refused by a down broker)`],
    ["timed out", r.timedOut],
    ["lost", r.lost],
    ["duplicated", r.duplicated],
    ["stuck", r.stuck],
    ["phantom applied", r.phantom],
    ["applied by the agent, ACK lost in a fault", r.appliedButNotRecorded],
    ["failed (publish refused) yet delivered to the agent", r.failedPublishButDelivered],
    ["redelivered to an agent (run once)", r.redelivered],
    ["automatic config pushes (all terminal unless stuck > 0)", r.automaticPushes],
    ["indeterminate requests (backend died)", `${r.indeterminate} (${r.orphans} became rows, ${r.orphansStuck} stuck)`],
    ["refused connections (retried)", r.refused],
    ["other answers", JSON.stringify(r.rejected)],
    ["presence convergence", r.convergenceMs === null ? `NOT within ${r.convergenceBoundMs + 15_000} ms: ${r.notConverged.join(", ")}` : `${r.convergenceMs} ms (bound TTL + detect timeout ${r.convergenceBoundMs} ms)`],
    ["PRAGMA integrity_check", r.integrity],
    ["broker accounts = database", `${r.accountsEqual ? "yes" : "NO"} (${r.brokerAccounts} / ${r.databaseAccounts})${r.accountsDiff.length > 0 ? ` ${r.accountsDiff.join(", ")}` : ""}`],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `| ${k.padEnd(w)} | ${String(v)} |`).join("\n");
}
