/**
 * A fleet of N bound nodes through a broker restart (a benchmark, not a test:
 * it prints tables and asserts nothing).
 *
 *   npx tsx scripts/bench/fleet.ts [--nodes 100000] [--workers 4] [--down-s 5]
 *     [--provision file|backend] [--addresses 10] [--timeout-s 120] [--per-config 250]
 *     [--broker mosquitto|embedded] [--kill-agents 100]
 *
 * `--broker embedded`: the service's own broker thread instead of Mosquitto (steps 2 and 5: the
 * worker thread is ended as a crash would and restarted by the service at once; `--down-s` does
 * not apply). `--kill-agents K`: K agents, spread over the fleet, die during the outage (they
 * never reconnect, and no will is published for them: the broker was down); their nodes must be
 * shown not online.
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
 * 6. Prints "all N online with a fresh signal after restart" with its time (with `--kill-agents`:
 *    the live agents' nodes, the time until every killed agent's node is shown not online, and
 *    the time until every node is either), then the checks: per node, the `mqtt_connected`
 *    events stored equal the sessions its agent opened (the lost-event count), the presence and
 *    runtime states, and where the killed agents' nodes ended.
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
import { ThreadedBroker } from "../../src/mqtt/broker-thread.js";
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
  broker: "mosquitto" | "embedded";
  /** Agents that die during the outage. */
  killAgents: number;
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
    broker: get("broker", "mosquitto") === "embedded" ? "embedded" : "mosquitto",
    killAgents: Number(get("kill-agents", "0")),
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
  /** Nodes shown not online (dropped or offline). */
  notOnline: number;
  /** Killed agents' nodes shown not online. */
  killedDown: number;
  backendRss: number;
  brokerRss: number;
  agentsRss: number;
  backendConnected: boolean;
  /** Longest event-loop delay of the backend process since the previous sample, ms. */
  loopMaxMs: number;
}

const loopDelay = monitorEventLoopDelay({ resolution: 20 });
loopDelay.enable();

interface Counts {
  online: number;
  confirmed: number;
  notOnline: number;
  killedDown: number;
}

/**
 * Nodes online in the store; `confirmed`: online with a signal at or after `since` (ms);
 * `notOnline`: dropped or offline; `killedDown`: of the nodes in `killed`, those not online.
 */
function counter(dbFile: string, killed: string[]): (since: number) => Counts {
  const db = new SQLite(dbFile, { readonly: true });
  const q = db.prepare(
    "SELECT sum(client_presence_state = 'online') AS online, sum(client_presence_state = 'online' AND last_signal_at >= ?) AS confirmed, sum(client_presence_state != 'online') AS notOnline FROM node_client_state",
  );
  const k = killed.length === 0 ? null : db.prepare(`SELECT count(*) AS c FROM node_client_state WHERE client_presence_state != 'online' AND node_id IN (${killed.map(() => "?").join(",")})`);
  return (since) => {
    const r = q.get(since) as { online: number | null; confirmed: number | null; notOnline: number | null };
    const killedDown = k === null ? 0 : (k.get(...killed) as { c: number }).c;
    return { online: r.online ?? 0, confirmed: r.confirmed ?? 0, notOnline: r.notOnline ?? 0, killedDown };
  };
}

/** When (ms from the origin) each target was first met; null: not within the run. */
interface Reached {
  /** Every live agent's node online with a fresh signal. */
  allLiveAtMs: number | null;
  /** Every node online with a fresh signal or shown not online. */
  truthAtMs: number | null;
  /** Every killed agent's node shown not online. */
  killedAtMs: number | null;
}

async function sampleUntil(opts: {
  since: number;
  origin: number;
  n: number;
  killed: number;
  timeoutMs: number;
  count: (since: number) => Counts;
  fleet: Fleet;
  brokerPid: () => number | undefined;
  server: AppContext;
}): Promise<{ samples: Sample[] } & Reached> {
  const samples: Sample[] = [];
  const deadline = Date.now() + opts.timeoutMs;
  const r: Reached = { allLiveAtMs: null, truthAtMs: null, killedAtMs: null };
  for (;;) {
    const c = opts.count(opts.since);
    const f = opts.fleet.total();
    const s: Sample = {
      t: Date.now() - opts.origin,
      agentsConnected: f.connected,
      ...c,
      backendRss: process.memoryUsage().rss,
      brokerRss: rssOf(opts.brokerPid()),
      agentsRss: f.rssBytes,
      backendConnected: opts.server.mqtt.connected(),
      loopMaxMs: loopDelay.max / 1e6,
    };
    loopDelay.reset();
    samples.push(s);
    if (r.allLiveAtMs === null && c.confirmed >= opts.n - opts.killed) r.allLiveAtMs = s.t;
    if (r.truthAtMs === null && c.confirmed + c.notOnline >= opts.n) r.truthAtMs = s.t;
    if (r.killedAtMs === null && c.killedDown >= opts.killed) r.killedAtMs = s.t;
    const done = r.allLiveAtMs !== null && r.truthAtMs !== null && r.killedAtMs !== null;
    if (done || Date.now() > deadline) break;
    await sleep(1000);
  }
  return { samples, ...r };
}

const secs = (ms: number | null) => (ms === null ? "not reached" : `${fmt(ms / 1000, 1)} s`);

function printCurve(title: string, r: { samples: Sample[] } & Reached, n: number, killed: number): void {
  console.log(`\n#### ${title}\n`);
  if (killed === 0) console.log(`All ${fmt(n)} online with a fresh signal after restart: **${secs(r.allLiveAtMs)}**\n`);
  else {
    console.log(`All ${fmt(n - killed)} live agents' nodes online with a fresh signal after restart: **${secs(r.allLiveAtMs)}**`);
    console.log(`Killed agents: ${fmt(killed)} nodes shown not online after: **${secs(r.killedAtMs)}**`);
    console.log(`Every node online with a fresh signal or shown not online after: **${secs(r.truthAtMs)}**\n`);
  }
  console.log("| t (s) | agents connected | nodes online (fresh signal) | nodes online (any) | nodes not online | killed not online | backend connected | backend event-loop max delay ms | backend RSS MB | broker RSS MB | agents RSS MB (all workers) |");
  console.log("|---:|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|");
  for (const s of r.samples) {
    console.log(
      `| ${fmt(s.t / 1000, 1)} | ${fmt(s.agentsConnected)} | ${fmt(s.confirmed)} | ${fmt(s.online)} | ${fmt(s.notOnline)} | ${fmt(s.killedDown)} | ${s.backendConnected ? "yes" : "no"} | ${fmt(s.loopMaxMs)} | ${mb(s.backendRss)} | ${mb(s.brokerRss)} | ${mb(s.agentsRss)} |`,
    );
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

/** Presence and stored events after the run; `killed` agents' nodes are counted apart. */
function checks(dbFile: string, sessions: Map<number, number>, n: number, killed: Set<number>): void {
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
  const killedStates = new Map<string, number>();
  const db2 = new SQLite(dbFile, { readonly: true });
  const one = db2.prepare("SELECT client_presence_state AS p FROM node_client_state WHERE node_id = ?");
  for (const i of killed) {
    const p = (one.get(benchNodeId(i)) as { p: string } | undefined)?.p ?? "missing";
    killedStates.set(p, (killedStates.get(p) ?? 0) + 1);
  }
  db2.close();
  console.log("\n#### Checks after the run\n");
  console.log("| presence | runtime | nodes |\n|---|---|---:|");
  for (const s of states) console.log(`| ${s.p} | ${s.r} | ${fmt(s.c)} |`);
  console.log("\n| client event | stored |\n|---|---:|");
  for (const e of byEvent) console.log(`| ${e.event} | ${fmt(e.c)} |`);
  console.log(`\nnode_transitions rows: ${fmt(transitions.c)}`);
  console.log(`\nPer node, stored \`mqtt_connected\` events vs sessions its agent opened: equal ${fmt(equal)}, more (a duplicate) ${fmt(more)}, fewer ${fmt(fewer)} (${fmt(lost)} events lost).`);
  console.log(`\n**Lost \`mqtt_connected\` events: ${fmt(lost)}.**`);
  if (killed.size > 0) console.log(`\nKilled agents' nodes at the end: ${[...killedStates].map(([p, c]) => `${p} ${fmt(c)}`).join(", ")} (of ${fmt(killed.size)}).`);
}

// ---- main ------------------------------------------------------------------------------------------

/** The broker under test: Mosquitto (a process of its own) or the service's broker thread. */
interface BrokerUnderTest {
  port: number;
  pid(): number | undefined;
  /** Ends it as a crash would. */
  crash(): Promise<void>;
  /** Brings it back (or waits until the service did); resolves with when it accepts connections again (ms since the epoch). */
  restart(): Promise<number>;
  problems(): string[];
}

function mosquittoUnderTest(broker: Broker, a: Args): BrokerUnderTest {
  return {
    port: broker.port,
    pid: () => broker.pid(),
    crash: () => broker.kill(a.signal),
    restart: async () => {
      await sleep(a.downS * 1000);
      return broker.start();
    },
    problems: () => broker.problems(),
  };
}

/** The embedded broker's worker thread, ended as a crash would end it; the service restarts it on the same port. */
function embeddedUnderTest(server: AppContext): BrokerUnderTest {
  const broker = server.mqtt.broker;
  if (!(broker instanceof ThreadedBroker)) throw new Error("--broker embedded needs the broker thread (SVC_EMBEDDED_BROKER_THREAD on)");
  return {
    port: broker.port,
    pid: () => undefined,
    crash: () => broker.terminateWorker(),
    restart: async () => {
      // The restarted worker subscribes the backend's link before it listens; the link reads connected once it listens.
      while (!server.mqtt.connected()) await sleep(5);
      return Date.now();
    },
    problems: () => [],
  };
}

/** `k` node indices spread evenly over `n`. */
function spread(n: number, k: number): number[] {
  if (k <= 0) return [];
  const step = n / k;
  return Array.from({ length: k }, (_, j) => Math.floor(j * step));
}

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
  const brokerName = a.broker === "embedded" ? "the embedded broker thread" : "Mosquitto";
  console.log(`### Fleet through a restart of ${brokerName}: ${fmt(a.nodes)} nodes${a.killAgents > 0 ? `, ${fmt(a.killAgents)} agents killed during the outage` : ""} (${new Date().toISOString()})\n`);
  console.log(`machine load average at start: ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")} (2 cores, shared with other sessions)\n`);
  const stop = a.broker === "embedded" ? "broker thread ended (Worker.terminate), restarted by the service" : `broker stopped by ${a.signal}, down ${a.downS} s`;
  console.log(`nofile limit ${nofile}; ${a.workers} agent processes; ${a.addresses} source addresses; provision: ${a.provision}; ${stop}\n`);
  let server: AppContext | undefined;
  let fleet: Fleet | undefined;
  const mosq = a.broker === "mosquitto" ? await prepareBroker(dir) : null;
  try {
    await timed("seed store (one transaction)", () => seedStore({ file: dbFile, nodes: a.nodes, snapshot: "offline", onlineTtlMs: 2_700_000, detectTimeoutMs: 20_000, perConfig: a.perConfig }));
    await timed("seal broker passwords (vault)", () => sealPasswords(dbFile, dataDir, a.nodes, a.perConfig));
    if (mosq !== null && a.provision === "file") {
      await timed("write node accounts into dynamic-security.json (PBKDF2)", () => writeDynsecAccounts(join(dir, "dynamic-security.json"), a.nodes, a.perConfig));
    }
    if (mosq !== null) await timed("start mosquitto (load accounts)", () => mosq.start());
    const brokerSettings = mosq !== null ? mosquittoSettings(mosq) : { mqttBroker: "embedded" as const, embeddedBrokerHost: "127.0.0.1", embeddedBrokerPort: 0, embeddedBrokerThread: true };
    server = await timed("createServer", () =>
      createServer(
        testSettings({ dataDir, adminPassword: "fleet bench password", ...brokerSettings, detectIntervalMs: 3_600_000 }),
        createLogger(process.env.FLEET_LOG === "1" ? "info" : "silent"),
      ),
    );
    const srv = server;
    if (mosq !== null) {
      await timed(`backend connected + broker reconciled (${a.provision === "backend" ? "creates every account" : "accounts already in sync"})`, () =>
        awaitBackendReady(srv, Math.max(300_000, a.nodes * 20)),
      );
    }
    const under = mosq !== null ? mosquittoUnderTest(mosq, a) : embeddedUnderTest(srv);
    const report = server.mqtt.sync?.state().lastReport;
    // Recv-Q/Send-Q of a listening socket: queued connections / the accept backlog the broker asked for.
    const listen = execFileSync("ss", ["-ltnH", `sport = :${under.port}`], { encoding: "utf8" }).trim();
    const killed = spread(a.nodes, a.killAgents);
    const count = counter(dbFile, killed.map((i) => benchNodeId(i)));
    fleet = startFleet(a, under.port);
    const t0 = Date.now();
    const sampling = { n: a.nodes, count, fleet, brokerPid: () => under.pid(), server };
    const first = await sampleUntil({ ...sampling, since: t0, origin: t0, killed: 0, timeoutMs: Math.max(120_000, a.nodes * 5) });
    phases.push(["first connection of every agent → all online in the store", Date.now() - t0, ""]);
    await sleep(3000);
    const beforeKill = fleet.total();
    const profiler = a.cpuProf ? await startProfile() : undefined;
    const tKill = Date.now();
    await under.crash();
    // Dead hosts: they never reconnect, and the broker that would publish their wills is down.
    for (const c of fleet.children) c.send({ type: "kill", nodes: killed } satisfies ToFleetAgents);
    const tAccept = await under.restart();
    const after = await sampleUntil({ ...sampling, since: tAccept, origin: tAccept, killed: killed.length, timeoutMs: a.timeoutS * 1000 });
    await fleet.freeze();
    await sleep(3000);
    const sessions = await fleet.sessions();
    const end = fleet.total();

    console.log("| phase | ms | |\n|---|---:|---|");
    for (const [label, ms, note] of phases) console.log(`| ${label} | ${fmt(ms)} | ${note} |`);
    console.log(`\nreconcile report: ${JSON.stringify(report)}`);
    console.log(`\nThe broker's listening socket (ss: state, Recv-Q, Send-Q = accept backlog, address): \`${listen.replace(/\s+/g, " ")}\``);
    console.log(`\nbroker killed at +${fmt((tKill - t0) / 1000, 1)} s of the run; accepting again ${fmt((tAccept - tKill) / 1000, 1)} s after the kill`);
    console.log(`agents before kill: ${JSON.stringify(beforeKill)}`);
    console.log(`agents at the end: ${JSON.stringify(end)}`);
    const firstShown = first.samples.filter((_, k) => k % Math.max(1, Math.ceil(first.samples.length / 40)) === 0 || k === first.samples.length - 1);
    printCurve("Initial connection (t from the first agent's start)", { ...first, samples: firstShown }, a.nodes, 0);
    printCurve("After the restart (t from the broker accepting connections)", after, a.nodes, killed.length);
    checks(dbFile, sessions, a.nodes, new Set(killed));
    const problems = under.problems();
    console.log(`\nThe broker logged ${fmt(problems.length)} error/warning lines${problems.length > 0 ? "; first and last:" : "."}`);
    for (const line of [...new Set([...problems.slice(0, 3), ...problems.slice(-3)])]) console.log(`    ${line}`);
    if (profiler !== undefined) await stopProfile(profiler);
  } finally {
    await fleet?.stop();
    await server?.close();
    await mosq?.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
