/**
 * Console benchmark (the console's speed targets; a benchmark, not a test: it prints figures, asserts nothing).
 *
 *   npx tsx scripts/bench/console.ts            # 1,000 nodes, 5 loads
 *   npx tsx scripts/bench/console.ts 2000 3     # nodes, loads
 *
 * Over the real service (SQLite file, embedded broker, real HTTP on loopback) and Debian's
 * headless Chromium (playwright-core):
 * 1. Mesh page of an N-node config: from navigation to the table's first rows, and to the first
 *    keystroke in the node search answered (the filtered count shown): "interactive".
 * 2. Long tasks (PerformanceObserver 'longtask', > 50 ms by definition) while 200 SSE events/s
 *    arrive for that config for 10 s (9 of 10 `endpoint.status.updated` with presence flipping,
 *    1 of 10 `node.workspace.updated`), published through the service's real hub.
 * 3. Initial JavaScript (the entry and what index.html preloads) and the lazy chunks, gzip.
 *
 * The N nodes are made with the store's repository functions (`nodesRepo.insertNode`, no pairs),
 * then one node over REST with `auto_pair: false`, whose write re-stages every node: making
 * 1,000 nodes one REST call at a time is quadratic today.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { gzipSync } from "node:zlib";
import { chromium } from "playwright-core";
import { testSettings } from "../../src/config.js";
import { generateKeyPair } from "../../src/domain/keys.js";
import { createLogger } from "../../src/logger.js";
import type { z } from "zod";
import type { nodeViewSchema } from "../../src/protocol/views.schema.js";
import { newId } from "../../src/protocol/ids.js";
import { createServer } from "../../src/server.js";
import * as nodesRepo from "../../src/store/nodes.repository.js";

type NodeView = z.output<typeof nodeViewSchema>;

const N = Number(process.argv[2] ?? 1000);
const LOADS = Number(process.argv[3] ?? 5);
const root = join(import.meta.dirname, "..", "..");
const PASSWORD = "bench-password";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** gzip sizes of the entry script (+ modulepreloads) and of every other chunk, bytes. */
function bundleSizes(): { initial: number; lazy: Array<[string, number]> } {
  const dist = join(root, "dist", "web");
  const html = readFileSync(join(dist, "index.html"), "utf8");
  const initialFiles = [...html.matchAll(/(?:src|href)="\/(assets\/[^"]+\.js)"/g)].map((m) => m[1]!);
  const gz = (f: string) => gzipSync(readFileSync(join(dist, f)), { level: 9 }).length;
  const initial = initialFiles.reduce((sum, f) => sum + gz(f), 0);
  const lazy = readdirSync(join(dist, "assets"))
    .filter((f) => f.endsWith(".js") && !initialFiles.includes(`assets/${f}`))
    .map((f): [string, number] => [f, gz(`assets/${f}`)]);
  return { initial, lazy };
}

async function main(): Promise<void> {
  const built = spawnSync(process.execPath, ["--import", "tsx", join(root, "scripts", "build-web.ts")], { cwd: root, encoding: "utf8" });
  if (built.status !== 0) throw new Error(`console build failed: ${built.stderr}`);
  const sizes = bundleSizes();

  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-console-"));
  const server = await createServer(testSettings({ dataDir, adminPassword: PASSWORD, mqttEnabled: true }), createLogger("silent"));
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: process.getuid?.() === 0 ? ["--no-sandbox"] : [] });
  try {
    const base = (await server.app.listen({ host: "127.0.0.1", port: 0 })).replace("localhost", "127.0.0.1");
    const call = async (method: string, path: string, body?: unknown, token?: string) => {
      const res = await fetch(base + path, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    };
    const token = (await call("POST", "/api/v1/auth/login", { password: PASSWORD })).access_token as string;
    const config = await call("POST", "/api/v1/configs", { name: "bench", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/16" }, token);
    const other = await call("POST", "/api/v1/configs", { name: "other", tunnel_protocol: "wireguard", network_cidr: "10.1.0.0/24" }, token);

    const tMake = performance.now();
    const now = Date.now();
    for (let i = 0; i < N - 1; i++) {
      const keys = generateKeyPair();
      await nodesRepo.insertNode(
        server.store.db,
        {
          node_id: newId("node"),
          config_id: config.config_id,
          name: `node-${String(i).padStart(4, "0")}`,
          mode: i % 2 === 0 ? "static" : "dynamic",
          interface_name: "svc0",
          address: `10.0.${Math.floor((i + 2) / 256)}.${(i + 2) % 256}`,
          public_address: i % 3 === 0 ? null : `198.51.100.${(i % 250) + 1}`,
          listen_port: i % 3 === 0 ? null : 51820,
          private_key: keys.privateKey,
          public_key: keys.publicKey,
          staged_config_version: 0,
          staged_config_sha256: null,
          confirmed_config_version: null,
          confirmed_config_sha256: null,
          created_at: now,
          updated_at: now,
        },
        now,
      );
    }
    const tRest = performance.now();
    await call("POST", `/api/v1/configs/${config.config_id}/nodes`, { name: "node-last", mode: "static", address: "10.0.255.254", auto_pair: false }, token);
    const restMs = performance.now() - tRest;
    const makeMs = performance.now() - tMake;
    const nodes = (await call("GET", `/api/v1/configs/${config.config_id}/nodes`, undefined, token)).nodes as NodeView[];

    console.log(`nodes in the config: ${nodes.length}`);
    const context = await browser.newContext({ baseURL: base, viewport: { width: 1280, height: 800 } });
    await context.addInitScript(`sessionStorage.setItem("svc.access_token", ${JSON.stringify(token)});
      window.__longtasks = [];
      new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longtasks.push(e.duration); }).observe({ type: "longtask", buffered: true });`);
    const page = await context.newPage();
    page.on("pageerror", (err) => process.stderr.write(`[page error] ${err.message}\n`));

    const firstRows: number[] = [];
    const interactive: number[] = [];
    const loadLongest: number[] = [];
    for (let i = 0; i < LOADS; i++) {
      await page.goto("/login"); // a page without the config, so each load starts cold
      await page.goto(`/configs/${config.config_id}`, { waitUntil: "commit" });
      await page.getByRole("table").getByRole("rowheader").first().waitFor();
      firstRows.push(await page.evaluate(() => performance.now()));
      await page.getByLabel("Search nodes").pressSequentially("node-00", { delay: 0 });
      await page
        .getByRole("status")
        .filter({ hasText: /^\d+ of \d+ nodes match$/ })
        .waitFor()
        .catch(async (err: unknown) => {
          console.error((await page.locator("body").innerText()).slice(0, 1500));
          throw err;
        });
      interactive.push(await page.evaluate(() => performance.now()));
      loadLongest.push(await page.evaluate(() => Math.max(0, ...((globalThis as unknown as { __longtasks: number[] }).__longtasks))));
      await page.getByLabel("Search nodes").fill("");
    }

    // 200 events/s for 10 s for this config, while the page shows the whole table.
    await page.getByRole("status").filter({ hasText: /^\d+ nodes$/ }).waitFor();
    await page.evaluate(() => ((globalThis as unknown as { __longtasks: number[] }).__longtasks = []));
    const stream = async (configId: string, list: NodeView[]) => {
      let sent = 0;
      const t0 = performance.now();
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          for (let k = 0; k < 10; k++) {
            const n = list[sent % list.length]!;
            const flip = Math.floor(sent / list.length) % 2 === 0 ? "online" : "dropped";
            if (sent % 10 === 9) {
              server.hub.publish("node.workspace.updated", { config_id: configId, node_id: n.node_id, workspace: { ...n, tags: sent % 20 === 19 ? ["bench"] : [] } });
            } else {
              server.hub.publish("endpoint.status.updated", {
                config_id: configId,
                node_id: n.node_id,
                status: {
                  config_id: configId,
                  node_id: n.node_id,
                  mode: n.mode,
                  effective_mode: n.effective_mode,
                  ...n.client,
                  client_presence_state: flip,
                  last_reachable_at: new Date().toISOString(),
                  staged_config: n.staged_config,
                  confirmed_config: { config_version: null, config_sha256: null },
                  mqtt_enabled: true,
                },
              });
            }
            sent++;
          }
          if (performance.now() - t0 >= 10_000) {
            clearInterval(timer);
            resolve();
          }
        }, 50);
      });
      return sent / ((performance.now() - t0) / 1000);
    };
    const rate = await stream(config.config_id, nodes);
    const patchedRows = await page.getByRole("table").getByText(/^(online|dropped)$/).count();
    const during = await page.evaluate(() => (globalThis as unknown as { __longtasks: number[] }).__longtasks.slice());
    // The same rate for another config: the page ignores it.
    await page.evaluate(() => ((globalThis as unknown as { __longtasks: number[] }).__longtasks = []));
    const otherNode = await call("POST", `/api/v1/configs/${other.config_id}/nodes`, { name: "x", mode: "static" }, token);
    const otherRate = await stream(other.config_id, [otherNode as NodeView]);
    const duringOther = await page.evaluate(() => (globalThis as unknown as { __longtasks: number[] }).__longtasks.slice());

    const kb = (b: number) => `${(b / 1024).toFixed(1)} KB`;
    const ms = (x: number) => `${Math.round(x)} ms`;
    console.log(`console bench, ${N} nodes, ${LOADS} loads (median), headless Chromium, ${new Date().toISOString().slice(0, 10)}`);
    console.log(`| what | figure | target |`);
    console.log(`|---|---|---|`);
    console.log(`| make ${N} nodes (${N - 1} by repository + 1 REST create re-staging all) | ${ms(makeMs)} (REST create ${ms(restMs)}) | |`);
    console.log(`| mesh page: navigation → first rows | ${ms(median(firstRows))} (all: ${firstRows.map(ms).join(", ")}) | |`);
    console.log(`| mesh page: navigation → search keystrokes answered (interactive) | ${ms(median(interactive))} (all: ${interactive.map(ms).join(", ")}) | ≤ 1500 ms |`);
    console.log(`| longest task during a load | ${ms(median(loadLongest))} | |`);
    console.log(`| ${rate.toFixed(0)} events/s for this config, 10 s: long tasks / longest | ${during.length} / ${ms(Math.max(0, ...during))} | none > 100 ms |`);
    console.log(`| rows in view showing a streamed presence (online/dropped) after the stream | ${patchedRows} | > 0 (the events reached the table) |`);
    console.log(`| ${otherRate.toFixed(0)} events/s for another config, 10 s: long tasks / longest | ${duringOther.length} / ${ms(Math.max(0, ...duringOther))} | |`);
    console.log(`| initial JS (gzip) | ${kb(sizes.initial)} | ≤ 250 KB |`);
    for (const [f, b] of sizes.lazy) console.log(`| lazy chunk ${f.replace(/-[\w-]+\.js$/, "")} (gzip) | ${kb(b)} | |`);
  } finally {
    await browser.close();
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
