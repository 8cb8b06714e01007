/**
 * Helpers of `scripts/bench/ingest.ts` (a benchmark, not a test): seeding a store directly,
 * counting the registry's group commits without touching `src/`, a timer-counting clock, the IPC
 * messages between the bench processes, and small statistics.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import SQLite from "better-sqlite3";
import { createActor } from "xstate";
import { ManualClock, systemClock, type Clock } from "../../src/lib/clock.js";
import { hashToken } from "../../src/domain/tokens.js";
import { createLogger } from "../../src/logger.js";
import { NODE_MACHINE_VERSION, nodeMachine } from "../../src/machines/node.machine.js";
import { nodeClientId, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { nodeTopic } from "../../src/protocol/topics.js";
import { Store } from "../../src/store/db.js";
import { sqliteOf } from "../../src/store/connection.js";

// ---- seeding ------------------------------------------------------------------------------

/** One seeded, bound dynamic node and what its agent needs to connect. */
export interface AgentSpec {
  configId: string;
  nodeId: string;
  clientId: string;
  username: string;
  password: string;
  heartbeatTopic: string;
  eventTopic: string;
}

/**
 * What the seeded actors look like:
 * - `none`: no machine snapshot (the registry starts a fresh, uninitialized actor);
 * - `offline`: bound (initialized), config latest, presence offline (no timer armed);
 * - `online`: as `offline` but online and running, last signal up to 30 min ago (one TTL timer
 *   per actor once restored).
 */
export type SnapshotKind = "none" | "offline" | "online";

export interface SeedOptions {
  /** SQLite file (created and migrated by the real `Store.open`). */
  file: string;
  nodes: number;
  snapshot: SnapshotKind;
  onlineTtlMs: number;
  detectTimeoutMs: number;
  /** Nodes per config (a full-mesh config is a few hundred nodes). */
  perConfig?: number;
}

const SHA = createHash("sha256").update("bench staged config").digest("hex");
const CFG_MARK = "cfg-zzzzzzzzzz";
const NODE_MARK = "node-zzzzzzzzzz";
const AT_MARK = 4_000_000_000_001;

export function benchConfigId(i: number): string {
  return `cfg-b${String(i).padStart(5, "0")}`;
}
export function benchNodeId(i: number): string {
  return `node-b${String(i).padStart(7, "0")}`;
}
export function benchPassword(nodeId: string): string {
  return `bench-password-${nodeId}-0123456789abcdef`;
}

/**
 * The persisted snapshot of a real node actor (the same machine the registry runs) after bind,
 * staging and applying config 1, and (for `online`) one heartbeat — with markers where the ids
 * and the signal time go, so that 100k snapshots are made by string substitution.
 */
function snapshotTemplate(kind: Exclude<SnapshotKind, "none">, onlineTtlMs: number, detectTimeoutMs: number): string {
  const clock = new ManualClock(AT_MARK);
  const actor = createActor(nodeMachine, {
    clock,
    input: { configId: CFG_MARK, nodeId: NODE_MARK, mode: "dynamic", onlineTtlMs, detectTimeoutMs },
  });
  actor.start();
  const at = AT_MARK;
  actor.send({ type: "client.bound", at, clientVersion: "1.2.3" });
  actor.send({ type: "config.staged", at, version: 1, sha: SHA });
  actor.send({ type: "config.applied", at, version: 1, sha: SHA, protocol: "wireguard" });
  if (kind === "online") actor.send({ type: "mqtt.signal", at, source: "heartbeat", wgOnline: true });
  const text = JSON.stringify(actor.getPersistedSnapshot());
  actor.stop();
  return text;
}

/** Nodes per config that {@link seedStore} seeds unless told otherwise. */
export const SEED_PER_CONFIG = 250;

/**
 * Seeds configs, nodes and node_client_state rows (client_initialized=1, mqtt_username =
 * nodeUsername(...), mqtt_password_hash = hashToken(password)) in one transaction, through the
 * real migrations. Returns the agents' connection data.
 */
export async function seedStore(opts: SeedOptions): Promise<AgentSpec[]> {
  const perConfig = opts.perConfig ?? SEED_PER_CONFIG;
  const store = await Store.open(opts.file, createLogger("silent"));
  const db = sqliteOf(store);
  const now = Date.now();
  const template = opts.snapshot === "none" ? null : snapshotTemplate(opts.snapshot, opts.onlineTtlMs, opts.detectTimeoutMs);
  const insConfig = db.prepare(
    `INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, awg_params, created_at, updated_at)
     VALUES (?, ?, 'wireguard', '10.0.0.0/8', NULL, ?, ?)`,
  );
  const insNode = db.prepare(
    `INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, public_address, listen_port,
       private_key, public_key, staged_config_version, staged_config_sha256,
       confirmed_config_version, confirmed_config_sha256, created_at, updated_at)
     VALUES (?, ?, ?, 'dynamic', 'svc0', ?, NULL, NULL, ?, ?, 1, ?, 1, ?, ?, ?)`,
  );
  const insText = db.prepare("INSERT INTO node_staged_texts (node_id, config_version, config_sha256, config_text) VALUES (?, 1, ?, ?)");
  const insState = db.prepare(
    `INSERT INTO node_client_state (node_id, client_initialized, client_presence_state, runtime_state,
       last_reachable_at, last_signal_at, client_version, platform, hostname, mqtt_username, mqtt_password_hash,
       boot_id, session_id, machine_snapshot, machine_version, updated_at)
     VALUES (?, 1, ?, ?, NULL, ?, '1.2.3', 'linux', ?, ?, ?, NULL, NULL, ?, ?, ?)`,
  );
  const agents: AgentSpec[] = [];
  const key = "A".repeat(43) + "=";
  const configText = "[Interface]\nPrivateKey = (bench)\nAddress = 10.0.0.1/32\n";
  db.transaction(() => {
    for (let i = 0; i < opts.nodes; i++) {
      const c = Math.floor(i / perConfig);
      const configId = benchConfigId(c);
      if (i % perConfig === 0) insConfig.run(configId, `bench-${c}`, now, now);
      const nodeId = benchNodeId(i);
      const j = i % perConfig;
      insNode.run(nodeId, configId, `n${j}`, `10.${(j >> 16) & 255}.${(j >> 8) & 255}.${j & 255}`, key, key, SHA, SHA, now, now);
      insText.run(nodeId, SHA, configText);
      const password = benchPassword(nodeId);
      const username = nodeUsername(configId, nodeId);
      let snapshot: string | null = null;
      let signalAt: number | null = null;
      if (template !== null) {
        signalAt = opts.snapshot === "online" ? now - ((i * 7919) % 1_800_000) : null;
        snapshot = template
          .split(CFG_MARK)
          .join(configId)
          .split(NODE_MARK)
          .join(nodeId)
          .split(String(AT_MARK))
          .join(String(signalAt ?? now));
      }
      const online = opts.snapshot === "online";
      insState.run(
        nodeId,
        online ? "online" : "offline",
        online ? "running" : "unknown",
        signalAt,
        `host-${i}`,
        username,
        hashToken(password),
        snapshot,
        snapshot === null ? null : NODE_MACHINE_VERSION,
        now,
      );
      agents.push({
        configId,
        nodeId,
        clientId: nodeClientId(configId, nodeId),
        username,
        password,
        heartbeatTopic: nodeTopic(configId, nodeId, "heartbeat"),
        eventTopic: nodeTopic(configId, nodeId, "event"),
      });
    }
  })();
  await store.close();
  return agents;
}

// ---- instrumentation (bench-only; src/ is not touched) ------------------------------------

/** Counters of the registry's group commits, read by wrapping better-sqlite3 in this process. */
export interface CommitStats {
  /** `sqlite.transaction(...)()` calls: only the registry's flush uses better-sqlite3 transactions. */
  flushes: number;
  /** Flushes that wrote at least one row. */
  writingFlushes: number;
  /** Rows written by the registry's persist statement (one per dirty actor per flush). */
  rows: number;
  /** Time inside flush transactions (snapshot serialization + UPDATEs + COMMIT), ns. */
  flushNs: bigint;
  maxFlushNs: bigint;
}

export const commitStats: CommitStats = { flushes: 0, writingFlushes: 0, rows: 0, flushNs: 0n, maxFlushNs: 0n };

let instrumented = false;

/**
 * Wraps `Database.prototype.prepare` (to count runs of the registry's persist statement) and
 * `Database.prototype.transaction` (to count and time flushes). Call before `createServer`.
 */
export function instrumentRegistryCommits(): void {
  if (instrumented) return;
  instrumented = true;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const proto = SQLite.prototype as any;
  const prepare = proto.prepare as (sql: string) => { run: (...args: unknown[]) => unknown };
  proto.prepare = function (this: unknown, sql: string) {
    const stmt = prepare.call(this, sql);
    // Full rows (snapshot JSON) and narrow ones (a heartbeat that moved only last_signal_at).
    if (/^\s*UPDATE node_client_state SET (client_initialized = \?, client_presence_state = \?|last_signal_at = \?, updated_at = \?)/.test(sql)) {
      const run = stmt.run.bind(stmt);
      stmt.run = (...args: unknown[]) => {
        commitStats.rows++;
        return run(...args);
      };
    }
    return stmt;
  };
  const transaction = proto.transaction as (fn: (...a: unknown[]) => unknown) => (...a: unknown[]) => unknown;
  proto.transaction = function (this: unknown, fn: (...a: unknown[]) => unknown) {
    const tx = transaction.call(this, fn);
    return (...args: unknown[]) => {
      const rows0 = commitStats.rows;
      const t0 = process.hrtime.bigint();
      try {
        return tx(...args);
      } finally {
        const dt = process.hrtime.bigint() - t0;
        commitStats.flushes++;
        if (commitStats.rows > rows0) commitStats.writingFlushes++;
        commitStats.flushNs += dt;
        if (dt > commitStats.maxFlushNs) commitStats.maxFlushNs = dt;
      }
    };
  };
}

/** The system clock, counting the timers armed through it (XState's delayed transitions use it). */
export interface CountingClock extends Clock {
  readonly live: Set<unknown>;
  armed: number;
  cleared: number;
  fired: number;
}

export function countingClock(base: Clock = systemClock): CountingClock {
  const live = new Set<unknown>();
  const clock: CountingClock = {
    live,
    armed: 0,
    cleared: 0,
    fired: 0,
    now: () => base.now(),
    setTimeout(fn, ms) {
      const box: { h: unknown } = { h: undefined };
      box.h = base.setTimeout(() => {
        live.delete(box.h);
        clock.fired++;
        fn();
      }, ms);
      live.add(box.h);
      clock.armed++;
      return box.h;
    },
    clearTimeout(handle) {
      if (live.delete(handle)) clock.cleared++;
      base.clearTimeout(handle);
    },
  };
  return clock;
}

// ---- IPC between the bench processes --------------------------------------------------------

/** Orchestrator/server process → agents process. */
export type ToAgents =
  | { op: "connect"; port: number; agents: AgentSpec[]; concurrency: number }
  | { op: "credit"; handled: number }
  | { op: "flood"; window: number; qos: 0 | 1; toggle: boolean }
  | { op: "halt" }
  | { op: "sse"; url: string; token: string; n: number; raw: boolean }
  | { op: "warm"; rate: number; timeoutMs: number }
  | { op: "rate"; rate: number; durationMs: number; drainMs: number }
  | { op: "close" };

export interface LatencySummary {
  rate: number;
  durationMs: number;
  sent: number;
  frames: number;
  matched: number;
  unmatched: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  achievedRate: number;
  agentCpuPct: number;
}

/** Agents process → server process. */
export type FromAgents =
  | { op: "connected"; ok: number; failed: number; ms: number; errors: string[] }
  | { op: "halted"; sent: number; acks: number; statusFrames: number; cpuPct: number }
  | { op: "sse-ready"; n: number; failed: number; ms: number }
  | { op: "warm-done"; seen: number; ms: number }
  | { op: "rate-done"; summary: LatencySummary }
  /** One fan-out frame: how long after `hub.publish` each console of this process read it, µs. */
  | { op: "fanout"; seq: number; delaysUs: number[] }
  | { op: "closed" };

// ---- statistics and formatting ------------------------------------------------------------

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? Number.NaN;
}

/** What {@link SwitchedSlices} measured: µs of CPU per message in each state, and the paired ratio. */
export interface SliceSummary {
  onUs: number;
  offUs: number;
  slices: number;
  msgsPerS: number;
  pairedMedian: number;
  pairedQ1: number;
  pairedQ3: number;
}

/**
 * This process's CPU time per router message in two states switched slice by slice (`on` and
 * off: the flight recorder, alert rules), summed per state, and each adjacent pair of slices'
 * on ÷ off ratio: the machine's drift cancels within a pair, and the paired median and
 * quartiles say how steady the difference is.
 */
export class SwitchedSlices {
  readonly #sum = { on: { cpu: 0, msgs: 0 }, off: { cpu: 0, msgs: 0 } };
  readonly #perSlice: Array<{ on: boolean; us: number }> = [];
  #ms = 0;
  readonly #router: { readonly received: number };

  constructor(router: { readonly received: number }) {
    this.#router = router;
  }

  /** Measures one slice of `ms` in state `on`. */
  async slice(on: boolean, ms: number): Promise<void> {
    const cpu0 = process.cpuUsage();
    const r0 = this.#router.received;
    await new Promise((resolve) => setTimeout(resolve, ms));
    const cpu = process.cpuUsage(cpu0);
    const msgs = this.#router.received - r0;
    const acc = on ? this.#sum.on : this.#sum.off;
    acc.cpu += cpu.user + cpu.system;
    acc.msgs += msgs;
    this.#ms += ms;
    this.#perSlice.push({ on, us: (cpu.user + cpu.system) / Math.max(1, msgs) });
  }

  /** µs per message in each state, slices, messages per second, and the paired on ÷ off ratio's median and quartiles. */
  summary(): SliceSummary {
    const ratios: number[] = [];
    for (let i = 0; i + 1 < this.#perSlice.length; i += 2) {
      const [x, y] = [this.#perSlice[i], this.#perSlice[i + 1]];
      if (x !== undefined && y !== undefined) ratios.push(x.on ? x.us / y.us : y.us / x.us);
    }
    ratios.sort((a, b) => a - b);
    const { on, off } = this.#sum;
    return {
      onUs: on.cpu / Math.max(1, on.msgs),
      offUs: off.cpu / Math.max(1, off.msgs),
      slices: this.#perSlice.length,
      msgsPerS: (on.msgs + off.msgs) / (this.#ms / 1000),
      pairedMedian: percentile(ratios, 50),
      pairedQ1: percentile(ratios, 25),
      pairedQ3: percentile(ratios, 75),
    };
  }
}

export function fmt(n: number | undefined, digits = 0): string {
  if (n === undefined || !Number.isFinite(n)) return "n/a";
  return n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function mib(bytes: number): string {
  return fmt(bytes / (1024 * 1024), 1);
}

// ---- machine load (this machine is shared: other processes' CPU is measured and reported) ----

const TICK_MS = 10; // USER_HZ = 100 on Linux

interface CpuSample {
  busyMs: number;
  stealMs: number;
  totalMs: number;
}

/** System-wide CPU time from /proc/stat (all cores), ms; zeros where /proc is missing. */
export function systemCpu(): CpuSample {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
    return {
      busyMs: (user + nice + system + irq + softirq) * TICK_MS,
      stealMs: steal * TICK_MS,
      totalMs: (user + nice + system + idle + iowait + irq + softirq + steal) * TICK_MS,
    };
  } catch {
    return { busyMs: 0, stealMs: 0, totalMs: 0 };
  }
}

/** CPU time (user + system) of one process from /proc/{pid}/stat, ms; 0 when unknown. */
export function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/** Measures a window: cores used by this process, by `otherPids`, and by everything else. */
export function loadWindow(otherPids: Array<number | undefined> = []): () => {
  seconds: number;
  selfCores: number;
  pidsCores: number;
  otherCores: number;
  stealPct: number;
} {
  const t0 = performance.now();
  const s0 = systemCpu();
  const self0 = process.cpuUsage();
  const p0 = otherPids.map(processCpuMs);
  return () => {
    const seconds = (performance.now() - t0) / 1000;
    const s1 = systemCpu();
    const self = process.cpuUsage(self0);
    const selfMs = (self.user + self.system) / 1000;
    const pidsMs = otherPids.map(processCpuMs).reduce((a, b, i) => a + (b - (p0[i] ?? 0)), 0);
    const busyMs = s1.busyMs - s0.busyMs;
    const totalMs = s1.totalMs - s0.totalMs;
    return {
      seconds,
      selfCores: selfMs / 1000 / seconds,
      pidsCores: pidsMs / 1000 / seconds,
      otherCores: Math.max(0, busyMs - selfMs - pidsMs) / 1000 / seconds,
      stealPct: totalMs > 0 ? ((s1.stealMs - s0.stealMs) / totalMs) * 100 : 0,
    };
  };
}

/**
 * Waits (bounded) until the rest of the machine uses less than `maxCores`, sampling 0.5 s at a
 * time. @returns the background load of the last sample, in cores
 */
export async function awaitQuiet(maxCores: number, maxWaitMs: number): Promise<number> {
  const deadline = Date.now() + maxWaitMs;
  for (;;) {
    const w = loadWindow();
    await new Promise((r) => setTimeout(r, 500));
    const l = w();
    const other = l.otherCores + l.selfCores;
    if (other < maxCores || Date.now() >= deadline) return other;
  }
}

/**
 * A fixed single-thread reference workload (JSON round trips of a ~700-byte object), µs per
 * round trip: this VM's speed varies with the host's load (steal time), so each measurement
 * carries the speed it ran at.
 */
export function calibrate(): number {
  const obj = {
    config_id: "cfg-b00000",
    node_id: "node-b0000000",
    status: { presence: "online", runtime: "running", staged: { v: 1, sha: "a".repeat(64) }, confirmed: { v: 1, sha: "b".repeat(64) } },
    list: Array.from({ length: 20 }, (_, i) => ({ i, name: `n${i}`, on: i % 2 === 0 })),
  };
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < 2000; i++) JSON.parse(JSON.stringify(obj));
    best = Math.min(best, ((performance.now() - t0) / 2000) * 1000);
  }
  return best;
}
