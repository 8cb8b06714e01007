/**
 * Flight-recorder read benchmark (target: `/timeline` first page ≤ 10 ms at 500 rows
 * per node and 10,000 nodes). A benchmark, not a test: it prints a markdown table and asserts
 * nothing.
 *
 *   npx tsx scripts/bench/timeline.ts                 # 10,000 nodes × 500 rows (5 M rows)
 *   npx tsx scripts/bench/timeline.ts --nodes 1000 --rows 500 --requests 500
 *
 * A real SQLite file is seeded with `nodes` bound nodes (scripts/bench/ingest-lib.ts `seedStore`)
 * and `rows` transitions per node, inserted round by round across all nodes (row k of every node,
 * then row k+1), so a node's rows are spread over the whole table as they are in service. Then the
 * real service (`createServer`, MQTT off: only the read path is measured) answers
 * `GET /api/v1/configs/{config_id}/nodes/{node_id}/timeline` over real HTTP on loopback, admin
 * token, for random nodes: the first page (default limit 50), the first page with limit 500, and
 * the second page (`before` from the first). Latency is measured by the client, request to parsed
 * JSON, sequentially (no queueing).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { Store } from "../../src/store/db.js";
import { appendNodeTransitions, type NewNodeTransition } from "../../src/store/node-transitions.repository.js";
import { benchConfigId, benchNodeId, fmt, percentile, seedStore } from "./ingest-lib.js";
import { sqliteOf } from "../../src/store/connection.js";

const argv = process.argv.slice(2);
function num(name: string, fallback: number): number {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
}
const NODES = num("--nodes", 10_000);
const ROWS = num("--rows", 500);
const REQUESTS = num("--requests", 2000);
const PER_CONFIG = 250;
const ADMIN_PASSWORD = "bench-admin-password";

const VALUES = [
  { mode: "dynamic", initialization: "initialized", presence: { online: "fresh" }, runtime: "running", bindToken: "used", sync: "latest", probe: "idle" },
  { mode: "dynamic", initialization: "initialized", presence: "dropped", runtime: "unknown", bindToken: "used", sync: "latest", probe: "idle" },
  { mode: "dynamic", initialization: "initialized", presence: "offline", runtime: "unknown", bindToken: "used", sync: "latest", probe: "idle" },
].map((v) => JSON.stringify(v));

/**
 * Appends `rows` transitions per node, round by round (one transaction per round, through the
 * group commit's own `appendNodeTransitions`, so rows have the layout of migration 0010), then
 * stores each node's newest row in its `node_client_state.transition_head`; returns the seconds
 * it took.
 */
function seedTransitions(store: Store): number {
  const started = performance.now();
  const heads = new Map<string, number>();
  const t0 = Date.now() - ROWS * 60_000;
  for (let r = 0; r < ROWS; r++) {
    const batch: NewNodeTransition[] = [];
    for (let i = 0; i < NODES; i++) {
      batch.push({
        node_id: benchNodeId(i),
        at: t0 + r * 60_000 + i,
        event: r % 2 ? "mqtt.will" : "mqtt.signal",
        source: r % 2 ? "will" : "heartbeat",
        request_id: null,
        route: null,
        value_before: VALUES[r % 3] ?? null,
        value_after: VALUES[(r + 1) % 3] ?? "{}",
        changes: "{}",
      });
    }
    sqliteOf(store).transaction(() => {
      for (const [first, head] of appendNodeTransitions(sqliteOf(store), batch, (t) => heads.get(t.node_id) ?? null).heads) heads.set(first.node_id, head);
    })();
  }
  const head = sqliteOf(store).prepare("UPDATE node_client_state SET transition_head = ? WHERE node_id = ?");
  sqliteOf(store).transaction(() => {
    for (const [nodeId, id] of heads) head.run(id, nodeId);
  })();
  return (performance.now() - started) / 1000;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-timeline-"));
  try {
    const file = join(dataDir, "svc.db");
    await seedStore({ file, nodes: NODES, snapshot: "online", onlineTtlMs: 2700_000, detectTimeoutMs: 20_000, perConfig: PER_CONFIG });
    const seedStoreHandle = await Store.open(file, createLogger("silent"));
    const seedS = seedTransitions(seedStoreHandle);
    await seedStoreHandle.close();
    const settings = testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, mqttEnabled: false, timelineMaxPerNode: ROWS });
    const server = await createServer(settings, createLogger("silent"));
    try {
      const base = await server.app.listen({ host: "127.0.0.1", port: 0 });
      const login = (await (await fetch(`${base}/api/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ password: ADMIN_PASSWORD }) })).json()) as { access_token: string };
      const auth = { authorization: `Bearer ${login.access_token}` };
      const count = (sqliteOf(server.store).prepare("SELECT count(*) AS n FROM node_transitions").get() as { n: number }).n;
      const get = async (path: string) => {
        const started = performance.now();
        const res = await fetch(`${base}${path}`, { headers: auth });
        const body = (await res.json()) as { transitions: unknown[]; next_before: number | null };
        if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
        return { ms: performance.now() - started, body };
      };
      let seed = 12345;
      const random = () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      };
      const pathOf = (i: number) => `/api/v1/configs/${benchConfigId(Math.floor(i / PER_CONFIG))}/nodes/${benchNodeId(i)}/timeline`;
      for (let i = 0; i < 50; i++) await get(pathOf(Math.floor(random() * NODES))); // warm-up
      const cases: Array<{ label: string; ms: number[]; rows: number }> = [
        { label: "first page (limit 50)", ms: [], rows: 0 },
        { label: "first page, limit 500", ms: [], rows: 0 },
        { label: "second page (limit 50, `before`)", ms: [], rows: 0 },
      ];
      const [first, big, second] = cases as [typeof cases[0], typeof cases[0], typeof cases[0]];
      for (let k = 0; k < REQUESTS; k++) {
        const path = pathOf(Math.floor(random() * NODES));
        const a = await get(path);
        first.ms.push(a.ms);
        first.rows = a.body.transitions.length;
        const b = await get(`${path}?before=${a.body.next_before}`);
        second.ms.push(b.ms);
        second.rows = b.body.transitions.length;
        if (k % 4 === 0) {
          const c = await get(`${path}?limit=500`);
          big.ms.push(c.ms);
          big.rows = c.body.transitions.length;
        }
      }
      console.log(`\n## /timeline reads: ${fmt(NODES)} nodes × ${fmt(ROWS)} rows (${fmt(count)} rows in node_transitions; seeded in ${fmt(seedS, 1)} s)\n`);
      console.log("| request | rows answered | requests | p50 ms | p90 ms | p99 ms | max ms | target |");
      console.log("|---|---|---|---|---|---|---|---|");
      for (const c of cases) {
        const sorted = [...c.ms].sort((x, y) => x - y);
        console.log(
          `| ${c.label} | ${c.rows} | ${c.ms.length} | ${fmt(percentile(sorted, 50), 2)} | ${fmt(percentile(sorted, 90), 2)} | **${fmt(percentile(sorted, 99), 2)}** | ${fmt(sorted[sorted.length - 1] ?? 0, 2)} | ${c === first ? "≤ 10 ms" : ""} |`,
        );
      }
    } finally {
      await server.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
