/**
 * The mesh page's workspace: `GET /api/v1/configs/{id}` (the config with every
 * node view and its tags) for a config of N nodes, over real HTTP.
 *
 *   npx tsx scripts/bench/workspace.ts [nodes=5000] [requests=100]
 *
 * Seeds one config with `nodes` nodes directly through the store (one transaction; 20 % dynamic,
 * every node a `site-*` tag of eight, every 10th also `edge`; endpoints, ports, keys and shas of
 * real lengths). The answer does not read `mesh_pairs`, so none are seeded: a full mesh's n²/2
 * pair rows do not change it (docs/benchmarks.md). Starts the service in this process on that
 * data directory (embedded broker on port 0), sets presence and sync states, and times the route
 * `requests` times with `fetch` from this process (request to the whole body read). Prints p50,
 * p99 and max in ms; the process's CPU time (user + system) per request, server and client
 * together, which moves less with the machine's load than the times do; the answer's bytes and
 * their SHA-256 (so that two builds can be checked to answer the same bytes); and the load
 * average before and after. Asserts nothing.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { Store } from "../../src/store/db.js";
import { sqliteOf } from "../../src/store/connection.js";

const N = Number(process.argv[2] ?? 5_000);
const REQUESTS = Number(process.argv[3] ?? 100);
const PASSWORD = "bench-workspace-password";
const CONFIG = "cfg-benchworkspace0000";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const fakeKey = (s: string) => createHash("sha256").update(s).digest("base64");

/** Seeds the config and its nodes in one transaction (fixed times and values: the same bytes on every run). */
async function seed(dataDir: string): Promise<void> {
  const store = await Store.open(join(dataDir, "svc.db"), createLogger("silent"));
  const t0 = 1_700_000_000_000;
  const s = sqliteOf(store);
  s.transaction(() => {
    s.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES (?, 'mesh', 'wireguard', '10.0.0.0/16', ?, ?)").run(CONFIG, t0, t0);
    const node = s.prepare(`INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, public_address, listen_port, private_key, public_key,
      staged_config_version, staged_config_sha256, confirmed_config_sha256, created_at, updated_at)
      VALUES (?, ?, ?, ?, 'svc0', ?, ?, ?, 'k', ?, 1, ?, NULL, ?, ?)`);
    const client = s.prepare("INSERT INTO node_client_state (node_id, client_initialized, client_presence_state, runtime_state, updated_at) VALUES (?, 0, 'offline', 'unknown', ?)");
    const tag = s.prepare("INSERT INTO node_tags (node_id, tag) VALUES (?, ?)");
    for (let i = 0; i < N; i++) {
      const id = `node-${String(i).padStart(16, "0")}`;
      const at = t0 + i;
      node.run(id, CONFIG, `n${i}`, i % 5 === 0 ? "dynamic" : "static", `10.0.${(i >> 8) & 255}.${i & 255}`, `192.0.2.${(i % 250) + 1}`, 10000 + i, fakeKey(id), sha(id), at, at);
      client.run(id, at);
      tag.run(id, `site-${i % 8}`);
      if (i % 10 === 0) tag.run(id, "edge");
    }
  })();
  s.pragma("optimize");
  await store.close();
}

function pct(xs: number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

const load = () => loadavg().map((l) => l.toFixed(2)).join(", ");

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-workspace-"));
  try {
    await seed(dataDir);
    const server = await createServer(testSettings({ dataDir, adminPassword: PASSWORD, mqttEnabled: true }), createLogger("silent"));
    // Client states after start (start-up projects stored presence): dynamic nodes initialized,
    // 60 % online, 10 % dropped, 30 % offline, with a client version and a last reachable time;
    // half of them confirmed (latest).
    const s = sqliteOf(server.store);
    s.transaction(() => {
      s.exec(`UPDATE node_client_state SET client_initialized = 1, client_version = '1.4.2', runtime_state = 'running',
          last_reachable_at = 1700000500000 + CAST(substr(node_id, 6) AS INTEGER), client_presence_state = CASE
          WHEN CAST(substr(node_id, 6) AS INTEGER) % 50 = 0 THEN 'dropped'
          WHEN CAST(substr(node_id, 6) AS INTEGER) % 3 = 0 THEN 'offline' ELSE 'online' END
        WHERE node_id IN (SELECT node_id FROM nodes WHERE mode = 'dynamic')`);
      s.exec(`UPDATE nodes SET confirmed_config_sha256 = staged_config_sha256, confirmed_config_version = 1
        WHERE mode = 'dynamic' AND CAST(substr(node_id, 6) AS INTEGER) % 2 = 0`);
    })();
    try {
      const base = (await server.app.listen({ host: "127.0.0.1", port: 0 })).replace("localhost", "127.0.0.1");
      const login = await fetch(`${base}/api/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ password: PASSWORD }) });
      const token = ((await login.json()) as { access_token: string }).access_token;
      const get = async () => {
        const res = await fetch(`${base}/api/v1/configs/${CONFIG}`, { headers: { authorization: `Bearer ${token}` } });
        const body = await res.text();
        if (!res.ok) throw new Error(`${res.status} ${body.slice(0, 200)}`);
        return body;
      };
      const first = await get(); // warm-up: statements prepared, pages cached, code optimized
      for (let r = 0; r < 4; r++) await get();
      const loadBefore = load();
      const times: number[] = [];
      const cpu0 = process.cpuUsage();
      for (let r = 0; r < REQUESTS; r++) {
        const t = performance.now();
        const body = await get();
        times.push(performance.now() - t);
        if (body !== first) throw new Error("the answer changed between requests");
      }
      const cpu = process.cpuUsage(cpu0);
      const cpuMs = (cpu.user + cpu.system) / 1000 / REQUESTS;
      console.log(`\nGET /api/v1/configs/{id} of a config of ${N} nodes, ${REQUESTS} requests one after another; ms from request to the whole body\n`);
      console.log("| nodes | p50 ms | p99 ms | max ms | CPU ms per request | answer bytes | answer SHA-256 (first 16) |");
      console.log("|---:|---:|---:|---:|---:|---:|---|");
      console.log(`| ${N} | ${pct(times, 50).toFixed(1)} | ${pct(times, 99).toFixed(1)} | ${Math.max(...times).toFixed(1)} | ${cpuMs.toFixed(1)} | ${Buffer.byteLength(first)} | ${sha(first).slice(0, 16)} |`);
      console.log(`\nLoad average (1, 5, 15 min) before: ${loadBefore}; after: ${load()} (${cpus().length} cores)`);
    } finally {
      await server.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
