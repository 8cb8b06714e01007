/**
 * Lists for big fleets: pages of 100 of a 100,000-node config over real HTTP.
 *
 *   npx tsx scripts/bench/lists.ts [nodes=100000] [requests=200]
 *
 * Seeds one config with `nodes` nodes directly through the store (one transaction; 20 % dynamic,
 * a tag on every 10th node; presence and sync states set once the service has started), starts the service in this
 * process on that data directory (embedded broker on port 0), and times each case `requests`
 * times with `fetch` from this process (request to parsed JSON). The cases are interleaved
 * request by request (A B C … A B C …), so load on the shared machine falls on all alike.
 * Prints p50, p99 and max per case in ms, and asserts nothing.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { encodeCursor } from "../../src/services/list-cursor.js";
import { createServer } from "../../src/server.js";
import { Store } from "../../src/store/db.js";
import { sqliteOf } from "../../src/store/connection.js";

const N = Number(process.argv[2] ?? 100_000);
const REQUESTS = Number(process.argv[3] ?? 200);
const PASSWORD = "bench-lists-password";
const CONFIG = "cfg-benchlists00000000";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** Seeds the config and its nodes in one transaction; returns the sort key of node `i`. */
async function seed(dataDir: string): Promise<(i: number) => { at: number; id: string }> {
  const store = await Store.open(join(dataDir, "svc.db"), createLogger("silent"));
  const t0 = 1_700_000_000_000;
  const key = (i: number) => ({ at: t0 + i, id: `node-${String(i).padStart(16, "0")}` });
  const s = sqliteOf(store);
  const started = performance.now();
  s.transaction(() => {
    s.prepare("INSERT INTO configs (config_id, name, tunnel_protocol, network_cidr, created_at, updated_at) VALUES (?, 'fleet', 'wireguard', '10.0.0.0/8', ?, ?)").run(CONFIG, t0, t0);
    const node = s.prepare(`INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key,
      staged_config_version, staged_config_sha256, confirmed_config_sha256, created_at, updated_at)
      VALUES (?, ?, ?, ?, 'svc0', ?, 'k', 'K', 1, ?, ?, ?, ?)`);
    const client = s.prepare("INSERT INTO node_client_state (node_id, client_initialized, client_presence_state, runtime_state, updated_at) VALUES (?, ?, ?, ?, ?)");
    const tag = s.prepare("INSERT INTO node_tags (node_id, tag) VALUES (?, 'edge')");
    for (let i = 0; i < N; i++) {
      const { at, id } = key(i);
      const dynamic = i % 5 === 0;
      const staged = sha(id);
      // States are set after the service has started (below).
      node.run(id, CONFIG, `node-${i}`, dynamic ? "dynamic" : "static", `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, staged, null, at, at);
      client.run(id, dynamic ? 1 : 0, "offline", "unknown", at);
      if (i % 10 === 0) tag.run(id);
    }
  })();
  console.log(`seeded ${N} nodes in ${(performance.now() - started).toFixed(0)} ms`);
  s.pragma("optimize");
  await store.close();
  return key;
}

function pct(xs: number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-lists-"));
  try {
    const key = await seed(dataDir);
    const startedAt = performance.now();
    const server = await createServer(testSettings({ dataDir, adminPassword: PASSWORD, mqttEnabled: true }), createLogger("silent"));
    console.log(`service started over ${N} nodes in ${(performance.now() - startedAt).toFixed(0)} ms`);
    // Client states after start (the service's start-up projects stored presence and re-stages):
    // dynamic nodes 60 % online, 10 % dropped, 30 % offline; half of them confirmed (latest).
    const s = sqliteOf(server.store);
    s.transaction(() => {
      s.exec(`UPDATE node_client_state SET client_initialized = 1, client_presence_state = CASE
          WHEN CAST(substr(node_id, 6) AS INTEGER) % 50 = 0 THEN 'dropped'
          WHEN CAST(substr(node_id, 6) AS INTEGER) % 3 = 0 THEN 'offline' ELSE 'online' END
        WHERE node_id IN (SELECT node_id FROM nodes WHERE mode = 'dynamic')`);
      s.exec(`UPDATE nodes SET confirmed_config_sha256 = staged_config_sha256
        WHERE mode = 'dynamic' AND CAST(substr(node_id, 6) AS INTEGER) % 2 = 0`);
    })();
    try {
      const base = (await server.app.listen({ host: "127.0.0.1", port: 0 })).replace("localhost", "127.0.0.1");
      const login = await fetch(`${base}/api/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ password: PASSWORD }) });
      const token = ((await login.json()) as { access_token: string }).access_token;
      const nodes = `/api/v1/configs/${CONFIG}/nodes`;
      const at = (i: number) => {
        const k = key(i);
        return encodeURIComponent(encodeCursor({ l: "nodes", c: CONFIG, at: k.at, id: k.id }));
      };
      const cases: Array<[string, string]> = [
        ["page 1", `${nodes}?limit=100`],
        ["middle page (after node N/2)", `${nodes}?limit=100&cursor=${at(Math.floor(N / 2))}`],
        ["last page", `${nodes}?limit=100&cursor=${at(N - 50)}`],
        ["presence=online (12 % of nodes)", `${nodes}?limit=100&presence=online`],
        ["presence=dropped (2 %), middle", `${nodes}?limit=100&presence=dropped&cursor=${at(Math.floor(N / 2))}`],
        ["sync=latest (10 %)", `${nodes}?limit=100&sync=latest`],
        ["mode=dynamic&sync=pending (10 %), middle", `${nodes}?limit=100&mode=dynamic&sync=pending&cursor=${at(Math.floor(N / 2))}`],
        ["q=edge (tag, 10 %)", `${nodes}?limit=100&q=edge`],
        ["q=node-9999 (name, 0.01 %)", `${nodes}?limit=100&q=node-9999`],
        ["node-counts (all states)", `/api/v1/configs/${CONFIG}/node-counts`],
        ["node-counts&presence=online", `/api/v1/configs/${CONFIG}/node-counts?presence=online`],
      ];
      const times = new Map<string, number[]>(cases.map(([name]) => [name, []]));
      const rows = new Map<string, number>();
      const get = async (path: string) => {
        const res = await fetch(base + path, { headers: { authorization: `Bearer ${token}` } });
        if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
        return (await res.json()) as { nodes?: unknown[] };
      };
      for (const [, path] of cases) await get(path); // warm-up: statements prepared, pages cached
      for (let r = 0; r < REQUESTS; r++) {
        for (const [name, path] of cases) {
          const t = performance.now();
          const body = await get(path);
          times.get(name)?.push(performance.now() - t);
          rows.set(name, body.nodes?.length ?? -1);
          if (r === 0 && body.nodes === undefined && name === "node-counts (all states)") console.log(JSON.stringify(body));
        }
      }
      // Before: the list had no pages; its answer was every node. Its server work (the service
      // call the old route made, and the JSON of the answer) timed in-process, a few times.
      const before: number[] = [];
      for (let r = 0; r < 5; r++) {
        const t = performance.now();
        JSON.stringify({ nodes: await server.mesh.listNodes(CONFIG) });
        before.push(performance.now() - t);
      }
      console.log(`before (no pages): the whole list of ${N} nodes, server work only: p50 ${pct(before, 50).toFixed(0)} ms, max ${Math.max(...before).toFixed(0)} ms`);
      console.log(`\n${N} nodes in one config, ${REQUESTS} requests per case, interleaved; ms from request to parsed JSON\n`);
      console.log("| case | rows | p50 ms | p99 ms | max ms |");
      console.log("|---|---:|---:|---:|---:|");
      for (const [name] of cases) {
        const xs = times.get(name) ?? [];
        const n = rows.get(name) ?? -1;
        console.log(`| ${name} | ${n < 0 ? "counts" : n} | ${pct(xs, 50).toFixed(1)} | ${pct(xs, 99).toFixed(1)} | ${Math.max(...xs).toFixed(1)} |`);
      }
    } finally {
      await server.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
