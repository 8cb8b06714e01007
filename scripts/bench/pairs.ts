/**
 * The mesh page's pair reads and workspace events at scale (docs/history/decisions-2026.md
 * "pairs and workspace events at scale"; a benchmark, not a test: it prints a table and
 * asserts nothing).
 *
 *   npx tsx scripts/bench/pairs.ts            # a full mesh of 1,000 static nodes
 *   npx tsx scripts/bench/pairs.ts 300        # of 300
 *
 * Over a real SQLite file and the real HTTP stack on loopback (the server in this process). The
 * mesh is built through the mesh service (no subscriber: no events), then, medians of three:
 * - `GET …/mesh-pairs` without a query (the first page; before the pair list was paged, every pair), with
 *   `node_id=` (one node's n − 1 pairs), and every page in turn (all n²/2 pairs);
 * - one node created over REST with an SSE subscriber connected: the answer's time, the time
 *   until the write's last frame (`system.status.updated`) reached the subscriber, the frames
 *   and bytes that write sent, and the event loop's largest delay meanwhile.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";

const nodes = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 1000);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-pairs-"));
const server = await createServer(testSettings({ dataDir, adminPassword: "bench-password" }), createLogger("silent"));
try {
  const base = await server.app.listen({ host: "127.0.0.1", port: 0 });
  const login = (await (await fetch(`${base}/api/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ password: "bench-password" }) })).json()) as { access_token: string };
  const auth = { authorization: `Bearer ${login.access_token}` };
  const get = async (path: string) => {
    const t0 = performance.now();
    const res = await fetch(`${base}${path}`, { headers: auth });
    const text = await res.text();
    if (res.status >= 400) throw new Error(`GET ${path}: ${res.status} ${text.slice(0, 200)}`);
    return { ms: performance.now() - t0, bytes: text.length, body: JSON.parse(text) };
  };

  const cfg = await server.mesh.createConfig({ name: "bench", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/16" });
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < nodes; i++) {
    ids.push((await server.mesh.createNode(cfg.config_id, { name: `n${i}`, mode: "static", public_address: `192.0.2.${(i % 250) + 1}`, listen_port: 10000 + i })).node_id);
    if ((i + 1) % 250 === 0) console.error(`  ${i + 1} nodes after ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  }
  await server.mesh.settled();
  const pairsPath = `/api/v1/configs/${cfg.config_id}/mesh-pairs`;

  const first: number[] = [];
  const ofNode: number[] = [];
  const every: number[] = [];
  let firstBytes = 0;
  let firstRows = 0;
  let allRows = 0;
  for (let k = 0; k < 3; k++) {
    const f = await get(pairsPath);
    first.push(f.ms);
    firstBytes = f.bytes;
    firstRows = f.body.mesh_pairs.length;
    ofNode.push((await get(`${pairsPath}?node_id=${ids[k]}`)).ms);
    // Every page in turn (before the pair list was paged, the first answer held every pair).
    const t = performance.now();
    let rows = f.body.mesh_pairs.length;
    let cursor: string | null = f.body.next_cursor ?? null;
    while (cursor !== null) {
      const p = await get(`${pairsPath}?cursor=${encodeURIComponent(cursor)}`);
      rows += p.body.mesh_pairs.length;
      cursor = p.body.next_cursor;
    }
    every.push(f.ms + performance.now() - t);
    allRows = rows;
  }

  // One node created with an SSE subscriber connected.
  const stream = await fetch(`${base}/api/v1/events/stream`, { headers: { ...auth, accept: "text/event-stream" } });
  const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  /** Reads frames until one of `type`; returns how many frames and bytes were read. */
  const readUntil = async (type: string) => {
    let frames = 0;
    let bytes = 0;
    for (;;) {
      const i = buffered.indexOf("\n\n");
      if (i >= 0) {
        const frame = buffered.slice(0, i);
        buffered = buffered.slice(i + 2);
        frames++;
        bytes += frame.length;
        if (frame.includes(`event: ${type}\n`)) return { frames, bytes };
        continue;
      }
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended");
      buffered += decoder.decode(value, { stream: true });
    }
  };
  await readUntil("system.clock.sync");
  const answers: number[] = [];
  const lastFrames: number[] = [];
  const loopMax: number[] = [];
  let frames = 0;
  let bytes = 0;
  const loop = monitorEventLoopDelay({ resolution: 10 });
  for (let k = 0; k < 3; k++) {
    loop.reset();
    loop.enable();
    const t = performance.now();
    const res = await fetch(`${base}/api/v1/configs/${cfg.config_id}/nodes`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ name: `extra${k}`, mode: "static", public_address: "198.51.100.1", listen_port: 30000 + k }),
    });
    await res.text();
    answers.push(performance.now() - t);
    const read = await readUntil("system.status.updated");
    lastFrames.push(performance.now() - t);
    loop.disable();
    loopMax.push(loop.max / 1e6);
    frames = read.frames;
    bytes = read.bytes;
  }
  await reader.cancel();

  const f = (n: number, d = 1) => n.toFixed(d);
  console.log(`\nFull mesh of ${nodes} static nodes (${allRows} pairs); medians of three (server in this process, loopback)\n`);
  console.log("| GET mesh-pairs, no query (ms) | rows, bytes | GET ?node_id= (ms) | every page (ms) | create with SSE: answer (ms) | until its last frame (ms) | frames, bytes of that write | loop max (ms) |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|");
  console.log(
    `| ${f(median(first))} | ${firstRows}, ${(firstBytes / 1e6).toFixed(1)} MB | ${f(median(ofNode))} | ${f(median(every))} | ${f(median(answers))} | ${f(median(lastFrames))} | ${frames}, ${(bytes / 1e6).toFixed(2)} MB | ${f(median(loopMax))} |`,
  );
} finally {
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
