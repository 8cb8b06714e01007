/**
 * A protocol switch of a full mesh of N dynamic nodes, each with a
 * connected stand-in agent that ACKs config pushes, while heartbeats flow at a fixed rate and a
 * console (SSE) watches (a benchmark, not a test: it prints tables and asserts nothing).
 *
 *   npx tsx scripts/bench/switch.ts [--nodes 1000] [--rate 500] [--concurrency 8]
 *   npx tsx scripts/bench/switch.ts --cpu-prof   # + a CPU profile of the switch window
 *   npx tsx scripts/bench/switch.ts --console 0  # no SSE subscriber (latency not measured)
 *   npx tsx scripts/bench/switch.ts --sql-prof   # + the service's SQLite statement calls in the switch, by SQL text
 *   npx tsx scripts/bench/switch.ts --log-level warn   # + the service's warnings and errors (JSON lines)
 *
 * 1. The real service in this process (`createServer`, real SQLite file, embedded aedes broker on
 *    port 0, HTTP on loopback), default settings (push debounce 2 s, detect every 2 min).
 * 2. The mesh is built over REST: one `wireguard` config, N nodes created `static` (a full mesh:
 *    each new node gets its n − 1 pairs), then each node made `dynamic` and bound **through the
 *    real bind path** (`POST …/bind-command`, then `POST /api/client/bind` with its token, as
 *    `svcctl bind` does); the bind answers carry the MQTT credentials. The nodes are created
 *    static first because a large write renders every changed dynamic node after its commit: a
 *    mesh built of dynamic nodes renders O(n²) peer lines per create (a slow build, not the
 *    figure measured here).
 * 3. N stand-in agents (`switch-agents.ts`, one child process, raw MQTT) connect, receive their
 *    first config push and ACK it; one SSE subscriber in the same child. The run waits until every
 *    node is `latest` (spec §3.5) and prints how long that first wave took.
 * 4. Heartbeats at `--rate` msgs/s (round robin, each flipping wg_online: one
 *    `endpoint.status.updated` frame per heartbeat). After a 5 s baseline,
 *    `PATCH /configs/{id} {tunnel_protocol: awg_2}` (every node's config changes). Printed: the
 *    stage time (the REST answer), the time until every node is `latest` (the registry's committed
 *    projections polled every 100 ms: confirmed sha = staged sha), heartbeat→SSE p50/p99/max in the baseline and in the
 *    switch window, the event loop's delay (`monitorEventLoopDelay`, 1 ms resolution) over the
 *    switch window, pushes received, ACKs, and sha mismatches (received text vs pushed sha).
 *    With `--cpu-prof`, the service (this process) is profiled from the PATCH until every node is
 *    latest: the top self times are printed and the profile is written to
 *    `$TMPDIR/switch-<time>.cpuprofile` (the profiler's overhead is in that run's figures), with
 *    the service's stalls on the profile's clock beside it (`….cpuprofile.stalls.json`: [start, end] µs).
 * 5. Both processes record their event-loop stalls from the start of the heartbeats
 *    (`stalls.ts`); a table by second around the PATCH puts each latency spike on the service or
 *    on the load generator. With `--sql-prof`, statement calls of 20 ms or more are split into
 *    time on a CPU, waiting for one, and blocked (I/O, locks).
 */
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { readFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { loadSettings, testSettings } from "../../src/config.js";
import { z } from "zod";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { fmt, loadWindow, percentile } from "./ingest-lib.js";
import { maxStall, recordStalls, type Stall } from "./stalls.js";
import type { FromSwitchAgents, LatencySample, SwitchAgentSpec, SwitchAgentTotals, ToSwitchAgents } from "./switch-agents.js";
import { sqliteOf } from "../../src/store/connection.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, "..", "..");
const AGENTS = join(HERE, "switch-agents.ts");
const PASSWORD = "bench-password";
const BASELINE_MS = 5000;
const SETTLE_MS = 3000;

function arg(argv: string[], name: string, dflt: number): number {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
}

const argv = process.argv.slice(2);
const N = arg(argv, "nodes", 1000);
const RATE = arg(argv, "rate", 500);
const CONCURRENCY = arg(argv, "concurrency", 8);
/** `--console 0`: no SSE subscriber (heartbeat→SSE not measured), to see the switch without the notifier's frames. */
const CONSOLE = arg(argv, "console", 1) !== 0;
const LATEST_TIMEOUT_MS = arg(argv, "timeout-s", 180) * 1000;
const CPU_PROF = argv.includes("--cpu-prof");
/** `--sql-prof`: time every SQLite statement call of the service during the switch, by SQL text (the CPU profile cannot: Kysely's async chain hides the caller). */
const SQL_PROF = argv.includes("--sql-prof");
/** `--log-level warn`: the service's log lines (JSON, stdout) at this level; default none. Shows, e.g., why a switch stops. */
const LOG_LEVEL = z.enum(["silent", "fatal", "error", "warn", "info", "debug"]).parse(argv.includes("--log-level") ? argv[argv.indexOf("--log-level") + 1] : "silent");
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const log = (s: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${s}`);

type Api = (method: string, path: string, body?: unknown, authed?: boolean) => Promise<{ ms: number; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function pool<T>(items: T[], concurrency: number, fn: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i] as T, i);
    }
  }));
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

async function startProfile(): Promise<Session> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 1000 });
  await session.post("Profiler.start");
  return session;
}

/** Stops the profile, writes it, and returns the table of the top self times (share of all samples). */
async function stopProfile(session: Session, stalls: readonly Stall[], top = 25): Promise<string> {
  const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: { nodes: ProfileNode[]; samples: number[] } };
  session.disconnect();
  const file = join(tmpdir(), `switch-${Date.now()}.cpuprofile`);
  writeFileSync(file, JSON.stringify(profile));
  // The service's stalls on the profile's clock (µs, monotonic like process.hrtime), for a look
  // at what ran in each: [start, end] of the late tick's wait.
  const offsetUs = Number(process.hrtime.bigint() / 1000n) - (performance.timeOrigin + performance.now()) * 1000;
  writeFileSync(`${file}.stalls.json`, JSON.stringify(stalls.map(([at, late]) => [(at - late - 5) * 1000 + offsetUs, at * 1000 + offsetUs])));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  for (const id of profile.samples) {
    const f = byId.get(id)?.callFrame;
    if (f === undefined) continue;
    const key = `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*\/(node_modules|src)\//, "$1/")}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + 1);
  }
  const total = profile.samples.length;
  const rows = [...self.entries()].sort((x, y) => y[1] - x[1]).slice(0, top).map(([k, v]) => `| ${fmt((100 * v) / total, 1)} | \`${k}\` |`);
  return [`\nService CPU profile, PATCH → all latest (self time, ${fmt(total)} samples of 1 ms; ${file})\n`, "| self % | function |", "|---:|---|", ...rows].join("\n");
}

/**
 * Per SQL text: calls, total ms, the longest single call (ms), rows returned, and of the calls
 * of 20 ms or more: how many, and their time on the CPU, waiting for a CPU (runnable) and
 * blocked (neither: I/O, locks), ms, from this thread's `/proc/thread-self/schedstat`.
 */
type SqlStat = { calls: number; ms: number; max: number; rows: number; slow: number; slowCpu: number; slowRunq: number; slowBlocked: number };

/** This thread's scheduler times (ns): on a CPU, and runnable but waiting for one; zeros where /proc is missing. */
function schedstat(): [number, number] {
  try {
    const [run, wait] = readFileSync("/proc/thread-self/schedstat", "utf8").split(" ").map(Number);
    return [run ?? 0, wait ?? 0];
  } catch {
    return [0, 0];
  }
}

/** Wraps the statement methods of better-sqlite3 to time each call by SQL text while `on()`. */
function sqlProfiler(sqlite: { prepare(sql: string): object }): { on(): void; off(): string } {
  const proto = Object.getPrototypeOf(sqlite.prepare("SELECT 1")) as Record<string, (...args: unknown[]) => unknown>;
  const stats = new Map<string, SqlStat>();
  let enabled = false;
  for (const name of ["all", "get", "run"] as const) {
    const original = proto[name] as (...args: unknown[]) => unknown;
    proto[name] = function (this: { source: string }, ...args: unknown[]) {
      if (!enabled) return original.apply(this, args);
      const s0 = schedstat();
      const t0 = performance.now();
      const out = original.apply(this, args);
      const dt = performance.now() - t0;
      const s1 = schedstat();
      const key = `${name} ${this.source.replace(/\s+/g, " ").replace(/(\?, )+\?/g, "?, …").slice(0, 160)}`;
      const st = stats.get(key) ?? { calls: 0, ms: 0, max: 0, rows: 0, slow: 0, slowCpu: 0, slowRunq: 0, slowBlocked: 0 };
      st.calls++;
      st.ms += dt;
      st.max = Math.max(st.max, dt);
      st.rows += Array.isArray(out) ? out.length : 0;
      if (dt >= 20) {
        const cpu = (s1[0] - s0[0]) / 1e6;
        const runq = (s1[1] - s0[1]) / 1e6;
        st.slow++;
        st.slowCpu += cpu;
        st.slowRunq += runq;
        st.slowBlocked += Math.max(0, dt - cpu - runq);
      }
      stats.set(key, st);
      return out;
    };
  }
  return {
    on: () => void (enabled = true),
    off: () => {
      enabled = false;
      const rows = [...stats.entries()].sort((a, b) => b[1].ms - a[1].ms).slice(0, 15);
      return [
        "\nSQLite statement calls of the service, PATCH → all latest (by total time)\n",
        "| total ms | calls | max ms | rows | calls ≥ 20 ms | of those: on CPU / waiting for a CPU / blocked, ms | statement |",
        "|---:|---:|---:|---:|---:|---:|---|",
        ...rows.map(
          ([k, v]) =>
            `| ${fmt(v.ms)} | ${fmt(v.calls)} | ${fmt(v.max, 1)} | ${fmt(v.rows)} | ${fmt(v.slow)} | ${v.slow === 0 ? "–" : `${fmt(v.slowCpu)} / ${fmt(v.slowRunq)} / ${fmt(v.slowBlocked)}`} | \`${k}\` |`,
        ),
      ].join("\n");
    },
  };
}

function summarize(samples: LatencySample[], from: number, to: number): { n: number; p50: number; p99: number; max: number } {
  const xs = samples.filter(([t]) => t >= from && t < to).map(([, l]) => l).sort((a, b) => a - b);
  return { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: xs[xs.length - 1] ?? Number.NaN };
}

const dataDir = mkdtempSync(join(tmpdir(), "svc-switch-"));
const server = await createServer(
  testSettings({ dataDir, adminPassword: PASSWORD, httpHost: "127.0.0.1", authRateLimitMax: 100_000, embeddedBrokerThread: loadSettings({ SVC_EMBEDDED_BROKER_THREAD: process.env["SVC_EMBEDDED_BROKER_THREAD"] }).embeddedBrokerThread }),
  createLogger(LOG_LEVEL),
);
const sqlProf = SQL_PROF ? sqlProfiler(sqliteOf(server.store)) : undefined;
const child = fork(AGENTS, [], { cwd: ROOT, execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
const waiters: Array<(m: FromSwitchAgents) => boolean> = [];
let progress = { pushes: 0, acked: 0 };
child.on("message", (m: FromSwitchAgents) => {
  if (m.op === "progress") progress = { pushes: m.pushes, acked: m.acked };
  for (let i = 0; i < waiters.length; i++) if ((waiters[i] as (m: FromSwitchAgents) => boolean)(m)) waiters.splice(i--, 1);
});
function next<K extends FromSwitchAgents["op"]>(op: K): Promise<Extract<FromSwitchAgents, { op: K }>> {
  return new Promise((resolve) => waiters.push((m) => (m.op === op ? (resolve(m as Extract<FromSwitchAgents, { op: K }>), true) : false)));
}
const tell = (m: ToSwitchAgents) => child.send(m);

try {
  const base = await server.app.listen({ host: "127.0.0.1", port: 0 });
  let token = "";
  const api: Api = async (method, path, body, authed = true) => {
    const t0 = performance.now();
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...(authed ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    const ms = performance.now() - t0;
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
    return { ms, body: text === "" ? null : JSON.parse(text) };
  };
  token = (await api("POST", "/api/v1/auth/login", { password: PASSWORD }, false)).body.access_token;
  const config = (await api("POST", "/api/v1/configs", { name: "switch", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/16" })).body;
  const cfg = `/api/v1/configs/${config.config_id}`;

  // ---- build: N static nodes in a full mesh, then dynamic and bound ----
  const tBuild = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < N; i++) {
    ids.push((await api("POST", `${cfg}/nodes`, { name: `n${i}`, mode: "static", public_address: `192.0.2.${(i % 250) + 1}`, listen_port: 10000 + i })).body.node_id);
    if ((i + 1) % 250 === 0) log(`${i + 1} nodes created`);
  }
  const buildS = (performance.now() - tBuild) / 1000;
  const tBind = performance.now();
  const specs: SwitchAgentSpec[] = new Array(N);
  await pool(ids, CONCURRENCY, async (nodeId, i) => {
    await api("PATCH", `${cfg}/nodes/${nodeId}`, { mode: "dynamic" });
    const cmd = (await api("POST", `${cfg}/nodes/${nodeId}/bind-command`)).body.command as string;
    const bindToken = /--token (\S+)/.exec(cmd)?.[1] ?? "";
    const bound = (await api("POST", "/api/client/bind", { bind_token: bindToken, server_url: base, client_version: "1.0.0", platform: "linux", hostname: `host-${i}` }, false)).body;
    specs[i] = { configId: config.config_id, nodeId, clientId: bound.mqtt.client_id, username: bound.mqtt.username, password: bound.mqtt.password };
    if ((i + 1) % 250 === 0) log(`${i + 1} nodes made dynamic and bound`);
  });
  const bindS = (performance.now() - tBind) / 1000;
  await server.mesh.settled();

  // ---- nodes latest (spec §3.5), from the registry's committed projections ----
  // Not a SQL count: the confirmed sha sits after the ~100 KB staged text in each row, so a count
  // over 1,000 rows walks ~100 MB of overflow pages (14 ms a poll, 40 % of the service's CPU in
  // the first profiled run). The projection is what the registry committed (persist-then-emit).
  const projections = () => ids.map((id) => server.registry.projection(config.config_id, id));
  let stagedBefore = new Map<string, number>();
  /** Nodes latest on a config staged after `stagedBefore` was taken (an actor that has not heard of the switch yet still says latest). */
  const latest = () => projections().filter((p, i) => p?.sync === "latest" && p.stagedVersion > (stagedBefore.get(ids[i] ?? "") ?? 0)).length;
  const rendered = () => ids.filter((id) => (server.registry.projection(config.config_id, id)?.stagedVersion ?? 0) > (stagedBefore.get(id) ?? 0)).length;
  /** Every second: [s since t0, nodes whose actor got the re-rendered config, nodes latest, pushes received]. */
  let curve: Array<[number, number, number, number]> = [];
  async function untilAllLatest(t0: number): Promise<number> {
    curve = [];
    let nextSample = t0;
    for (;;) {
      const now = performance.now();
      const n = latest();
      if (now >= nextSample || n >= N) {
        curve.push([(now - t0) / 1000, rendered(), n, progress.pushes]);
        nextSample += 1000;
      }
      if (n >= N || now - t0 >= LATEST_TIMEOUT_MS) break;
      await sleep(100);
    }
    return performance.now() - t0;
  }

  // ---- agents and console ----
  const brokerPort = server.mqtt.broker?.port ?? 0;
  const tConnect = performance.now();
  tell({ op: "connect", port: brokerPort, agents: specs });
  const connected = await next("connected");
  log(`${connected.ok} agents connected in ${fmt(connected.ms)} ms (${connected.failed} failed ${connected.errors.join("; ")})`);
  const firstWaveMs = await untilAllLatest(tConnect);
  const firstWaveLatest = latest();
  log(`first wave: ${firstWaveLatest}/${N} latest after ${fmt(firstWaveMs)} ms`);
  if (CONSOLE) {
    tell({ op: "sse", url: `${base}/api/v1/events/stream`, token });
    await next("sse-ready");
    await sleep(2000); // the first detect round (console connected) is answered
  }

  // ---- baseline, then the switch ----
  tell({ op: "rate", rate: RATE });
  const serviceStalls = recordStalls();
  await sleep(1000);
  const tBaseline = performance.timeOrigin + performance.now();
  await sleep(BASELINE_MS);
  const loop = monitorEventLoopDelay({ resolution: 1 });
  const published0 = server.commands.published;
  const pushes0 = progress.pushes;
  const load = loadWindow([child.pid]);
  const profiler = CPU_PROF ? await startProfile() : undefined;
  // The profiler's start stalls the loop for ~250 ms: let that pass before the PATCH (it shows in
  // the baseline window of a profiled run).
  if (profiler !== undefined) await sleep(500);
  sqlProf?.on();
  loop.enable();
  stagedBefore = new Map(ids.map((id) => [id, server.registry.projection(config.config_id, id)?.stagedVersion ?? 0]));
  const tSwitch = performance.now();
  const tSwitchEpoch = performance.timeOrigin + tSwitch;
  const stageMs = (await api("PATCH", cfg, { tunnel_protocol: "awg_2" })).ms;
  log(`staged in ${fmt(stageMs, 1)} ms`);
  const allLatestMs = await untilAllLatest(tSwitch);
  const switchCurve = curve;
  loop.disable();
  const switchLoad = load();
  const profileTable = (profiler === undefined ? "" : await stopProfile(profiler, serviceStalls.stalls)) + (sqlProf?.off() ?? "");
  const latestAfter = latest();
  const published = server.commands.published - published0;
  log(`${latestAfter}/${N} latest ${fmt(allLatestMs)} ms after the PATCH`);
  const tSwitchEnd = performance.timeOrigin + performance.now();
  await sleep(SETTLE_MS);
  const tEnd = performance.timeOrigin + performance.now();
  const stalls = serviceStalls.stop();
  tell({ op: "stop" });
  const totals: SwitchAgentTotals = (await next("stopped")).totals;
  const switchPushes = totals.pushes - pushes0;
  const perNode = Object.values(totals.pushesPerNode);

  const ms = (ns: number) => ns / 1e6;
  const b = summarize(totals.samples, tBaseline, tSwitchEpoch);
  const s = summarize(totals.samples, tSwitchEpoch, tSwitchEnd);
  const a = summarize(totals.samples, tSwitchEnd, tEnd);
  console.log(`\nProtocol switch (wireguard → awg_2) of a full mesh of ${fmt(N)} dynamic nodes with ${fmt(connected.ok)} connected stand-in agents, heartbeats at ${fmt(RATE)} msgs/s, ${CONSOLE ? "one SSE console" : "**no SSE console** (`--console 0`)"}\n`);
  console.log("| build over REST (s) | make dynamic + bind (s) | first push wave, all latest (ms) | stage: PATCH answered (ms) | all latest after the PATCH (ms) | nodes latest | pushes in the switch | broker took (PUBACK) | nodes pushed more than twice (first wave + switch) | sha mismatches | detects answered |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  console.log(`| ${fmt(buildS, 1)} | ${fmt(bindS, 1)} | ${fmt(firstWaveMs)} (${firstWaveLatest}/${N}) | ${fmt(stageMs, 1)} | ${fmt(allLatestMs)} | ${latestAfter}/${N} | ${fmt(switchPushes)} | ${fmt(published)} | ${perNode.filter((c) => c > 2).length} | ${totals.shaMismatches} | ${totals.detects} |`);
  console.log("\nHeartbeat → SSE (`endpoint.status.updated` read by the console), ms\n");
  console.log("| window | samples | p50 | p99 | max |");
  console.log("|---|---:|---:|---:|---:|");
  for (const [name, w] of [["baseline (5 s before the PATCH)", b], ["switch (PATCH → all latest)", s], [`after (${SETTLE_MS / 1000} s)`, a]] as const) {
    console.log(`| ${name} | ${fmt(w.n)} | ${fmt(w.p50, 1)} | ${fmt(w.p99, 1)} | ${fmt(w.max, 1)} |`);
  }
  if (CONSOLE && s.n > 0) {
    // When the slow frames were, and which process held its event loop then: per second, from
    // the baseline (negative) through the switch.
    const first = -Math.floor((tSwitchEpoch - tBaseline) / 1000);
    const last = Math.ceil((tSwitchEnd - tSwitchEpoch) / 1000);
    const secs = Array.from({ length: last - first }, (_, i) => first + i);
    const at = (k: number) => [tSwitchEpoch + k * 1000, tSwitchEpoch + (k + 1) * 1000] as const;
    const cells = secs.map((k) => summarize(totals.samples, ...at(k)));
    console.log("\nBy second around the PATCH (0 = the PATCH's second): heartbeat → SSE p99 and max, and the longest event-loop stall of each process (ms; `stalls.ts`, 5 ms ticks)\n");
    console.log(`| s | ${secs.join(" | ")} |`);
    console.log(`|---|${secs.map(() => "---:").join("|")}|`);
    console.log(`| p99 | ${cells.map((c) => fmt(c.p99)).join(" | ")} |`);
    console.log(`| max | ${cells.map((c) => fmt(c.max)).join(" | ")} |`);
    console.log(`| service stall | ${secs.map((k) => fmt(maxStall(stalls, ...at(k)))).join(" | ")} |`);
    console.log(`| agents' stall | ${secs.map((k) => fmt(maxStall(totals.stalls, ...at(k)))).join(" | ")} |`);
  }
  console.log(`\nHeartbeats sent ${fmt(totals.heartbeats)}, matched ${fmt(totals.samples.length)}, unmatched ${fmt(totals.unmatched)}; status frames ${fmt(totals.statusFrames)}; agents' process CPU ${fmt(totals.cpuMs)} ms.`);
  console.log("\nEvent-loop delay of the service during the switch (PATCH → all latest; `monitorEventLoopDelay`, 1 ms resolution), ms\n");
  console.log("| p50 | p90 | p99 | max | mean | samples |");
  console.log("|---:|---:|---:|---:|---:|---:|");
  console.log(`| ${fmt(ms(loop.percentile(50)), 1)} | ${fmt(ms(loop.percentile(90)), 1)} | ${fmt(ms(loop.percentile(99)), 1)} | ${fmt(ms(loop.max), 1)} | ${fmt(ms(loop.mean), 1)} | ${fmt(loop.count)} |`);
  console.log("\nThe switch over time (registry projections polled; pushes as counted by the agents, cumulative over the run)\n");
  console.log("| s after the PATCH | nodes rendered (actor has the new staged sha) | nodes latest | pushes received |");
  console.log("|---:|---:|---:|---:|");
  const step = Math.max(1, Math.ceil(switchCurve.length / 40));
  switchCurve.forEach(([t, r, l, p], i) => {
    if (i % step === 0 || i === switchCurve.length - 1) console.log(`| ${fmt(t, 1)} | ${fmt(r)} | ${fmt(l)} | ${fmt(p)} |`);
  });
  if (profileTable !== "") console.log(profileTable);
  console.log(`\nMachine during the switch: this process ${fmt(switchLoad.selfCores, 2)} cores, agents ${fmt(switchLoad.pidsCores, 2)}, everything else ${fmt(switchLoad.otherCores, 2)} (2 cores; shared).`);
} finally {
  if (child.connected) child.disconnect();
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
