/**
 * A fleet of N bound nodes through a Mosquitto restart (a benchmark, not a test:
 * it prints tables and asserts nothing).
 *
 *   npx tsx scripts/bench/fleet.ts [--nodes 100000] [--workers 4] [--down-s 5]
 *     [--provision file|backend] [--addresses 10] [--timeout-s 120] [--per-config 250]
 *
 * 1. Seeds N bound dynamic nodes (config latest, presence offline, real actor snapshots) straight
 *    into SQLite through the real migrations (`seedStore` of ingest-lib: a bench shortcut for
 *    N binds), with each node's broker password sealed by the service's own vault, exactly as a
 *    bind stores it.
 * 2. Mosquitto 2.0 with dynamic security, from deploy/mosquitto/mosquitto.conf (listener moved
 *    to a free loopback port). The node accounts are provisioned either by the backend's own
 *    reconciliation over `$CONTROL` (`--provision backend`, timed), or written into the plugin's
 *    JSON file before the broker starts (`--provision file`: the same accounts the adapter
 *    creates — bound client id, one role with the node's literal ACLs, the password fingerprint
 *    in `textdescription` — hashed as the plugin hashes: PBKDF2-SHA512, 101 iterations), after
 *    which the backend's reconciliation finds every node account in sync and only adds its own
 *    user.
 * 3. The real service (`createServer`, this process) with `SVC_MQTT_BROKER=mosquitto` and the
 *    default reconnect backoff (1 s doubling to 30 s).
 * 4. N stand-in agents (`fleet-agents.ts`, `--workers` processes) connect with the credentials
 *    the backend provisioned, subscribe and publish `mqtt_connected` + a heartbeat, like the agent.
 * 5. Once every node is online in the store: SIGKILL Mosquitto, wait `--down-s`, start it again
 *    (same dynamic-security file). From the moment it accepts connections, sample every second:
 *    agents connected, nodes online in the store whose last signal is newer than the restart,
 *    the backend's RSS (this process) and Mosquitto's.
 * 6. Checks: every node online with a signal after the restart; per node, the `mqtt_connected`
 *    events stored equal the sessions its agent opened (a duplicate or a loss shows), and no node
 *    in a presence or runtime state other than online/running.
 */
import { execFileSync, fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { Session } from "node:inspector/promises";
import SQLite from "better-sqlite3";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import type { FleetAgentStats, ToFleetAgents } from "./fleet-agents.js";
import { benchNodeId, seedStore } from "./ingest-lib.js";
import { awaitBackendReady, mosquittoSettings, prepareBroker, sealPasswords, writeDynsecAccounts, type Broker } from "./mosquitto-lib.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, "..", "..");
const AGENTS = join(HERE, "fleet-agents.ts");

interface Args {
  nodes: number;
  workers: number;
  downS: number;
  provision: "file" | "backend";
  addresses: number;
  timeoutS: number;
  perConfig: number;
  concurrency: number;
  /** How Mosquitto is stopped: SIGKILL (a crash) or SIGTERM (`systemctl restart`). */
  signal: "SIGKILL" | "SIGTERM";
  /** Profile the backend (this process) from the kill to the end of sampling; print the top self times. */
  cpuProf: boolean;
}

function parseArgs(argv: string[]): Args {
  const get = (name: string, dflt: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] !== undefined ? (argv[i + 1] as string) : dflt;
  };
  const nodes = Number(get("nodes", "1000"));
  const provision = get("provision", "file");
  if (provision !== "file" && provision !== "backend") throw new Error("--provision file|backend");
  return {
    nodes,
    workers: Number(get("workers", String(Math.max(1, Math.ceil(nodes / 15_000))))),
    downS: Number(get("down-s", "5")),
    provision,
    addresses: Number(get("addresses", String(Math.max(1, Math.ceil(nodes / 15_000))))),
    timeoutS: Number(get("timeout-s", "45")),
    perConfig: Number(get("per-config", "250")),
    concurrency: Number(get("concurrency", "200")),
    signal: get("signal", "KILL") === "TERM" ? "SIGTERM" : "SIGKILL",
    cpuProf: argv.includes("--cpu-prof"),
  };
}

const fmt = (n: number, d = 0) => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
const mb = (bytes: number) => fmt(bytes / 1048576);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Raises this process's open-file limit (children inherit it: Mosquitto, one process, needs one
 * descriptor per connection). Says so when it cannot (a container without CAP_SYS_RESOURCE
 * cannot raise the hard limit, even as root).
 */
function raiseNofile(): string {
  let note = "raised";
  try {
    execFileSync("prlimit", ["--pid", String(process.pid), "--nofile=1048576:1048576"], { stdio: "pipe" });
  } catch (err) {
    note = `could not be raised: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`;
  }
  const limit = execFileSync("prlimit", ["--pid", String(process.pid), "--nofile", "--output", "SOFT,HARD", "--noheadings"], { encoding: "utf8" }).trim();
  return `${limit.replace(/\s+/g, " / ")} (${note})`;
}

function rssOf(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

// ---- seeding -----------------------------------------------------------------------------------

// ---- mosquitto -----------------------------------------------------------------------------------

// ---- agents ------------------------------------------------------------------------------------

interface Fleet {
  children: ChildProcess[];
  stats: FleetAgentStats[];
  total(): { connected: number; connecting: number; waiting: number; connacks: number; refused: number; timeouts: number; pubacks: number; errors: Record<string, number>; rssBytes: number };
  sessions(): Promise<Map<number, number>>;
  /** No new connection attempts; resolves once no handshake is in flight (at most 20 s). */
  freeze(): Promise<void>;
  stop(): Promise<void>;
}

function startFleet(a: Args, port: number): Fleet {
  const addresses = Array.from({ length: a.addresses }, (_, k) => `127.0.0.${k + 2}`);
  const children: ChildProcess[] = [];
  const stats: FleetAgentStats[] = [];
  const per = Math.ceil(a.nodes / a.workers);
  for (let w = 0; w < a.workers; w++) {
    const child = fork(AGENTS, [], { cwd: ROOT, execArgv: ["--import", "tsx", "--max-old-space-size=4096"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    children.push(child);
    stats.push({ type: "stats", connected: 0, connecting: 0, waiting: 0, connacks: 0, refused: 0, errors: {}, timeouts: 0, pubacks: 0, rssBytes: 0 });
    child.on("message", (m: FleetAgentStats | { type: "sessions"; from: number; counts: number[] }) => {
      if (m.type === "stats") stats[w] = m;
    });
    const msg: ToFleetAgents = { type: "start", from: w * per, to: Math.min(a.nodes, (w + 1) * per), perConfig: a.perConfig, port, addresses, concurrency: a.concurrency };
    child.send(msg);
  }
  return {
    children,
    stats,
    total() {
      const t = { connected: 0, connecting: 0, waiting: 0, connacks: 0, refused: 0, timeouts: 0, pubacks: 0, errors: {} as Record<string, number>, rssBytes: 0 };
      for (const s of stats) {
        t.connected += s.connected;
        t.connecting += s.connecting;
        t.waiting += s.waiting;
        t.connacks += s.connacks;
        t.refused += s.refused;
        t.timeouts += s.timeouts;
        t.pubacks += s.pubacks;
        t.rssBytes += s.rssBytes;
        for (const [k, v] of Object.entries(s.errors)) t.errors[k] = (t.errors[k] ?? 0) + v;
      }
      return t;
    },
    async sessions() {
      const out = new Map<number, number>();
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              const on = (m: { type: string; from?: number; counts?: number[] }) => {
                if (m.type !== "sessions" || m.from === undefined || m.counts === undefined) return;
                m.counts.forEach((n, k) => out.set((m.from as number) + k, n));
                c.off("message", on);
                resolve();
              };
              c.on("message", on);
              c.send({ type: "sessions" });
            }),
        ),
      );
      return out;
    },
    async freeze() {
      for (const c of children) c.send({ type: "freeze" } satisfies ToFleetAgents);
      const deadline = Date.now() + 20_000;
      await sleep(1500);
      while (this.total().connecting > 0 && Date.now() < deadline) await sleep(500);
    },
    async stop() {
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              c.once("exit", () => resolve());
              c.send({ type: "stop" } satisfies ToFleetAgents);
              setTimeout(() => c.kill("SIGKILL"), 10_000).unref();
            }),
        ),
      );
    },
  };
}

// ---- sampling ------------------------------------------------------------------------------------

interface Sample {
  t: number;
  agentsConnected: number;
  online: number;
  confirmed: number;
  backendRss: number;
  brokerRss: number;
  agentsRss: number;
  backendConnected: boolean;
  /** Longest event-loop delay of the backend process since the previous sample, ms. */
  loopMaxMs: number;
}

const loopDelay = monitorEventLoopDelay({ resolution: 20 });
loopDelay.enable();

/** Nodes online in the store; `confirmed`: online with a signal at or after `since` (ms). */
function counter(dbFile: string): (since: number) => { online: number; confirmed: number } {
  const db = new SQLite(dbFile, { readonly: true });
  const q = db.prepare(
    "SELECT sum(client_presence_state = 'online') AS online, sum(client_presence_state = 'online' AND last_signal_at >= ?) AS confirmed FROM node_client_state",
  );
  return (since) => {
    const r = q.get(since) as { online: number | null; confirmed: number | null };
    return { online: r.online ?? 0, confirmed: r.confirmed ?? 0 };
  };
}

async function sampleUntil(opts: {
  since: number;
  origin: number;
  n: number;
  timeoutMs: number;
  count: (since: number) => { online: number; confirmed: number };
  fleet: Fleet;
  broker: Broker;
  server: AppContext;
}): Promise<{ samples: Sample[]; allAtMs: number | null }> {
  const samples: Sample[] = [];
  const deadline = Date.now() + opts.timeoutMs;
  let allAtMs: number | null = null;
  for (;;) {
    const c = opts.count(opts.since);
    const f = opts.fleet.total();
    const s: Sample = {
      t: Date.now() - opts.origin,
      agentsConnected: f.connected,
      online: c.online,
      confirmed: c.confirmed,
      backendRss: process.memoryUsage().rss,
      brokerRss: rssOf(opts.broker.pid()),
      agentsRss: f.rssBytes,
      backendConnected: opts.server.mqtt.connected(),
      loopMaxMs: loopDelay.max / 1e6,
    };
    loopDelay.reset();
    samples.push(s);
    if (c.confirmed >= opts.n && allAtMs === null) allAtMs = s.t;
    if (allAtMs !== null || Date.now() > deadline) break;
    await sleep(1000);
  }
  return { samples, allAtMs };
}

function printCurve(title: string, r: { samples: Sample[]; allAtMs: number | null }, n: number): void {
  console.log(`\n#### ${title}\n`);
  console.log(`All ${fmt(n)} nodes online with a fresh signal after: **${r.allAtMs === null ? "not reached" : `${fmt(r.allAtMs / 1000, 1)} s`}**\n`);
  console.log("| t (s) | agents connected | nodes online (fresh signal) | nodes online (any) | backend connected | backend event-loop max delay ms | backend RSS MB | Mosquitto RSS MB | agents RSS MB (all workers) |");
  console.log("|---:|---:|---:|---:|:---:|---:|---:|---:|---:|");
  for (const s of r.samples) {
    console.log(`| ${fmt(s.t / 1000, 1)} | ${fmt(s.agentsConnected)} | ${fmt(s.confirmed)} | ${fmt(s.online)} | ${s.backendConnected ? "yes" : "no"} | ${fmt(s.loopMaxMs)} | ${mb(s.backendRss)} | ${mb(s.brokerRss)} | ${mb(s.agentsRss)} |`);
  }
  const maxRss = Math.max(...r.samples.map((s) => s.backendRss));
  console.log(`\nBackend RSS max ${mb(maxRss)} MB (target ≤ 1,536 MB).`);
}

// ---- profile ---------------------------------------------------------------------------------------

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

async function startProfile(): Promise<Session> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 1000 });
  await session.post("Profiler.start");
  return session;
}

/** Top self-time functions of the profile (share of all samples). */
async function stopProfile(session: Session, top = 25): Promise<void> {
  const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: { nodes: ProfileNode[]; samples: number[] } };
  session.disconnect();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  for (const id of profile.samples) {
    const f = byId.get(id)?.callFrame;
    if (f === undefined) continue;
    const key = `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*\/(node_modules|src)\//, "$1/")}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + 1);
  }
  const total = profile.samples.length;
  console.log(`\n#### Backend CPU profile, kill → end of sampling (self time, ${fmt(total)} samples of 1 ms)\n`);
  console.log("| self % | function |\n|---:|---|");
  for (const [k, v] of [...self.entries()].sort((x, y) => y[1] - x[1]).slice(0, top)) console.log(`| ${fmt((100 * v) / total, 1)} | \`${k}\` |`);
}

// ---- checks --------------------------------------------------------------------------------------

function checks(dbFile: string, sessions: Map<number, number>, n: number, perConfig: number): void {
  const db = new SQLite(dbFile, { readonly: true });
  const states = db.prepare("SELECT client_presence_state AS p, runtime_state AS r, count(*) AS c FROM node_client_state GROUP BY 1, 2").all() as { p: string; r: string; c: number }[];
  const events = new Map<string, number>();
  for (const row of db.prepare("SELECT node_id, count(*) AS c FROM control_logs WHERE event = 'mqtt_connected' GROUP BY node_id").iterate() as IterableIterator<{ node_id: string; c: number }>) {
    events.set(row.node_id, row.c);
  }
  const byEvent = db.prepare("SELECT event, count(*) AS c FROM control_logs WHERE kind = 'event' GROUP BY event").all() as { event: string; c: number }[];
  const transitions = db.prepare("SELECT count(*) AS c FROM node_transitions").get() as { c: number };
  db.close();
  let equal = 0;
  let more = 0;
  let fewer = 0;
  let lost = 0;
  for (let i = 0; i < n; i++) {
    const opened = sessions.get(i) ?? 0;
    const stored = events.get(benchNodeId(i)) ?? 0;
    if (stored === opened) equal += 1;
    else if (stored > opened) more += 1;
    else {
      fewer += 1;
      lost += opened - stored;
    }
  }
  void perConfig;
  console.log("\n#### Checks after the run\n");
  console.log("| presence | runtime | nodes |\n|---|---|---:|");
  for (const s of states) console.log(`| ${s.p} | ${s.r} | ${fmt(s.c)} |`);
  console.log("\n| client event | stored |\n|---|---:|");
  for (const e of byEvent) console.log(`| ${e.event} | ${fmt(e.c)} |`);
  console.log(`\nnode_transitions rows: ${fmt(transitions.c)}`);
  console.log(`\nPer node, stored \`mqtt_connected\` events vs sessions its agent opened: equal ${fmt(equal)}, more (a duplicate) ${fmt(more)}, fewer ${fmt(fewer)} (${fmt(lost)} events lost).`);
}

// ---- main ------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const nofile = raiseNofile();
  const dir = mkdtempSync(join(tmpdir(), "svc-fleet-"));
  const dataDir = join(dir, "data");
  const dbFile = join(dataDir, "svc.db");
  execFileSync("mkdir", ["-p", dataDir]);
  const phases: [string, number, string][] = [];
  const timed = async <T>(label: string, fn: () => Promise<T> | T, note = ""): Promise<T> => {
    const t0 = performance.now();
    const v = await fn();
    phases.push([label, performance.now() - t0, note]);
    return v;
  };
  console.log(`### Fleet through a Mosquitto restart: ${fmt(a.nodes)} nodes (${new Date().toISOString()})\n`);
  console.log(`machine load average at start: ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")} (2 cores, shared with other sessions)\n`);
  console.log(`nofile limit ${nofile}; ${a.workers} agent processes; ${a.addresses} source addresses; provision: ${a.provision}; broker stopped by ${a.signal}, down ${a.downS} s\n`);
  let server: AppContext | undefined;
  let fleet: Fleet | undefined;
  const broker = await prepareBroker(dir);
  try {
    await timed("seed store (one transaction)", () => seedStore({ file: dbFile, nodes: a.nodes, snapshot: "offline", onlineTtlMs: 2_700_000, detectTimeoutMs: 15_000, perConfig: a.perConfig }));
    await timed("seal broker passwords (vault)", () => sealPasswords(dbFile, dataDir, a.nodes, a.perConfig));
    if (a.provision === "file") {
      await timed("write node accounts into dynamic-security.json (PBKDF2)", () => writeDynsecAccounts(join(dir, "dynamic-security.json"), a.nodes, a.perConfig));
    }
    await timed("start mosquitto (load accounts)", () => broker.start());
    server = await timed("createServer", () =>
      createServer(
        testSettings({
          dataDir,
          adminPassword: "fleet bench password",
          ...mosquittoSettings(broker),
          detectIntervalMs: 3_600_000,
        }),
        createLogger(process.env.FLEET_LOG === "1" ? "info" : "silent"),
      ),
    );
    const srv = server;
    await timed(`backend connected + broker reconciled (${a.provision === "backend" ? "creates every account" : "accounts already in sync"})`, () =>
      awaitBackendReady(srv, Math.max(300_000, a.nodes * 20)),
    );
    const report = server.mqtt.sync?.state().lastReport;
    // Recv-Q/Send-Q of a listening socket: queued connections / the accept backlog Mosquitto asked for.
    const listen = execFileSync("ss", ["-ltnH", `sport = :${broker.port}`], { encoding: "utf8" }).trim();
    const count = counter(dbFile);
    fleet = startFleet(a, broker.port);
    const t0 = Date.now();
    const first = await sampleUntil({ since: t0, origin: t0, n: a.nodes, timeoutMs: Math.max(120_000, a.nodes * 5), count, fleet, broker, server });
    phases.push(["first connection of every agent → all online in the store", Date.now() - t0, ""]);
    await sleep(3000);
    const beforeKill = fleet.total();
    const profiler = a.cpuProf ? await startProfile() : undefined;
    const tKill = Date.now();
    await broker.kill(a.signal);
    await sleep(a.downS * 1000);
    const tAccept = await broker.start();
    const after = await sampleUntil({ since: tAccept, origin: tAccept, n: a.nodes, timeoutMs: a.timeoutS * 1000, count, fleet, broker, server });
    await fleet.freeze();
    await sleep(3000);
    const sessions = await fleet.sessions();
    const profileDone = profiler;
    const end = fleet.total();

    console.log("| phase | ms | |\n|---|---:|---|");
    for (const [label, ms, note] of phases) console.log(`| ${label} | ${fmt(ms)} | ${note} |`);
    console.log(`\nreconcile report: ${JSON.stringify(report)}`);
    console.log(`\nMosquitto's listening socket (ss: state, Recv-Q, Send-Q = accept backlog, address): \`${listen.replace(/\s+/g, " ")}\``);
    console.log(`\nbroker killed at +${fmt((tKill - t0) / 1000, 1)} s of the run; accepting again ${fmt((tAccept - tKill) / 1000, 1)} s after the kill`);
    console.log(`agents before kill: ${JSON.stringify(beforeKill)}`);
    console.log(`agents at the end: ${JSON.stringify(end)}`);
    printCurve("Initial connection (t from the first agent's start)", { samples: first.samples.filter((_, k) => k % Math.max(1, Math.ceil(first.samples.length / 40)) === 0 || k === first.samples.length - 1), allAtMs: first.allAtMs }, a.nodes);
    printCurve("After the restart (t from Mosquitto accepting connections)", after, a.nodes);
    checks(dbFile, sessions, a.nodes, a.perConfig);
    const problems = broker.problems();
    console.log(`\nMosquitto logged ${fmt(problems.length)} error/warning lines${problems.length > 0 ? "; first and last:" : "."}`);
    for (const line of [...new Set([...problems.slice(0, 3), ...problems.slice(-3)])]) console.log(`    ${line}`);
    if (profileDone !== undefined) await stopProfile(profileDone);
  } finally {
    await fleet?.stop();
    await server?.close();
    await broker.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
