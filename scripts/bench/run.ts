/**
 * Benchmarks of mesh writes at scale (a benchmark, not a test: it prints tables and
 * asserts nothing).
 *
 *   npm run bench                    # full meshes of 100 and 1,000 nodes
 *   npm run bench -- --big           # and 5,000 (builds take minutes), with its backups
 *   npm run bench -- --sizes 100,500 # chosen sizes
 *   npm run bench -- --big --sizes 5000  # only the 5,000-node mesh and its backups
 *
 * Over a real SQLite file and the real HTTP stack on loopback (the server in this process), for
 * a full mesh of N static nodes built over REST:
 * - build: total time, the time to create the 100th and the Nth node (medians of five);
 * - writes on the N-node mesh (medians of three; six for pairs): remove a node, change a node's
 *   endpoint, toggle a pair (disable, enable), switch the protocol (every config changes);
 * - the event loop's largest delay (`perf_hooks.monitorEventLoopDelay`, 10 ms resolution)
 *   during the build and during the single writes;
 * - downloads/s of the largest node config (N − 1 peers), 16 concurrent;
 * - the mesh page's reads: `GET /configs/{id}` (config, nodes, tags: the mesh page's workspace)
 *   and `GET /configs/{id}/mesh-pairs` (its first page: 10,000 pairs at most);
 * - the database file and its WAL right after the build and again after 2 s without writes (MB:
 *   what a build leaves behind once the store worker's checkpoint has run), and the machine's
 *   load average before and after (the figures swing with it);
 * - with `--big`, on the largest mesh once the rest is measured: snapshot create, export
 *   (download), import (upload) and restore over HTTP, the snapshot's size and the database + WAL
 *   after the restore (scripts/bench/backups.ts).
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { attributeStalls } from "./stalls.js";
import { measureBackups, printBackups, type BackupRow } from "./backups.js";

function sizesFromArgs(argv: string[]): number[] {
  const i = argv.indexOf("--sizes");
  if (i >= 0) return (argv[i + 1] ?? "").split(",").map(Number).filter((n) => n > 0);
  const plain = argv.find((a) => /^\d+$/.test(a));
  if (plain !== undefined) return [...new Set([100, Number(plain)])].filter((n) => n <= Number(plain));
  return argv.includes("--big") ? [100, 1000, 5000] : [100, 1000];
}

interface Row {
  nodes: number;
  buildS: number;
  create100Ms: number;
  createNthMs: number;
  removeMs: number;
  endpointMs: number;
  pairToggleMs: number;
  protocolMs: number;
  loopMaxBuildMs: number;
  loopMaxWritesMs: number;
  downloadsPerS: number;
  configGetMs: number;
  pairsGetMs: number;
  /** Database file + WAL right after the build, MB. */
  dbMb: number;
  /** Database file + WAL after 2 s without writes following the build, MB. */
  dbIdleMb: number;
}

type Api = (method: string, path: string, body?: unknown) => Promise<{ ms: number; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function timed(api: Api, method: string, path: string, body?: unknown): Promise<number> {
  return (await api(method, path, body)).ms;
}

async function measure(nodes: number, withBackups: boolean): Promise<Row & { backups?: BackupRow }> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-"));
  const server = await createServer(testSettings({ dataDir, adminPassword: "bench-password" }), createLogger("silent"));
  const loop = monitorEventLoopDelay({ resolution: 10 });
  // What the loop was doing when it stalled: printed to stderr beside the table's maxima.
  const stalls = attributeStalls(40);
  try {
    const base = await server.app.listen({ host: "127.0.0.1", port: 0 });
    let auth: Record<string, string> = {};
    const api: Api = async (method, path, body) => {
      const t0 = performance.now();
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { ...auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      const ms = performance.now() - t0;
      if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
      return { ms, body: text === "" ? null : JSON.parse(text) };
    };
    const login = await api("POST", "/api/v1/auth/login", { password: "bench-password" });
    auth = { authorization: `Bearer ${login.body.access_token}` };
    const config = (await api("POST", "/api/v1/configs", { name: "bench", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/16" })).body;
    const cfg = `/api/v1/configs/${config.config_id}`;
    const newNode = (i: number) => ({ name: `n${i}`, mode: "static", public_address: `192.0.2.${(i % 250) + 1}`, listen_port: 10000 + i });

    const ids: string[] = [];
    const createMs: number[] = [];
    loop.enable();
    stalls.label = "build";
    const tBuild = performance.now();
    for (let i = 0; i < nodes; i++) {
      const { ms, body } = await api("POST", `${cfg}/nodes`, newNode(i));
      createMs.push(ms);
      ids.push(body.node_id);
      if ((i + 1) % 500 === 0) console.error(`  ${i + 1} nodes after ${((performance.now() - tBuild) / 1000).toFixed(0)} s; last create ${ms.toFixed(0)} ms`);
    }
    // Medians of five, the machine being shared: the 96th–100th and the last five creates.
    const create100Ms = median(createMs.slice(95, 100));
    const createNthMs = median(createMs.slice(-5));
    const buildS = (performance.now() - tBuild) / 1000;
    const size = (file: string) => {
      try {
        return statSync(join(dataDir, file)).size;
      } catch {
        return 0;
      }
    };
    const dbMb = (size("svc.db") + size("svc.db-wal")) / 1e6;
    loop.disable();
    stalls.label = "2 s idle after the build";
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const dbIdleMb = (size("svc.db") + size("svc.db-wal")) / 1e6;
    const loopMaxBuildMs = loop.max / 1e6;
    loop.reset();

    loop.enable();
    const removes: number[] = [];
    stalls.label = "remove";
    for (let i = 0; i < 3; i++) removes.push(await timed(api, "DELETE", `${cfg}/nodes/${ids.pop() ?? ""}`));
    const endpoints: number[] = [];
    stalls.label = "endpoint change";
    for (let i = 1; i <= 3; i++) endpoints.push(await timed(api, "PATCH", `${cfg}/nodes/${ids[i]}`, { public_address: `198.51.100.${i}`, listen_port: 40000 + i }));
    const pairIds: string[] = [];
    stalls.label = "pair lookup";
    for (const id of ids.slice(4, 7)) pairIds.push((await api("GET", `${cfg}/mesh-pairs?node_id=${id}&limit=1`)).body.mesh_pairs[0].pair_id);
    const toggles: number[] = [];
    stalls.label = "pair toggle";
    for (const pairId of pairIds) {
      toggles.push(await timed(api, "PATCH", `${cfg}/mesh-pairs/${pairId}`, { enabled: false }));
      toggles.push(await timed(api, "PATCH", `${cfg}/mesh-pairs/${pairId}`, { enabled: true }));
    }
    const [removeMs, endpointMs, pairToggleMs] = [median(removes), median(endpoints), median(toggles)];
    stalls.label = "protocol switch";
    const protocolMs = await timed(api, "PATCH", cfg, { tunnel_protocol: "awg_2" });
    loop.disable();
    stalls.label = "reads and downloads";
    console.error(`  largest stalls at ${nodes} nodes (build and writes): ${stalls.top(5).join("; ") || "none ≥ 40 ms"}`);
    const loopMaxWritesMs = loop.max / 1e6;

    const configGets: number[] = [];
    for (let i = 0; i < 5; i++) configGets.push(await timed(api, "GET", cfg));
    const configGetMs = configGets.sort((a, b) => a - b)[2] ?? 0;
    const pairsGetMs = await timed(api, "GET", `${cfg}/mesh-pairs`); // the first page (≤ 10,000 pairs)

    const token = (await api("POST", `${cfg}/nodes/${ids[0]}/download-token`)).body;
    const url = `${base}${token.download_path}`;
    await (await fetch(url)).text(); // the first download renders it (lazy staging)
    const downloads = 800;
    let next = 0;
    const t3 = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next++ < downloads) await (await fetch(url)).text();
      }),
    );
    const downloadsPerS = (downloads / (performance.now() - t3)) * 1000;
    const backups = withBackups ? await measureBackups(base, auth, dataDir) : undefined;
    return { backups, nodes, buildS, create100Ms, createNthMs, removeMs, endpointMs, pairToggleMs, protocolMs, loopMaxBuildMs, loopMaxWritesMs, downloadsPerS, configGetMs, pairsGetMs, dbMb, dbIdleMb };
  } finally {
    loop.disable();
    stalls.stop();
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

const load = () => loadavg().map((l) => l.toFixed(2)).join(", ");
const loadBefore = load();
const rows: (Row & { backups?: BackupRow })[] = [];
const sizes = sizesFromArgs(process.argv.slice(2));
const backupsOf = process.argv.includes("--big") ? Math.max(...sizes) : -1;
for (const n of sizes) {
  rows.push(await measure(n, n === backupsOf));
  console.error(`measured ${n} nodes`);
}
const f = (n: number | null, d = 1) => (n === null ? "–" : n.toFixed(d));
console.log("\nFull mesh of N static nodes built over REST; single writes on the N-node mesh (server in this process, loopback)\n");
console.log("| nodes | build (s) | create 100th (ms) | create Nth (ms) | remove (ms) | endpoint change (ms) | pair toggle (ms) | protocol switch (ms) | loop max, build (ms) | loop max, writes (ms) | downloads/s, largest config | GET config (ms) | GET mesh-pairs (ms) | database + WAL (MB) | database + WAL after 2 s idle (MB) |");
console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.nodes} | ${f(r.buildS)} | ${f(r.create100Ms)} | ${f(r.createNthMs)} | ${f(r.removeMs)} | ${f(r.endpointMs)} | ${f(r.pairToggleMs)} | ${f(r.protocolMs)} | ${f(r.loopMaxBuildMs)} | ${f(r.loopMaxWritesMs)} | ${f(r.downloadsPerS, 0)} | ${f(r.configGetMs)} | ${f(r.pairsGetMs)} | ${f(r.dbMb, 0)} | ${f(r.dbIdleMb, 0)} |`,
  );
}
const backupRows = rows.flatMap((r) => (r.backups === undefined ? [] : [{ nodes: r.nodes, ...r.backups }]));
if (backupRows.length > 0) printBackups(backupRows);
console.log(`\nLoad average (1, 5, 15 min) before: ${loadBefore}; after: ${load()} (${cpus().length} cores)`);
