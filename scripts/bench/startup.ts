/**
 * Start-up time to `GET /api/v1/health`: TypeScript through tsx against the
 * compiled build.
 *
 *   npm run build && npx tsx scripts/bench/startup.ts [runs=5]
 *
 * Each run spawns the service with a fresh data dir on a free port (embedded broker on port 0,
 * default settings otherwise) and polls `/api/v1/health` every 10 ms; the figure is the time
 * from spawn to the first 200. The variants are interleaved run by run, so that load on the
 * machine falls on all of them alike; one unmeasured warm-up run per variant first (tsx's
 * transform cache and the OS file cache are warm afterwards, as on a restart). Prints the
 * median, min and max per variant in ms.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const runs = Number(process.argv[2] ?? 5);

const VARIANTS: Array<{ name: string; argv: string[] }> = [
  { name: "tsx src/main.ts (npm start)", argv: [join(ROOT, "node_modules/.bin/tsx"), "src/main.ts"] },
  { name: "node --import tsx src/main.ts (old Docker CMD / unit)", argv: [process.execPath, "--import", "tsx", "src/main.ts"] },
  { name: "node dist/src/main.js (compiled)", argv: [process.execPath, "dist/src/main.js"] },
];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      srv.close(() => (typeof a === "object" && a ? resolve(a.port) : reject(new Error("no port"))));
    });
  });
}

/** Milliseconds from spawn to the first 200 of /api/v1/health. */
async function once(argv: string[]): Promise<number> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "svc-startup-"));
  const [program, ...args] = argv as [string, ...string[]];
  const started = performance.now();
  const child = spawn(program, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      SVC_HTTP_HOST: "127.0.0.1",
      SVC_HTTP_PORT: String(port),
      SVC_EMBEDDED_BROKER_PORT: "0",
      SVC_DATA_DIR: dataDir,
      SVC_ADMIN_PASSWORD: randomBytes(18).toString("base64url"),
      SVC_LOG_LEVEL: "warn",
    },
    stdio: "ignore",
    detached: true,
  });
  let exited = false;
  child.once("exit", () => (exited = true));
  try {
    for (;;) {
      if (exited) throw new Error(`${argv.join(" ")} exited before answering`);
      if (performance.now() - started > 60_000) throw new Error(`${argv.join(" ")}: no health answer in 60 s`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/api/v1/health`);
        if (res.status === 200) return performance.now() - started;
      } catch {
        // not listening yet
      }
      await delay(10);
    }
  } finally {
    if (child.pid !== undefined && !exited) {
      process.kill(-child.pid, "SIGTERM");
      await new Promise((r) => child.once("exit", r));
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

if (!existsSync(join(ROOT, "dist/src/main.js"))) {
  console.error("dist/src/main.js is missing: run `npm run build` first");
  process.exit(1);
}
const times = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
for (const v of VARIANTS) await once(v.argv); // warm-up
for (let i = 0; i < runs; i++) {
  for (const v of VARIANTS) times.get(v.name)!.push(await once(v.argv));
}
console.log(`start-up to GET /api/v1/health, ${runs} runs each (ms): median [min, max]; all runs`);
for (const [name, xs] of times) {
  console.log(`${name.padEnd(56)} ${median(xs).toFixed(0).padStart(6)} [${Math.min(...xs).toFixed(0)}, ${Math.max(...xs).toFixed(0)}]  ${xs.map((x) => x.toFixed(0)).join(" ")}`);
}
