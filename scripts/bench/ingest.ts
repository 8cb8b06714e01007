/**
 * Ingest benchmarks of the control channel (a benchmark, not a test: it prints markdown tables
 * and asserts nothing).
 *
 *   npx tsx scripts/bench/ingest.ts            # full run (under ~10 minutes on 2 cores)
 *   npx tsx scripts/bench/ingest.ts --quick    # small sizes only, a smoke check (about a minute)
 *   npx tsx scripts/bench/ingest.ts --only upstream,latency,actors,fanout
 *   npx tsx scripts/bench/ingest.ts --prof-dir /tmp/prof   # V8 CPU profile of each measured window
 *     (with `BENCH_HEAP_SAMPLING=1`: an allocation profile instead, `.heapprofile`, objects the
 *      GC already collected included, so it shows where the garbage comes from)
 *   npx tsx scripts/bench/ingest.ts --only upstream --upstream-plans 10000x10000q1,1000x1000q1sse
 *   npx tsx scripts/bench/ingest.ts --only upstream --rounds 3 \
 *     --upstream-plans 1000x1000q1sse,1000x1000q1sse-norec,10000x10000q1,10000x10000q1-noop
 *     (`-norec`: flight recorder off; `-noop`: the router only counts, aedes' own ceiling;
 *      `--rounds N` repeats the list, interleaved; a table compares the modes per plan)
 *   npx tsx scripts/bench/ingest.ts --only upstream --upstream-plans 1000x1000q1sse-ab
 *     (`-ab`: one 60 s window with the flight recorder switched on and off every 500 ms; CPU per
 *      message summed per state, and the median of on ÷ off over adjacent pairs of slices)
 *   npx tsx scripts/bench/ingest.ts --only upstream --upstream-plans 10000x10000q1 --upstream-window 40000
 *     (messages between the agents' write and the router at most, for every custom plan;
 *      default: the plan's node count, between 4,000 and 10,000)
 *   npx tsx scripts/bench/ingest.ts --only latency --rates 500,2000
 *   npx tsx scripts/bench/ingest.ts --only latency --broker mosquitto
 *     (the agents and the service meet at a Mosquitto this run starts, as the fleet bench does,
 *      instead of the embedded aedes; its CPU gets a column of its own)
 *   npx tsx scripts/bench/ingest.ts --only actors --actor-sizes 10000,100000
 *
 * (`node --expose-gc --import tsx scripts/bench/ingest.ts` works too; the measuring processes
 * are always started with `--expose-gc`, plus the flags in the environment variable
 * `BENCH_NODE_FLAGS`, space-separated: `BENCH_NODE_FLAGS=--trace-gc` shows each garbage
 * collection of the service.)
 *
 * Every measurement runs the real service (`createServer`: SQLite store, node actor registry,
 * embedded aedes broker, backend MQTT client, router, SSE hub) in a fresh child process started
 * with `--expose-gc`; simulated agents and SSE consoles run in a second child process
 * (`ingest-agents.ts`) so that they do not share the service's event loop. All traffic stays on
 * 127.0.0.1; every loop is bounded in count and time; temp dirs are removed.
 *
 * 1. Upstream throughput: N bound nodes seeded straight into SQLite (one transaction, before
 *    `createServer`), one MQTT connection per simulated agent, QoS 1 heartbeats in a closed loop
 *    (at most `window` messages between the agents and the router). Rates: messages the router
 *    handled, and node states committed by the registry's group commit.
 * 2. Envelope → SSE latency: one console on `GET /api/v1/events/stream` over real HTTP (admin
 *    login first), heartbeats at a fixed rate alternating wg_online so each one changes state,
 *    from the agent's write to the console reading the matching `endpoint.status.updated`.
 * 3. Heap and RSS per node actor, 4. cold start over persisted snapshots (MQTT disabled, to
 *    isolate the actors; one row with MQTT enabled), 5. one SSE event to many consoles.
 */
import { fork, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { loadSettings, testSettings, type Settings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import type { SsePayloads } from "../../src/events/event-types.js";
import { createServer, type AppContext } from "../../src/server.js";
import {
  awaitQuiet,
  calibrate,
  commitStats,
  countingClock,
  fmt,
  instrumentRegistryCommits,
  loadWindow,
  mib,
  percentile,
  SEED_PER_CONFIG,
  seedStore,
  SwitchedSlices,
  type SliceSummary,
  type FromAgents,
  type LatencySummary,
  type SnapshotKind,
  type ToAgents,
} from "./ingest-lib.js";
import { awaitBackendReady, mosquittoSettings, prepareBroker, sealPasswords, writeDynsecAccounts, type Broker } from "./mosquitto-lib.js";

/** `--broker`: where agents and service meet in the latency phase. */
const BrokerKindSchema = z.enum(["embedded", "mosquitto"]);
type BrokerKind = z.infer<typeof BrokerKindSchema>;

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, "../..");
const SELF = fileURLToPath(import.meta.url);
const AGENTS = join(HERE, "ingest-agents.ts");
const ADMIN_PASSWORD = "bench-admin-password";
const ONLINE_TTL_MS = 2700 * 1000;
const DETECT_TIMEOUT_MS = 20 * 1000;

const argv = process.argv.slice(2);
function flag(name: string): string | undefined {
  const i = argv.findIndex((a) => a === name || a.startsWith(`${name}=`));
  if (i < 0) return undefined;
  const a = argv[i]!;
  return a.includes("=") ? a.slice(a.indexOf("=") + 1) : (argv[i + 1] ?? "");
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function settings(dataDir: string, overrides: Partial<Settings> = {}): Settings {
  return testSettings({
    dataDir,
    adminPassword: ADMIN_PASSWORD,
    logLevel: "silent",
    httpHost: "127.0.0.1",
    embeddedBrokerHost: "127.0.0.1",
    embeddedBrokerPort: 0,
    onlineTtlMs: ONLINE_TTL_MS,
    detectTimeoutMs: DETECT_TIMEOUT_MS,
    // The first detect round runs when the first console connects (all nodes are still offline
    // then, so it sends nothing); the next one would come after the bench is over.
    detectIntervalMs: 3_600_000,
    // SVC_EMBEDDED_BROKER_THREAD=false runs the broker on the main thread (parsed as the service parses it).
    embeddedBrokerThread: loadSettings({ SVC_EMBEDDED_BROKER_THREAD: process.env["SVC_EMBEDDED_BROKER_THREAD"] }).embeddedBrokerThread,
    ...overrides,
  });
}

// ---- child processes -------------------------------------------------------------------------

/** Messages of a child, consumed in order by op. */
class Inbox<M extends { op: string }> {
  readonly #queue: M[] = [];
  readonly #waiters = new Set<() => void>();

  constructor(readonly child: ChildProcess) {
    const wake = () => {
      for (const w of [...this.#waiters]) w();
    };
    child.on("message", (m) => {
      this.#queue.push(m as M);
      wake();
    });
    child.on("exit", wake);
  }

  /** The next message with one of these ops (others are kept). @throws on timeout or exit */
  async next<K extends M["op"]>(op: K | K[], timeoutMs: number): Promise<Extract<M, { op: K }>> {
    const ops: string[] = Array.isArray(op) ? op : [op];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.#queue.findIndex((m) => ops.includes(m.op));
      if (i >= 0) return this.#queue.splice(i, 1)[0] as Extract<M, { op: K }>;
      if (this.child.exitCode !== null || this.child.signalCode !== null) throw new Error(`child exited while waiting for ${ops.join("/")}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${ops.join("/")}`);
      await new Promise<void>((r) => {
        const done = () => {
          clearTimeout(t);
          this.#waiters.delete(done);
          r();
        };
        const t = setTimeout(done, left);
        this.#waiters.add(done);
      });
    }
  }
}

/**
 * With `--prof-dir DIR`, the service process of each phase records a V8 CPU profile of its
 * measured window only (node:inspector), written as `DIR/{phase}-{label}.cpuprofile`
 * (open in Chrome DevTools or speedscope). With `BENCH_HEAP_SAMPLING=1` it records a sampling
 * allocation profile instead (`.heapprofile`, one sample per 4,096 bytes on average, objects
 * collected by minor and major GCs included).
 */
async function profile(label: string): Promise<() => Promise<void>> {
  const dir = flag("--prof-dir");
  if (!dir) return async () => undefined;
  const session = new Session();
  session.connect();
  if (process.env.BENCH_HEAP_SAMPLING === "1") {
    // Allocation sampling, collected objects included: where the garbage comes from.
    await session.post("HeapProfiler.enable");
    await session.post("HeapProfiler.startSampling", { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never);
    return async () => {
      const { profile: prof } = await session.post("HeapProfiler.stopSampling");
      mkdirSync(resolve(dir), { recursive: true });
      writeFileSync(join(resolve(dir), `${phase ?? "main"}-${label}.heapprofile`), JSON.stringify(prof));
      session.disconnect();
    };
  }
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 1000 });
  await session.post("Profiler.start");
  return async () => {
    const { profile: prof } = await session.post("Profiler.stop");
    mkdirSync(resolve(dir), { recursive: true });
    writeFileSync(join(resolve(dir), `${phase ?? "main"}-${label}.cpuprofile`), JSON.stringify(prof));
    session.disconnect();
  };
}

function startAgents(): { child: ChildProcess; inbox: Inbox<FromAgents>; send: (m: ToAgents) => void } {
  const child = fork(AGENTS, [], { cwd: ROOT, execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const inbox = new Inbox<FromAgents>(child);
  return { child, inbox, send: (m) => child.connected && child.send(m) };
}

async function stopAgents(a: ReturnType<typeof startAgents>): Promise<void> {
  a.send({ op: "close" });
  await a.inbox.next("closed", 10_000).catch(() => undefined);
  await waitExit(a.child, 3000);
}

async function waitExit(child: ChildProcess, ms: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((r) => (timer = setTimeout(() => r(true), ms)));
  const late = await Promise.race([exited.then(() => false), timedOut]);
  clearTimeout(timer);
  if (!late) return;
  child.kill("SIGKILL");
  await exited;
}

/** What every phase result carries besides its own fields. */
interface PhaseMeta {
  /** {@link calibrate} before and after the phase, µs (higher: a slower, more contended CPU). */
  refUs: [number, number];
}

function ref(m: PhaseMeta): string {
  return `${fmt(m.refUs[0], 1)} / ${fmt(m.refUs[1], 1)}`;
}

/** How long to wait for a quiet machine before each measurement. */
let quietWaitMs = 8000;
/** Retries of a measurement whose window saw other processes use more than 0.3 core. */
let retryBudget = { attempts: 2, minutes: 4.5, untilMs: 0 };
const CLEAN_CORES = 0.3;

/**
 * Runs a phase; while other processes used more than {@link CLEAN_CORES} during its measured
 * window and the retry budget (count and wall time) allows, runs it again. Keeps the cleanest.
 */
async function measured<R extends PhaseMeta>(
  phaseName: string,
  params: unknown,
  timeoutMs: number,
  otherCores: (r: R) => number,
): Promise<R & { background: number; attempts: number }> {
  let best: (R & { background: number; attempts: number }) | undefined;
  for (let attempt = 1; ; attempt++) {
    const r = await runPhase<R>(phaseName, params, timeoutMs);
    if (best === undefined || otherCores(r) < otherCores(best)) best = { ...r, attempts: attempt };
    else best.attempts = attempt;
    if (otherCores(best) <= CLEAN_CORES || attempt > retryBudget.attempts || performance.now() > retryBudget.untilMs) return best;
  }
}

/**
 * Runs one phase in a fresh `node --expose-gc --import tsx` process, after waiting (bounded) for
 * the machine to be quiet; resolves with its result plus the background load seen before it.
 */
async function runPhase<R>(phase: string, params: unknown, timeoutMs: number): Promise<R & PhaseMeta & { background: number }> {
  const background = await awaitQuiet(0.25, quietWaitMs);
  const profDir = flag("--prof-dir");
  const child = fork(SELF, ["--phase", phase, ...(profDir ? ["--prof-dir", resolve(profDir)] : [])], {
    cwd: ROOT,
    execArgv: ["--expose-gc", ...(process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean), "--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const inbox = new Inbox<{ op: "result"; result: R & PhaseMeta } | { op: "error"; message: string }>(child);
  child.send({ params });
  try {
    const first = await inbox.next(["result", "error"], timeoutMs);
    if (first.op === "error") throw new Error(`${phase}: ${first.message}`);
    return { ...first.result, background };
  } finally {
    await waitExit(child, 15_000);
  }
}

// ---- phase 1: upstream throughput ------------------------------------------------------------

interface UpstreamParams {
  nodes: number;
  conns: number;
  warmMs: number;
  measureMs: number;
  window: number;
  qos: 0 | 1;
  /**
   * One SSE console connected, and heartbeats alternate wg_online per node so that every one
   * changes the node's projection (commit → `endpoint.status.updated` → console).
   */
  sse: boolean;
  /**
   * `full`: the whole pipeline. `norec`: the same with the flight recorder off (what
   * recording costs, measured in the same run). `noop`: the router's `handle` only counts the
   * message (aedes and the backend link alone: the ceiling the full pipeline is compared against).
   * `ab`: the whole pipeline with the flight recorder switched on and off every
   * {@link AB_SLICE_MS} inside the one measured window, CPU per message summed per state
   * (the on/off difference measured under the same machine load, not in separate runs).
   */
  mode: UpstreamMode;
}

type UpstreamMode = "full" | "norec" | "noop" | "ab";

/** Slice of the `ab` mode's window with the recorder in one state, ms. */
const AB_SLICE_MS = 500;

interface UpstreamResult extends UpstreamParams {
  connected: number;
  connectMs: number;
  sseFramesPerS: number;
  connectErrors: string[];
  routerPerS: number;
  rowsPerS: number;
  flushesPerS: number;
  rowsPerFlush: number;
  flushMsAvg: number;
  flushMsMax: number;
  flushSharePct: number;
  serverCpuPct: number;
  /** Service CPU (all its threads) per message handled, µs. */
  cpuUsPerMsg: number;
  agentCpuPct: number;
  otherCores: number;
  stealPct: number;
  eldP99Ms: number;
  dropped: Record<string, number>;
  online: number;
  timersArmedPerMsg: number;
  rssMiB: number;
  heapMiB: number;
  /**
   * `ab` mode: service CPU per message with the recorder on / off over the whole window, µs; the
   * slices; and the median and quartiles of on ÷ off over adjacent pairs of slices (each pair saw
   * nearly the same machine, so bursts of other load cancel out).
   */
  ab?: AbResult;
}

/**
 * The `ab` mode's window: the recorder switched on and off every {@link AB_SLICE_MS} (on first),
 * this process's CPU time and the router's messages summed per state.
 */
async function alternateRecorder(server: AppContext, ms: number): Promise<AbResult> {
  const slices = new SwitchedSlices(server.router);
  const end = performance.now() + ms;
  for (let on = true; performance.now() < end || !on; on = !on) {
    server.registry.recording = on;
    await slices.slice(on, AB_SLICE_MS);
  }
  server.registry.recording = true;
  return slices.summary();
}

/** What the `ab` mode measured (see {@link alternateRecorder}). */
type AbResult = SliceSummary;

async function upstreamPhase(p: UpstreamParams): Promise<UpstreamResult> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-ingest-"));
  let server: AppContext | undefined;
  let agents: ReturnType<typeof startAgents> | undefined;
  let credit: NodeJS.Timeout | undefined;
  try {
    const specs = await seedStore({
      file: join(dataDir, "svc.db"),
      nodes: p.nodes,
      snapshot: "offline",
      onlineTtlMs: ONLINE_TTL_MS,
      detectTimeoutMs: DETECT_TIMEOUT_MS,
    });
    instrumentRegistryCommits();
    const clock = countingClock();
    agents = startAgents();
    if (p.sse) {
      const s = await serverWithConsole(dataDir, {}, clock);
      server = s.server;
      agents.send({ op: "sse", url: s.url, token: s.token, n: 1, raw: false });
      if ((await agents.inbox.next("sse-ready", 30_000)).n !== 1) throw new Error("the SSE console did not open");
    } else {
      server = await createServer(settings(dataDir), createLogger("silent"), { clock });
    }
    const hub = server.hub;
    if (p.mode === "norec") server.registry.recording = false;
    if (p.mode === "noop") {
      const counted = server.router;
      counted.handle = () => {
        counted.received++;
        return true;
      };
    }
    agents.send({ op: "connect", port: server.mqtt.broker!.port, agents: specs.slice(0, p.conns), concurrency: 128 });
    const conn = await agents.inbox.next("connected", 120_000);
    const router = server.router;
    const a = agents;
    credit = setInterval(() => a.send({ op: "credit", handled: router.received }), 5);
    agents.send({ op: "flood", window: p.window, qos: p.qos, toggle: p.sse });
    await sleep(p.warmMs);

    const eld = monitorEventLoopDelay({ resolution: 5 });
    eld.enable();
    const r0 = router.received;
    const published0 = hub.metrics().published;
    const c0 = { ...commitStats };
    commitStats.maxFlushNs = 0n;
    const armed0 = clock.armed;
    const stopProfile = await profile(`${p.nodes}n-${p.conns}c-qos${p.qos}${p.sse ? "-sse" : ""}-${p.mode}`);
    const load = loadWindow([agents.child.pid]);
    const t0 = performance.now();
    const ab = p.mode === "ab" ? await alternateRecorder(server, p.measureMs) : undefined;
    if (ab === undefined) await sleep(p.measureMs);
    const dt = (performance.now() - t0) / 1000;
    const used = load();
    await stopProfile();
    const received = router.received - r0;
    const published = hub.metrics().published - published0;
    const rows = commitStats.rows - c0.rows;
    const flushes = commitStats.writingFlushes - c0.writingFlushes;
    const flushNs = Number(commitStats.flushNs - c0.flushNs);
    const armed = clock.armed - armed0;
    eld.disable();
    const mem = process.memoryUsage();

    agents.send({ op: "halt" });
    const halted = await agents.inbox.next("halted", 10_000);
    clearInterval(credit);
    credit = undefined;
    // Let the router and the registry catch up with what is in flight (bounded).
    const drainEnd = Date.now() + 10_000;
    while (router.received < halted.sent && Date.now() < drainEnd) await sleep(20);
    await sleep(50);
    let online = 0;
    for (const { projection } of server.registry.projections()) if (projection.presence === "online") online++;
    return {
      ...p,
      connected: conn.ok,
      connectMs: conn.ms,
      connectErrors: conn.errors,
      sseFramesPerS: published / dt,
      routerPerS: received / dt,
      rowsPerS: rows / dt,
      flushesPerS: flushes / dt,
      rowsPerFlush: flushes === 0 ? 0 : rows / flushes,
      flushMsAvg: flushes === 0 ? 0 : flushNs / 1e6 / flushes,
      flushMsMax: Number(commitStats.maxFlushNs) / 1e6,
      flushSharePct: (flushNs / 1e9 / dt) * 100,
      serverCpuPct: used.selfCores * 100,
      cpuUsPerMsg: received === 0 ? Number.NaN : (used.selfCores * used.seconds * 1e6) / received,
      agentCpuPct: used.pidsCores * 100,
      otherCores: used.otherCores,
      stealPct: used.stealPct,
      eldP99Ms: eld.percentile(99) / 1e6,
      dropped: Object.fromEntries(router.dropped),
      online,
      timersArmedPerMsg: received === 0 ? 0 : armed / received,
      rssMiB: mem.rss / 2 ** 20,
      heapMiB: mem.heapUsed / 2 ** 20,
      ...(ab === undefined ? {} : { ab }),
    };
  } finally {
    if (credit) clearInterval(credit);
    if (agents) await stopAgents(agents);
    await server?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// ---- phase 2: envelope → SSE latency ---------------------------------------------------------

interface LatencyParams {
  nodes: number;
  rates: number[];
  /** The broker the agents and the service meet at (`--broker`): the embedded aedes, or a Mosquitto this phase starts. */
  broker: BrokerKind;
  durationMs: number;
  /** After each run, how long to wait for the frames of heartbeats still in flight. */
  drainMs: number;
}

interface LatencyRow extends LatencySummary {
  serverCpuPct: number;
  /** Mosquitto's CPU in the window (%; null with the embedded broker, whose CPU is the service's). */
  brokerCpuPct: number | null;
  cpuUsPerMsg: number;
  otherCores: number;
  stealPct: number;
  eldP99Ms: number;
  sseFramesPublished: number;
  /** Consoles the hub dropped for not reading (its bounded per-subscriber queue overflowed). */
  sseDropped: number;
}

interface LatencyResult {
  nodes: number;
  broker: BrokerKind;
  connected: number;
  warmSeen: number;
  warmMs: number;
  rows: LatencyRow[];
}

async function serverWithConsole(
  dataDir: string,
  overrides: Partial<Settings>,
  clock = countingClock(),
): Promise<{ server: AppContext; url: string; token: string }> {
  const server = await createServer(settings(dataDir, overrides), createLogger("silent"), { clock });
  const base = await server.app.listen({ host: "127.0.0.1", port: 0 });
  const login = await fetch(`${base}/api/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ password: ADMIN_PASSWORD }),
  });
  if (login.status !== 200) throw new Error(`login answered ${login.status}`);
  const token = ((await login.json()) as { access_token: string }).access_token;
  return { server, url: `${base}/api/v1/events/stream`, token };
}

/**
 * With `--broker mosquitto`: a Mosquitto with dynamic security on a free port, holding the seeded
 * nodes' accounts (and their passwords sealed in the service's vault, as binds leave them), and
 * the service's settings for it (scripts/bench/mosquitto-lib.ts, as the fleet bench).
 */
async function startMosquitto(dataDir: string, nodes: number): Promise<{ broker: Broker; overrides: Partial<Settings> }> {
  const dir = join(dataDir, "mosquitto");
  mkdirSync(dir);
  const broker = await prepareBroker(dir);
  sealPasswords(join(dataDir, "svc.db"), dataDir, nodes, SEED_PER_CONFIG);
  writeDynsecAccounts(join(dir, "dynamic-security.json"), nodes, SEED_PER_CONFIG);
  await broker.start();
  return { broker, overrides: mosquittoSettings(broker) };
}

async function latencyPhase(p: LatencyParams): Promise<LatencyResult> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-ingest-"));
  let server: AppContext | undefined;
  let agents: ReturnType<typeof startAgents> | undefined;
  let mosquitto: Broker | undefined;
  try {
    const specs = await seedStore({
      file: join(dataDir, "svc.db"),
      nodes: p.nodes,
      snapshot: "offline",
      onlineTtlMs: ONLINE_TTL_MS,
      detectTimeoutMs: DETECT_TIMEOUT_MS,
    });
    const external = p.broker === "mosquitto" ? await startMosquitto(dataDir, p.nodes) : null;
    mosquitto = external?.broker;
    instrumentRegistryCommits();
    const s = await serverWithConsole(dataDir, external?.overrides ?? {});
    server = s.server;
    // With Mosquitto: the backend's subscriptions are in place and the accounts reconciled (all in sync already).
    if (external !== null) await awaitBackendReady(server, 30_000);
    agents = startAgents();
    // The console first (nodes all offline: the detect round it starts sends nothing).
    agents.send({ op: "sse", url: s.url, token: s.token, n: 1, raw: false });
    const ready = await agents.inbox.next("sse-ready", 30_000);
    if (ready.n !== 1) throw new Error("the SSE console did not open");
    agents.send({ op: "connect", port: mosquitto?.port ?? server.mqtt.broker!.port, agents: specs, concurrency: 128 });
    const conn = await agents.inbox.next("connected", 120_000);
    agents.send({ op: "warm", rate: 5000, timeoutMs: 30_000 });
    const warm = await agents.inbox.next("warm-done", 40_000);
    const rows: LatencyRow[] = [];
    for (const [window, rate] of p.rates.entries()) {
      await sleep(500);
      const eld = monitorEventLoopDelay({ resolution: 5 });
      eld.enable();
      const published0 = server.hub.metrics().published;
      const dropped0 = server.hub.metrics().dropped;
      const stopProfile = await profile(`${p.nodes}n-${rate}per-s-w${window + 1}`);
      const load = loadWindow([agents.child.pid]);
      const brokerLoad = mosquitto ? loadWindow([mosquitto.pid()]) : null;
      agents.send({ op: "rate", rate, durationMs: p.durationMs, drainMs: p.drainMs });
      const done = await agents.inbox.next("rate-done", p.durationMs + p.drainMs + 20_000);
      const used = load();
      const brokerUsed = brokerLoad?.() ?? null;
      await stopProfile();
      eld.disable();
      rows.push({
        ...done.summary,
        agentCpuPct: used.pidsCores * 100,
        brokerCpuPct: brokerUsed === null ? null : brokerUsed.pidsCores * 100,
        // Mosquitto is part of the measured pipeline, not other load.
        otherCores: Math.max(0, used.otherCores - (brokerUsed?.pidsCores ?? 0)),
        stealPct: used.stealPct,
        serverCpuPct: used.selfCores * 100,
        cpuUsPerMsg: done.summary.sent === 0 ? Number.NaN : (used.selfCores * used.seconds * 1e6) / done.summary.sent,
        eldP99Ms: eld.percentile(99) / 1e6,
        sseFramesPublished: server.hub.metrics().published - published0,
        sseDropped: server.hub.metrics().dropped - dropped0,
      });
    }
    return { nodes: p.nodes, broker: p.broker, connected: conn.ok, warmSeen: warm.seen, warmMs: warm.ms, rows };
  } finally {
    if (agents) await stopAgents(agents);
    await server?.close();
    await mosquitto?.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// ---- phases 3 and 4: actors' memory, cold start -----------------------------------------------

interface ActorsParams {
  label: string;
  file: string | null;
  nodes: number;
  snapshot: SnapshotKind;
  mqtt: boolean;
}

interface ActorsResult extends ActorsParams {
  createServerMs: number;
  /** CPU time of the service process (all threads) during createServer, ms. */
  createServerCpuMs: number;
  otherCores: number;
  flushMs: number;
  flushRows: number;
  registrySize: number;
  liveTimers: number;
  /** Online nodes whose TTL deadline the registry's presence sweep holds. */
  sweepTracked: number;
  heapDelta: number;
  rssDelta: number;
  heapAfter: number;
  rssAfter: number;
}

function fullGc(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) for (let i = 0; i < 3; i++) gc();
}

async function actorsPhase(p: ActorsParams): Promise<ActorsResult> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-ingest-"));
  let server: AppContext | undefined;
  try {
    const dbFile = join(dataDir, "svc.db");
    if (p.file !== null) copyFileSync(p.file, dbFile);
    instrumentRegistryCommits();
    const clock = countingClock();
    fullGc();
    await sleep(50);
    fullGc();
    const m0 = process.memoryUsage();
    const c0 = { ...commitStats };
    const stopProfile = await profile(`${p.nodes}n-${p.snapshot}-${p.mqtt ? "mqtt" : "nomqtt"}`);
    const load = loadWindow();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    server = await createServer(settings(dataDir, { mqttEnabled: p.mqtt }), createLogger("silent"), { clock, dbFile });
    const createServerMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const createServerCpuMs = (cpu.user + cpu.system) / 1000;
    const otherCores = load().otherCores;
    await stopProfile();
    const registrySize = server.registry.size;
    const flushMs = Number(commitStats.flushNs - c0.flushNs) / 1e6;
    const flushRows = commitStats.rows - c0.rows;
    // Let the spawn-time follow-up flush (setImmediate) run, then measure what stays.
    await sleep(100);
    const liveTimers = clock.live.size;
    const sweepTracked = server.registry.stats().sweepTracked;
    fullGc();
    await sleep(50);
    fullGc();
    const m1 = process.memoryUsage();
    return {
      ...p,
      createServerMs,
      createServerCpuMs,
      otherCores,
      flushMs,
      flushRows,
      registrySize,
      liveTimers,
      sweepTracked,
      heapDelta: m1.heapUsed - m0.heapUsed,
      rssDelta: m1.rss - m0.rss,
      heapAfter: m1.heapUsed,
      rssAfter: m1.rss,
    };
  } finally {
    await server?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// ---- phase 5: one SSE event to many consoles --------------------------------------------------

interface FanoutParams {
  subscribers: number;
  reps: number;
  /** Console processes the subscribers are spread over. */
  procs: number;
}

interface FanoutResult extends FanoutParams {
  opened: number;
  openMs: number;
  complete: number;
  allReadMs: number[];
  medianReadMs: number[];
  firstReadMs: number[];
  publishSyncMs: number[];
  /** From the call until a setImmediate queued right after it runs: the deferred socket writes (http corks, uncorks on nextTick) included. */
  publishWritesMs: number[];
  serviceCores: number;
  agentsCores: number;
  otherCores: number;
}

async function fanoutPhase(p: FanoutParams): Promise<FanoutResult> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-ingest-"));
  let server: AppContext | undefined;
  const procs: Array<ReturnType<typeof startAgents>> = [];
  try {
    const s = await serverWithConsole(dataDir, { mqttEnabled: false });
    server = s.server;
    const t0 = performance.now();
    for (let i = 0; i < p.procs; i++) {
      const a = startAgents();
      procs.push(a);
      const n = Math.floor(p.subscribers / p.procs) + (i < p.subscribers % p.procs ? 1 : 0);
      a.send({ op: "sse", url: s.url, token: s.token, n, raw: true });
    }
    let opened = 0;
    for (const a of procs) opened += (await a.inbox.next("sse-ready", 60_000)).n;
    const ready = { n: opened, ms: performance.now() - t0 };
    const hub = server.hub;
    const until = Date.now() + 10_000;
    while (hub.subscriberCount() < ready.n && Date.now() < until) await sleep(10);
    await sleep(200);
    // A realistic payload: what the notifier sends for a heartbeat that changed a node.
    const status: SsePayloads["endpoint.status.updated"]["status"] = {
      config_id: "cfg-b00000",
      node_id: "node-b0000000",
      mode: "dynamic",
      effective_mode: "dynamic",
      client_initialized: true,
      client_presence_state: "online",
      runtime_state: "running",
      last_reachable_at: null,
      client_version: "1.2.3",
      config_version_state: "latest",
      staged_config: { config_version: 1, config_sha256: "a".repeat(64) },
      confirmed_config: { config_version: 1, config_sha256: "a".repeat(64) },
      mqtt_enabled: true,
    };
    const allReadMs: number[] = [];
    const medianReadMs: number[] = [];
    const firstReadMs: number[] = [];
    const publishSyncMs: number[] = [];
    const publishWritesMs: number[] = [];
    let complete = 0;
    const stopProfile = await profile(`${p.subscribers}`);
    const load = loadWindow(procs.map((a) => a.child.pid));
    for (let seq = 1; seq <= p.reps; seq++) {
      await sleep(50);
      const t0 = process.hrtime.bigint();
      // The typed payload plus two bench keys the subscribers time the fan-out with.
      const payload = { config_id: status.config_id, node_id: status.node_id, status, bench_seq: seq, bench_t0: String(t0) };
      hub.publish("endpoint.status.updated", payload);
      publishSyncMs.push(Number(process.hrtime.bigint() - t0) / 1e6);
      await new Promise<void>((r) => setImmediate(r));
      publishWritesMs.push(Number(process.hrtime.bigint() - t0) / 1e6);
      const delays: number[] = [];
      for (const a of procs) delays.push(...(await a.inbox.next("fanout", 10_000)).delaysUs);
      delays.sort((a, b) => a - b);
      if (delays.length === ready.n) complete++;
      allReadMs.push((delays[delays.length - 1] ?? Number.NaN) / 1000);
      medianReadMs.push(percentile(delays, 50) / 1000);
      firstReadMs.push((delays[0] ?? Number.NaN) / 1000);
    }
    const used = load();
    await stopProfile();
    return {
      ...p,
      opened: ready.n,
      openMs: ready.ms,
      complete,
      allReadMs,
      medianReadMs,
      firstReadMs,
      publishSyncMs,
      publishWritesMs,
      serviceCores: used.selfCores,
      agentsCores: used.pidsCores,
      otherCores: used.otherCores,
    };
  } finally {
    await Promise.all(procs.map((a) => stopAgents(a)));
    await server?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * Per plan (nodes, connections, QoS, console), the runs of each mode side by side: the full
 * pipeline's msgs/s against the no-op router's (target ≥ 0.8×), and service CPU per
 * message with the flight recorder on against off (target ≤ +5 %). Means over the runs.
 */
function printUpstreamComparison(rows: UpstreamResult[]): void {
  const groups = new Map<string, Map<UpstreamMode, UpstreamResult[]>>();
  for (const r of rows) {
    const k = `${fmt(r.nodes)} / ${fmt(r.conns)} / QoS ${r.qos} / ${r.sse ? "console" : "no console"}`;
    const g = groups.get(k) ?? new Map<UpstreamMode, UpstreamResult[]>();
    groups.set(k, g);
    g.set(r.mode, [...(g.get(r.mode) ?? []), r]);
  }
  const modes = (g: Map<UpstreamMode, UpstreamResult[]>) => [...g.keys()];
  if (![...groups.values()].some((g) => modes(g).length > 1 || g.has("ab"))) return;
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const runs = (rs: UpstreamResult[] | undefined, f: (r: UpstreamResult) => number) =>
    rs === undefined ? "—" : `${rs.map((r) => fmt(f(r))).join(", ")} (mean ${fmt(mean(rs.map(f)))})`;
  console.log("\n### Modes compared (same run; runs listed in order)\n");
  console.log("| nodes / connections / QoS / console | full: msgs/s | no-op router: msgs/s | full ÷ no-op | full: CPU µs/msg | recorder off: CPU µs/msg | recorder on vs off | no-op: CPU µs/msg |");
  console.log("|---|---|---|---:|---|---|---:|---|");
  for (const [k, g] of groups) {
    const full = g.get("full");
    const noop = g.get("noop");
    const norec = g.get("norec");
    for (const r of g.get("ab") ?? []) {
      if (r.ab === undefined) continue;
      console.log(
        `| ${k} | recorder switched every ${AB_SLICE_MS} ms in one window (${r.ab.slices} slices): on ${fmt(r.ab.onUs, 1)} µs/msg, off ${fmt(r.ab.offUs, 1)} µs/msg (sums: ${fmt((r.ab.onUs / r.ab.offUs - 1) * 100, 1)} %) | | | | | **${fmt((r.ab.pairedMedian - 1) * 100, 1)} %** (median of adjacent on/off pairs; quartiles ${fmt((r.ab.pairedQ1 - 1) * 100, 1)} … ${fmt((r.ab.pairedQ3 - 1) * 100, 1)} %) | |`,
      );
    }
    const ratio = full && noop ? `**${fmt(mean(full.map((r) => r.routerPerS)) / mean(noop.map((r) => r.routerPerS)), 2)}×**` : "—";
    const rec = full && norec ? `**${fmt((mean(full.map((r) => r.cpuUsPerMsg)) / mean(norec.map((r) => r.cpuUsPerMsg)) - 1) * 100, 1)} %**` : "—";
    console.log(
      `| ${k} | ${runs(full, (r) => r.routerPerS)} | ${runs(noop, (r) => r.routerPerS)} | ${ratio} | ${runs(full, (r) => r.cpuUsPerMsg)} | ${runs(norec, (r) => r.cpuUsPerMsg)} | ${rec} | ${runs(noop, (r) => r.cpuUsPerMsg)} |`,
    );
  }
}

// ---- phase dispatch (child side) --------------------------------------------------------------

const phase = flag("--phase");
if (phase !== undefined) {
  // The orchestrator went away (Ctrl-C, crash): do not linger with a listening service.
  let finished = false;
  process.on("disconnect", () => {
    if (!finished) process.exit(1);
  });
  const params = await new Promise<unknown>((r) => process.once("message", (m) => r((m as { params: unknown }).params)));
  try {
    const refBefore = calibrate();
    const r =
      phase === "upstream"
        ? await upstreamPhase(params as UpstreamParams)
        : phase === "latency"
          ? await latencyPhase(params as LatencyParams)
          : phase === "actors"
            ? await actorsPhase(params as ActorsParams)
            : phase === "fanout"
              ? await fanoutPhase(params as FanoutParams)
              : Promise.reject(new Error(`unknown phase ${phase}`));
    const result: PhaseMeta = { ...(r as object), refUs: [refBefore, calibrate()] };
    process.send?.({ op: "result", result });
  } catch (err) {
    process.send?.({ op: "error", message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  }
  finished = true;
  process.disconnect?.();
  // Whatever is left (unref'd timers, sockets being torn down) must not keep the phase alive.
  setTimeout(() => process.exit(0), 2000).unref();
} else {
  await orchestrate();
}

// ---- orchestrator -----------------------------------------------------------------------------

async function orchestrate(): Promise<void> {
  const quick = argv.includes("--quick");
  quietWaitMs = quick ? 1000 : 5000;
  // Re-measure contended windows only while the whole run stays within its time budget.
  const minutes = quick ? 0 : 4.5;
  retryBudget = { attempts: quick ? 0 : 2, minutes, untilMs: performance.now() + minutes * 60_000 };
  const only = new Set((flag("--only") ?? "upstream,latency,actors,fanout").split(",").map((s) => s.trim()));
  const started = performance.now();
  const os = await import("node:os");
  console.log(`# Ingest benchmark${quick ? " (--quick: small sizes, a smoke check)" : ""}`);
  console.log(
    [
      `\nnode ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), ${fmt(os.totalmem() / 2 ** 30)} GiB.`,
      "The service runs in a fresh `--expose-gc` process per measurement; simulated agents and SSE consoles in a second process; all traffic on 127.0.0.1.",
      `Before each measurement the bench waits up to ${quietWaitMs / 1000} s for the rest of the machine to use < 0.25 core; "other load" gives the cores other processes used *during* the measured window, "steal" the hypervisor's steal time.`,
      `A measurement whose window saw more than ${CLEAN_CORES} core of other load is repeated (at most ${retryBudget.attempts} more times, while the run is under ${fmt(retryBudget.minutes, 1)} min) and the cleanest run is kept ("runs").`,
      '"CPU ref µs": a fixed JSON round-trip workload timed in the measuring process before / after the measurement (lower is faster; it shows how fast this shared VM was at the time).',
    ].join(" "),
  );
  const failures: string[] = [];
  const attempt = async <R>(what: string, fn: () => Promise<R>): Promise<R | undefined> => {
    try {
      return await fn();
    } catch (err) {
      const msg = err instanceof Error ? err.message.split("\n")[0] : String(err);
      failures.push(`${what}: ${msg}`);
      console.error(`! ${what} failed: ${msg}`);
      return undefined;
    }
  };

  // 1. Upstream throughput.
  if (only.has("upstream")) {
    const custom = flag("--upstream-plans");
    const plans: UpstreamParams[] = custom
      ? custom.split(",").map((spec) => {
          // {nodes}x{conns}q{qos}[sse][-norec|-noop|-ab], e.g. 10000x10000q1, 1000x1000q1sse-norec
          const m = /^(\d+)x(\d+)q([01])(sse)?(?:-(norec|noop|ab))?$/.exec(spec.trim());
          if (!m) throw new Error(`bad --upstream-plans entry ${spec}`);
          const nodes = Number(m[1]);
          const mode = (m[5] ?? "full") as UpstreamMode;
          const measureMs = quick ? 2000 : mode === "ab" ? 60_000 : 10_000;
          return { nodes, conns: Number(m[2]), warmMs: quick ? 1000 : 3000, measureMs, window: Number(flag("--upstream-window") ?? Math.max(4000, Math.min(nodes, 10_000))), qos: Number(m[3]) as 0 | 1, sse: m[4] === "sse", mode };
        })
      : quick
      ? [
          { nodes: 1000, conns: 1000, warmMs: 1000, measureMs: 2000, window: 4000, qos: 1, sse: false, mode: "full" },
          { nodes: 1000, conns: 1000, warmMs: 1000, measureMs: 2000, window: 4000, qos: 1, sse: true, mode: "full" },
        ]
      : [
          { nodes: 1000, conns: 1000, warmMs: 3000, measureMs: 10_000, window: 4000, qos: 1, sse: false, mode: "full" },
          { nodes: 10_000, conns: 10_000, warmMs: 4000, measureMs: 10_000, window: 10_000, qos: 1, sse: false, mode: "full" },
          { nodes: 10_000, conns: 10_000, warmMs: 4000, measureMs: 10_000, window: 10_000, qos: 1, sse: false, mode: "noop" },
          { nodes: 10_000, conns: 2000, warmMs: 3000, measureMs: 10_000, window: 10_000, qos: 1, sse: false, mode: "full" },
          { nodes: 10_000, conns: 10_000, warmMs: 4000, measureMs: 10_000, window: 10_000, qos: 0, sse: false, mode: "full" },
          { nodes: 10_000, conns: 10_000, warmMs: 4000, measureMs: 10_000, window: 10_000, qos: 1, sse: true, mode: "full" },
        ];
    const rows: Array<UpstreamResult & PhaseMeta & { attempts: number }> = [];
    // `--rounds N`: the plan list N times over (A B A B …), so variants see the same machine.
    const rounds = Math.max(1, Number(flag("--rounds") ?? 1));
    for (const plan of Array.from({ length: rounds }, () => plans).flat()) {
      const r = await attempt(`upstream ${plan.nodes} nodes / ${plan.conns} connections`, () =>
        measured<UpstreamResult & PhaseMeta>("upstream", plan, 240_000, (x) => x.otherCores),
      );
      if (r) rows.push(r);
    }
    console.log("\n## 1. Upstream throughput (heartbeats through the embedded broker, persist-before-emit)\n");
    console.log(
      [
        "Nodes seeded straight into SQLite (one transaction, before `createServer`): bound, config latest, offline, with real actor snapshots.",
        "One raw MQTT 3.1.1 connection per simulated agent, each with its own credentials and client id (the broker lets a node publish only its own topics), so a connection publishes for its own node only.",
        "Closed loop: the agents write heartbeats round-robin across connections while fewer than `window` are between their write and the router (the service reports `router.received` every 5 ms).",
        "The warm-up brings the nodes online; in the measured window every heartbeat moves the node's `lastSignalAt` (its presence-sweep deadline) and is persisted: without a console only the `last_signal_at` column (nothing else changed), with one the full row.",
        "Without a console the projections do not change (no SSE work); with one, heartbeats alternate wg_online so every commit also builds and sends an `endpoint.status.updated`.",
        "Router msgs/s: `router.received`. Committed states/s: rows written by the registry's persist statement inside its group-commit transactions (counted by wrapping better-sqlite3 in the bench process); fewer than msgs/s when several heartbeats of one node fall into one group commit (coalesced; with a console, two toggles in one commit also cancel out and emit no frame).",
        "Service CPU per msg: CPU time of the service process (all threads, GC helpers included) / messages handled — less sensitive to other load than the rates; the one-core ceiling is about 10⁶ / that many msgs/s.\n",
      ].join(" "),
    );
    console.log(
      "| nodes | agent connections (connected, connect time) | QoS | SSE console, every heartbeat a change | mode | window | router msgs/s | committed states/s | flushes/s | states/flush | flush ms avg / max | main thread in flush | service CPU | service CPU per msg | agents CPU | other load | steal | loop delay p99 ms | online at end | CPU ref µs | runs | target |",
    );
    console.log("|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (const r of rows) {
      const target = r.nodes >= 10_000 ? "≥ 30,000 msgs/s at 10k nodes" : "";
      console.log(
        `| ${fmt(r.nodes)} | ${fmt(r.conns)} (${fmt(r.connected)}, ${fmt(r.connectMs / 1000, 1)} s) | ${r.qos} | ${r.sse ? `yes: ${fmt(r.sseFramesPerS)} frames/s` : "no"} | ${r.mode} | ${fmt(r.window)} | **${fmt(r.routerPerS)}** | **${fmt(r.rowsPerS)}** | ${fmt(r.flushesPerS)} | ${fmt(r.rowsPerFlush, 1)} | ${fmt(r.flushMsAvg, 2)} / ${fmt(r.flushMsMax, 1)} | ${fmt(r.flushSharePct)} % | ${fmt(r.serverCpuPct)} % | ${fmt(r.cpuUsPerMsg)} µs | ${fmt(r.agentCpuPct)} % | ${fmt(r.otherCores, 2)} cores | ${fmt(r.stealPct)} % | ${fmt(r.eldP99Ms, 1)} | ${fmt(r.online)} | ${ref(r)} | ${r.attempts} | ${target} |`,
      );
    }
    for (const r of rows) {
      const drops = Object.entries(r.dropped);
      if (drops.length > 0 || r.connectErrors.length > 0 || r.connected < r.conns) {
        console.log(`\n${fmt(r.nodes)} nodes / ${fmt(r.conns)} connections: drops ${JSON.stringify(r.dropped)}; connect errors: ${r.connectErrors.join("; ") || "none"}.`);
      }
    }
    printUpstreamComparison(rows);
    if (rows.length > 0) {
      console.log(
        `\nService process after each window: ${rows.map((r) => `${fmt(r.nodes)}/${fmt(r.conns)}/QoS ${r.qos}: RSS ${fmt(r.rssMiB)} MiB, heap ${fmt(r.heapMiB)} MiB, ${fmt(r.timersArmedPerMsg, 2)} timers armed per message`).join("; ")}.`,
      );
    }
  }

  // 2. Envelope → SSE latency.
  if (only.has("latency")) {
    const broker = BrokerKindSchema.parse(flag("--broker") ?? "embedded");
    const plan: LatencyParams = quick
      ? { nodes: 200, rates: (flag("--rates") ?? "1000").split(",").map(Number), durationMs: 2000, drainMs: 2000, broker }
      : { nodes: 2000, rates: (flag("--rates") ?? "500,2000,5000,10000").split(",").map(Number), durationMs: 5000, drainMs: 15_000, broker };
    const r = await attempt("latency", () =>
      measured<LatencyResult & PhaseMeta>("latency", plan, 300_000, (x) => Math.max(0, ...x.rows.map((row) => row.otherCores))),
    );
    console.log("\n## 2. Envelope → SSE latency (one console over real HTTP)\n");
    if (r) {
      console.log(
        [
          `Broker: ${r.broker === "mosquitto" ? "Mosquitto (a separate process; its CPU is in its own column), the service connected to it as the backend client" : "the embedded aedes"}.`,
          `${fmt(r.connected)} agents (one MQTT connection each, QoS 1) publish heartbeats round-robin at a fixed rate, alternating wg_online per node so that every heartbeat changes runtime_state and yields one \`endpoint.status.updated\` (each node gets one heartbeat every ${fmt(r.connected)}/rate s).`,
          "One console logged in with `POST /api/v1/auth/login` reads `GET /api/v1/events/stream` in the agents' process. Latency: the agent's socket write → the console has read the matching frame (same process, same clock).",
          `Warm-up: ${fmt(r.warmSeen)} nodes online in ${fmt(r.warmMs)} ms (the console connected first, so the detect round it triggers finds every node offline and sends nothing).`,
          `CPU reference before / after: ${ref(r)} µs; runs: ${r.attempts}.`,
          '"Unmatched": heartbeats without a frame of their own (two changes of one node coalesced into one commit, or the frame already showed a later state, or the console was dropped); "achieved" < offered means the agents could not write as fast (back-pressure). "Console dropped": the hub cut the console off because it fell more than its per-subscriber queue limit (1 MiB) behind (spec §6.5: a subscriber that does not read is bounded and dropped).\n',
        ].join(" "),
      );
      console.log(
        "| offered msgs/s | achieved msgs/s | sent | frames read | matched | unmatched | p50 ms | p90 ms | p99 ms | max ms | service CPU | service CPU per msg | Mosquitto CPU | agents+console CPU | other load | steal | loop delay p99 ms | console dropped | target |",
      );
      console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
      for (const x of r.rows) {
        console.log(
          `| ${fmt(x.rate)} | ${fmt(x.achievedRate)} | ${fmt(x.sent)} | ${fmt(x.frames)} | ${fmt(x.matched)} | ${fmt(x.unmatched)} | ${fmt(x.p50, 2)} | ${fmt(x.p90, 2)} | **${fmt(x.p99, 2)}** | ${fmt(x.max, 1)} | ${fmt(x.serverCpuPct)} % | ${fmt(x.cpuUsPerMsg)} µs | ${x.brokerCpuPct === null ? "—" : `${fmt(x.brokerCpuPct)} %`} | ${fmt(x.agentCpuPct)} % | ${fmt(x.otherCores, 2)} cores | ${fmt(x.stealPct)} % | ${fmt(x.eldP99Ms, 1)} | ${fmt(x.sseDropped)} | ${x.rate >= 10_000 ? "p99 ≤ 10 ms at 10k msgs/s" : ""} |`,
        );
      }
    }
  }

  // 3 and 4. Actors: memory and cold start.
  if (only.has("actors")) {
    const sizes = (flag("--actor-sizes") ?? (quick ? "5000" : "10000,100000")).split(",").map(Number);
    const seedDir = mkdtempSync(join(tmpdir(), "svc-bench-seed-"));
    const rows: Array<ActorsResult & PhaseMeta & { attempts: number }> = [];
    try {
      const seed = async (n: number, kind: SnapshotKind) => {
        const file = join(seedDir, `seed-${n}-${kind}.db`);
        const t0 = performance.now();
        await seedStore({ file, nodes: n, snapshot: kind, onlineTtlMs: ONLINE_TTL_MS, detectTimeoutMs: DETECT_TIMEOUT_MS });
        return { file, ms: performance.now() - t0 };
      };
      const plans: ActorsParams[] = [{ label: "baseline (no nodes)", file: null, nodes: 0, snapshot: "none", mqtt: false }];
      const seedTimes: string[] = [];
      for (const n of sizes) {
        const fresh = await seed(n, "none");
        const online = await seed(n, "online");
        seedTimes.push(`${fmt(n)}: ${fmt(fresh.ms)} / ${fmt(online.ms)} ms`);
        plans.push({ label: "fresh actors (no snapshot)", file: fresh.file, nodes: n, snapshot: "none", mqtt: false });
        // MQTT on: only then does time move node state (the presence sweep; spec §1.7).
        plans.push({ label: "restored online (TTL re-armed)", file: online.file, nodes: n, snapshot: "online", mqtt: true });
      }
      const largest = sizes[sizes.length - 1]!;
      if (!quick) plans.push({
        label: "restored online, MQTT disabled (nothing re-armed)",
        file: join(seedDir, `seed-${largest}-online.db`),
        nodes: largest,
        snapshot: "online",
        mqtt: false,
      });
      for (const plan of plans) {
        const r = await attempt(`actors ${plan.label} ${plan.nodes}`, () =>
          measured<ActorsResult & PhaseMeta>("actors", plan, 180_000, (x) => x.otherCores),
        );
        if (r) rows.push(r);
      }
      const base = rows.find((r) => r.nodes === 0);
      console.log("\n## 3. Service heap and RSS per node actor\n");
      console.log(
        [
          "`process.memoryUsage()` after three `global.gc()` calls, before and after `createServer` (MQTT as in the cold-start table) in a fresh process;",
          "per node = (delta − delta of the no-node baseline) / nodes.",
          `Baseline: heap +${base ? mib(base.heapDelta) : "n/a"} MiB, RSS +${base ? mib(base.rssDelta) : "n/a"} MiB. Seeding (fresh / online), not measured: ${seedTimes.join("; ")}.\n`,
        ].join(" "),
      );
      console.log("| actors | nodes | heap after (MiB) | RSS after (MiB) | heap per node | RSS per node | target |");
      console.log("|---|---:|---:|---:|---:|---:|---|");
      for (const r of rows) {
        if (r.nodes === 0) continue;
        const heapPer = (r.heapDelta - (base?.heapDelta ?? 0)) / r.nodes;
        const rssPer = (r.rssDelta - (base?.rssDelta ?? 0)) / r.nodes;
        console.log(
          `| ${r.label} | ${fmt(r.nodes)} | ${mib(r.heapAfter)} | ${mib(r.rssAfter)} | **${fmt(heapPer / 1024, 2)} KiB** | ${fmt(rssPer / 1024, 2)} KiB | ≤ 10 KiB heap per node |`,
        );
      }
      console.log("\n## 4. Cold start over persisted snapshots\n");
      console.log(
        [
          "`createServer` over a store whose nodes carry snapshots made by a real node actor (`getPersistedSnapshot()`: bound, config latest, online, last heartbeat up to 30 min old),",
          "so every actor is restored and its online-TTL deadline goes under the registry's presence sweep (\"TTL deadlines re-armed\": nodes the sweep holds; one clock timer serves them all, \"live timers\" counts every timer armed through the service clock and not yet fired or cleared).",
          "Restored rows run with MQTT enabled (embedded broker + backend link), because only then does time move node state (spec §1.7); the last row shows MQTT disabled, where nothing is re-armed.",
          "\"First flush\": the registry's group commit inside `registry.start()` (restored actors are not written back).\n",
        ].join(" "),
      );
      console.log("| store | nodes | MQTT | createServer ms | service CPU ms (all threads) | of which first flush ms (rows) | registry.size | TTL deadlines re-armed | live timers | other load | CPU ref µs | runs | target |");
      console.log("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
      for (const r of rows) {
        const target = r.nodes >= 100_000 && r.snapshot === "online" && r.mqtt ? "100k-node cold start ≤ 5 s" : "";
        console.log(
          `| ${r.label} | ${fmt(r.nodes)} | ${r.mqtt ? "enabled" : "disabled"} | **${fmt(r.createServerMs)}** | ${fmt(r.createServerCpuMs)} | ${fmt(r.flushMs)} (${fmt(r.flushRows)}) | ${fmt(r.registrySize)} | ${fmt(r.sweepTracked)} | ${fmt(r.liveTimers)} | ${fmt(r.otherCores, 2)} cores | ${ref(r)} | ${r.attempts} | ${target} |`,
        );
      }
    } finally {
      rmSync(seedDir, { recursive: true, force: true });
    }
  }

  // 5. SSE fan-out.
  if (only.has("fanout")) {
    const procs = Number(flag("--fanout-procs") ?? 1);
    const plan: FanoutParams = quick ? { subscribers: 200, reps: 10, procs } : { subscribers: 1000, reps: 30, procs };
    const r = await attempt("fanout", () => measured<FanoutResult & PhaseMeta>("fanout", plan, 180_000, (x) => x.otherCores));
    console.log("\n## 5. One SSE event to many consoles\n");
    if (r) {
      const all = [...r.allReadMs].sort((a, b) => a - b);
      const med = [...r.medianReadMs].sort((a, b) => a - b);
      const sync = [...r.publishSyncMs].sort((a, b) => a - b);
      const first = [...r.firstReadMs].sort((a, b) => a - b);
      const writes = [...r.publishWritesMs].sort((a, b) => a - b);
      console.log(
        [
          `${fmt(r.opened)} consoles on \`GET /api/v1/events/stream\` (opened in ${fmt(r.openMs)} ms), spread over ${r.procs} console processes (raw sockets: a console has read the frame when its bytes are in and parsed); service with MQTT disabled and no nodes.`,
          `\`hub.publish\` of one ~700-byte \`endpoint.status.updated\`, ${r.reps} times, 50 ms apart; time from the call to the last (and to the median) console having read and parsed the frame, on the monotonic clock both processes share.`,
          "\"Service done writing\": until a `setImmediate` queued right after the call runs — `res.write` on a chunked response corks the socket and the actual `writev` happens on the next tick, so this is when the last frame reached the kernel.",
          `${r.complete}/${r.reps} publishes reached every console. CPU during the run: service ${fmt(r.serviceCores * 100)} %, consoles ${fmt(r.agentsCores * 100)} %, other ${fmt(r.otherCores, 2)} cores. CPU reference before / after: ${ref(r)} µs; runs: ${r.attempts}.\n`,
        ].join(" "),
      );
      console.log(
        "| consoles | all read: p50 ms | all read: p90 ms | all read: max ms | first console: p50 ms | median console: p50 ms | hub.publish() returns: p50 / max ms | service done writing: p50 / max ms | target |",
      );
      console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---|");
      console.log(
        `| ${fmt(r.opened)} | **${fmt(percentile(all, 50), 2)}** | ${fmt(percentile(all, 90), 2)} | ${fmt(all[all.length - 1], 2)} | ${fmt(percentile(first, 50), 2)} | ${fmt(percentile(med, 50), 2)} | ${fmt(percentile(sync, 50), 2)} / ${fmt(sync[sync.length - 1], 2)} | ${fmt(percentile(writes, 50), 2)} / ${fmt(writes[writes.length - 1], 2)} | 1,000 consoles ≤ 50 ms |`,
      );
    }
  }

  console.log(`\nTotal ${fmt((performance.now() - started) / 1000, 1)} s.${failures.length ? ` Failed: ${failures.join("; ")}` : ""}`);
}
