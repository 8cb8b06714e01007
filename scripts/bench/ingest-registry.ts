/**
 * The registry's share of ingest, without the broker (a benchmark: prints a table, asserts
 * nothing). Its target: service CPU per state-changing message rises by ≤ 5 % with the flight
 * recorder on. The node actor registry over a real SQLite file (seeded like `ingest.ts`: bound, online
 * nodes with real snapshots) gets heartbeats through `post` (the router's call) in bursts of
 * `--burst` messages, each burst followed by a turn of the event loop (its group commit), and
 * the process CPU time (user + system) per message is measured in windows. The windows alternate
 * (A B A B …) between the modes, in one process, so every mode sees the same machine:
 *
 *   - `toggle`: every heartbeat flips `wg_online` (a state change: one flight-recorder row each);
 *   - `toggle-norec`: the same with the recorder off (`NodeActorRegistry.recording`);
 *   - `same`: heartbeats that change nothing but the newest signal (no row).
 *
 *   npx tsx scripts/bench/ingest-registry.ts [--nodes 1000] [--burst 4000] [--window-ms 3000] [--rounds 4]
 *
 * A store only: no broker, no HTTP, no SSE. The CPU is the whole process's (GC included).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NodeActorRegistry } from "../../src/actors/registry.js";
import { systemClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { Store } from "../../src/store/db.js";
import { benchConfigId, benchNodeId, commitStats, fmt, instrumentRegistryCommits, seedStore } from "./ingest-lib.js";
import { sqliteOf } from "../../src/store/connection.js";

const argv = process.argv.slice(2);
const num = (name: string, fallback: number) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const NODES = num("--nodes", 1000);
const BURST = num("--burst", 4000);
const WINDOW_MS = num("--window-ms", 3000);
const ROUNDS = num("--rounds", 4);
const PER_CONFIG = 250;
const MODES = ["toggle", "toggle-norec", "same"] as const;
type Mode = (typeof MODES)[number];

const turn = () => new Promise<void>((r) => setImmediate(r));

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-registry-"));
  try {
    const file = join(dir, "svc.db");
    await seedStore({ file, nodes: NODES, snapshot: "online", onlineTtlMs: 2700_000, detectTimeoutMs: 20_000, perConfig: PER_CONFIG });
    instrumentRegistryCommits();
    const store = await Store.open(file, createLogger("silent"));
    const registry = new NodeActorRegistry({
      store,
      clock: systemClock,
      log: createLogger("silent"),
      onlineTtlMs: 2700_000,
      detectTimeoutMs: 20_000,
      effects: { revokeClient: () => {}, requestConfigPush: () => {} },
      onStatusChanged: () => {},
    });
    await registry.start();
    const ids = Array.from({ length: NODES }, (_, i) => [benchConfigId(Math.floor(i / PER_CONFIG)), benchNodeId(i)] as const);
    const flips = new Array<boolean>(NODES).fill(true);
    let n = 0;
    const burst = (mode: Mode) => {
      for (let k = 0; k < BURST; k++, n++) {
        const i = n % NODES;
        const [configId, nodeId] = ids[i] as readonly [string, string];
        if (mode !== "same") flips[i] = !flips[i];
        registry.post(configId, nodeId, { type: "mqtt.signal", at: Date.now(), source: "heartbeat", wgOnline: flips[i] as boolean });
      }
    };
    const window = async (mode: Mode): Promise<{ cpu: number; commit: number }> => {
      registry.recording = mode !== "toggle-norec";
      if (mode === "same") {
        // Bring every node to wg_online = true once (outside the window), then repeat it.
        for (let i = 0; i < NODES; i++) flips[i] = true;
        burst("same");
        await turn();
      }
      const cpu0 = process.cpuUsage();
      const flush0 = commitStats.flushNs;
      const t0 = performance.now();
      let msgs = 0;
      while (performance.now() - t0 < WINDOW_MS) {
        burst(mode);
        msgs += BURST;
        await turn();
      }
      await turn();
      const cpu = process.cpuUsage(cpu0);
      return { cpu: (cpu.user + cpu.system) / msgs, commit: Number(commitStats.flushNs - flush0) / 1000 / msgs };
    };
    for (const mode of MODES) await window(mode); // warm-up
    const results = new Map<Mode, Array<{ cpu: number; commit: number }>>(MODES.map((m) => [m, []]));
    for (let r = 0; r < ROUNDS; r++) for (const mode of MODES) results.get(mode)?.push(await window(mode));
    const rows = (sqliteOf(store).prepare("SELECT count(*) AS n FROM node_transitions").get() as { n: number }).n;
    await registry.stop();
    await store.close();
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const off = mean((results.get("toggle-norec") ?? []).map((x) => x.cpu));
    console.log(`\n## Registry alone: ${fmt(NODES)} nodes, bursts of ${fmt(BURST)}, ${ROUNDS} rounds of ${WINDOW_MS / 1000} s windows (A B C A B C …); ${fmt(rows)} flight-recorder rows at the end\n`);
    console.log("| mode | CPU µs per message, each window | mean | vs toggle, recorder off | of which in the group commit (wall µs per message, mean) |");
    console.log("|---|---|---:|---:|---:|");
    for (const [mode, xs] of results) {
      const cpu = xs.map((x) => x.cpu);
      const rel = mode === "same" ? "" : `${fmt((mean(cpu) / off - 1) * 100, 1)} %`;
      console.log(`| ${mode} | ${cpu.map((x) => fmt(x, 1)).join(", ")} | **${fmt(mean(cpu), 1)}** | ${rel} | ${fmt(mean(xs.map((x) => x.commit)), 1)} |`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
