/**
 * What the alert rules cost the ingest path (a benchmark, not a test: it prints a markdown table
 * and asserts nothing).
 *
 *   npx tsx scripts/bench/alerts-ingest.ts [--nodes 10000] [--measure-s 30] [--rounds 3] [--slice-ms 500]
 *
 * The real service (`createServer`: SQLite store, node actors, embedded broker, router, the rule
 * engine in every group commit) in this process over N seeded bound nodes; N raw stand-in agents
 * in a child process (`ingest-agents.ts`, one MQTT connection each) flooding QoS 1 heartbeats in
 * a closed loop, alternating `wg_online` so that every heartbeat changes its node's projection
 * and every group commit hands the rule engine its changes (the engine's worst case on this path:
 * it must look at each change, and none is a presence or sync transition).
 *
 * Interleaved: inside each measured window the service alternates every `--slice-ms` between
 * five enabled rules (node.offline scoped by config, node.offline by tag, node.dropped,
 * node.sync_stuck, command.failed, each to a channel) and none (the rules deleted), in the order
 * rules, none, none, rules (so neither state always follows the switch's writes), switching
 * between slices, outside the CPU it sums. The service's CPU (all its threads) per message the
 * router handled is summed per state; the paired median is the median of rules ÷ none over
 * adjacent slices (the two saw nearly the same machine). The target: ≤ 5 % more with rules.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createAlertRuleBody } from "../../src/protocol/alert-rules.schema.js";
import { createServer, type AppContext } from "../../src/server.js";
import { awaitQuiet, fmt, seedStore, SwitchedSlices, type FromAgents, type SliceSummary, type ToAgents } from "./ingest-lib.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, "../..");
const AGENTS = join(HERE, "ingest-agents.ts");
const ONLINE_TTL_MS = 2700 * 1000;
const DETECT_TIMEOUT_MS = 20 * 1000;

const argv = process.argv.slice(2);
function flag(name: string, fallback: number): number {
  const i = argv.indexOf(name);
  return i < 0 ? fallback : Number(argv[i + 1]);
}
const NODES = flag("--nodes", 10_000);
const MEASURE_MS = flag("--measure-s", 30) * 1000;
const ROUNDS = flag("--rounds", 3);
const SLICE_MS = flag("--slice-ms", 500);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Messages of the agents' process, consumed in order by op. */
class Inbox {
  readonly #queue: FromAgents[] = [];
  constructor(readonly child: ChildProcess) {
    child.on("message", (m) => this.#queue.push(m as FromAgents));
  }
  async next<K extends FromAgents["op"]>(op: K, timeoutMs: number): Promise<Extract<FromAgents, { op: K }>> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const i = this.#queue.findIndex((m) => m.op === op);
      if (i >= 0) return this.#queue.splice(i, 1)[0] as Extract<FromAgents, { op: K }>;
      if (Date.now() > end || this.child.exitCode !== null) throw new Error(`no ${op} from the agents`);
      await sleep(10);
    }
  }
}

/** Five rules of the kinds an operator sets up, each to one channel (a loopback port nothing listens on: nothing is sent on this path). */
async function addRules(server: AppContext, configId: string, channelId: string): Promise<string[]> {
  const bodies = [
    { name: "offline in config", event: "node.offline", for_s: 60, scope: { config_id: configId } },
    { name: "edge offline", event: "node.offline", for_s: 0, scope: { tag: "edge" } },
    { name: "dropped", event: "node.dropped", for_s: 300, scope: {} },
    { name: "sync stuck", event: "node.sync_stuck", for_s: 600, scope: {} },
    { name: "command failed", event: "command.failed", for_s: 0, scope: {} },
  ] as const;
  const ids: string[] = [];
  for (const b of bodies) ids.push((await server.alertRules.create(createAlertRuleBody.parse({ ...b, channel_ids: [channelId] }))).rule_id);
  return ids;
}

/** One measured window: rules and none alternating every slice, CPU per message summed per state. */
async function alternate(server: AppContext, configId: string, channelId: string): Promise<SliceSummary> {
  const slices = new SwitchedSlices(server.router);
  let ruleIds: string[] = [];
  const t0 = performance.now();
  // ABBA: rules, none, none, rules, … so that neither state always follows the switch's writes.
  for (let i = 0; performance.now() - t0 < MEASURE_MS || i % 2 === 1; i++) {
    const on = i % 4 === 0 || i % 4 === 3;
    if (on && ruleIds.length === 0) ruleIds = await addRules(server, configId, channelId);
    if (!on) for (const id of ruleIds.splice(0)) await server.alertRules.delete(id);
    await sleep(20); // the switch's own writes settle outside the slice
    await slices.slice(on, SLICE_MS);
  }
  for (const id of ruleIds) await server.alertRules.delete(id);
  return slices.summary();
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-alerts-"));
  const agents = fork(AGENTS, [], { cwd: ROOT, execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const inbox = new Inbox(agents);
  const send = (m: ToAgents) => agents.connected && agents.send(m);
  let server: AppContext | undefined;
  let credit: NodeJS.Timeout | undefined;
  try {
    const specs = await seedStore({ file: join(dataDir, "svc.db"), nodes: NODES, snapshot: "offline", onlineTtlMs: ONLINE_TTL_MS, detectTimeoutMs: DETECT_TIMEOUT_MS });
    const settings = testSettings({ dataDir, adminPassword: "bench-admin-password", onlineTtlMs: ONLINE_TTL_MS, detectTimeoutMs: DETECT_TIMEOUT_MS, detectIntervalMs: 3_600_000 });
    server = await createServer(settings, createLogger("silent"), { storeWorker: false });
    const channel = await server.alerts.createChannel({ name: "bench", kind: "webhook", url: "http://127.0.0.1:9/bench" });
    const configId = specs[0]?.configId ?? "";
    send({ op: "connect", port: server.mqtt.broker?.port ?? 0, agents: specs, concurrency: 128 });
    const conn = await inbox.next("connected", 180_000);
    const router = server.router;
    credit = setInterval(() => send({ op: "credit", handled: router.received }), 5);
    send({ op: "flood", window: Math.min(10_000, Math.max(4_000, NODES)), qos: 1, toggle: true });
    await sleep(5_000); // warm: every node online, the JIT settled
    const rows: SliceSummary[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      await awaitQuiet(0.35, 5_000);
      rows.push(await alternate(server, configId, channel.channel_id));
    }
    console.log(`\nAlert rules on the ingest path: ${NODES} nodes (${conn.ok} connected), QoS 1 heartbeats alternating wg_online, ${MEASURE_MS / 1000} s windows of ${SLICE_MS} ms slices\n`);
    console.log("| round | msgs/s | µs/msg, 5 rules | µs/msg, none | rules ÷ none | paired median (Q1–Q3) | slices |");
    console.log("|---|---|---|---|---|---|---|");
    rows.forEach((r, i) =>
      console.log(`| ${i + 1} | ${fmt(r.msgsPerS)} | ${fmt(r.onUs, 1)} | ${fmt(r.offUs, 1)} | ${fmt(((r.onUs / r.offUs) - 1) * 100, 1)} % | ${fmt((r.pairedMedian - 1) * 100, 1)} % (${fmt((r.pairedQ1 - 1) * 100, 1)} – ${fmt((r.pairedQ3 - 1) * 100, 1)} %) | ${r.slices} |`),
    );
    const rules = rows.reduce((a, r) => a + r.onUs, 0) / rows.length;
    const none = rows.reduce((a, r) => a + r.offUs, 0) / rows.length;
    console.log(`\nMean: ${fmt(rules, 1)} µs/msg with 5 rules, ${fmt(none, 1)} µs/msg with none: ${fmt(((rules / none) - 1) * 100, 1)} % (target ≤ 5 %).`);
  } finally {
    if (credit) clearInterval(credit);
    send({ op: "halt" });
    send({ op: "close" });
    await inbox.next("closed", 10_000).catch(() => undefined);
    if (agents.exitCode === null) agents.kill("SIGKILL");
    await server?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
