/**
 * Benchmarks of the foundation (a benchmark, not a test: it prints a table and asserts nothing).
 *
 *   npm run bench            # all
 *   npm run bench -- 250     # largest mesh size
 *
 * Measures, over a real SQLite file and the real HTTP stack on loopback:
 * - creating the Nth node of a full mesh over REST (every write re-stages every node's config);
 * - a re-stage of a whole config that changes every node (a protocol switch);
 * - node config downloads per second through a real listener (sequential and 16 concurrent).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";

const largest = Number(process.argv[2] ?? 250);
const sizes = [50, 100, largest].filter((n, i, all) => n <= largest && all.indexOf(n) === i);

interface Row {
  nodes: number;
  createLastMs: number;
  restageAllMs: number;
  downloadSeqPerS: number;
  downloadPar16PerS: number;
}

async function measure(nodes: number): Promise<Row> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-"));
  const server = await createServer(testSettings({ dataDir, adminPassword: "bench-password" }), createLogger("silent"));
  try {
    const base = await server.app.listen({ host: "127.0.0.1", port: 0 });
    const login = await json(await fetch(`${base}/api/v1/auth/login`, post({ password: "bench-password" })));
    const auth = { authorization: `Bearer ${login.access_token}` };
    const config = await json(await fetch(`${base}/api/v1/configs`, post({ name: "bench", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/16" }, auth)));
    const ids: string[] = [];
    let createLastMs = 0;
    for (let i = 0; i < nodes; i++) {
      const t0 = performance.now();
      const res = await fetch(`${base}/api/v1/configs/${config.config_id}/nodes`, post({ name: `n${i}`, mode: "static", public_address: `192.0.2.${(i % 250) + 1}`, listen_port: 10000 + i }, auth));
      createLastMs = performance.now() - t0;
      ids.push((await json(res)).node_id);
    }
    const t1 = performance.now();
    await fetch(`${base}/api/v1/configs/${config.config_id}`, { ...post({ tunnel_protocol: "awg_2" }, auth), method: "PATCH" });
    const restageAllMs = performance.now() - t1;

    const token = await json(await fetch(`${base}/api/v1/configs/${config.config_id}/nodes/${ids[0]}/download-token`, { method: "POST", headers: auth }));
    const url = `${base}${token.download_path}`;
    const seqN = 300;
    const t2 = performance.now();
    for (let i = 0; i < seqN; i++) await (await fetch(url)).text();
    const downloadSeqPerS = (seqN / (performance.now() - t2)) * 1000;
    const parN = 1600;
    let next = 0;
    const t3 = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next++ < parN) await (await fetch(url)).text();
      }),
    );
    const downloadPar16PerS = (parN / (performance.now() - t3)) * 1000;
    return { nodes, createLastMs, restageAllMs, downloadSeqPerS, downloadPar16PerS };
  } finally {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Parsed JSON body; the bench reads known fields of its own service's answers. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function json(res: Response): Promise<any> {
  return res.json();
}

function post(body: unknown, headers: Record<string, string> = {}): RequestInit {
  return { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) };
}

const rows: Row[] = [];
for (const n of sizes) rows.push(await measure(n));
console.log("\nFull-mesh config: REST writes re-stage every node; downloads through a real listener on loopback\n");
console.log("| nodes | create Nth node (ms) | re-stage all, protocol switch (ms) | downloads/s sequential | downloads/s 16 concurrent |");
console.log("|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.nodes} | ${r.createLastMs.toFixed(1)} | ${r.restageAllMs.toFixed(1)} | ${r.downloadSeqPerS.toFixed(0)} | ${r.downloadPar16PerS.toFixed(0)} |`,
  );
}
