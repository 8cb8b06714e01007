/**
 * Builds the web console (`web/` → `dist/web/`) when it is missing or older than its
 * sources, so that `npm start` and `npm test` on a fresh clone serve a current console.
 *
 *   tsx scripts/build-web.ts            build if dist/web is missing or stale
 *   tsx scripts/build-web.ts --force    always build (npm run build:web)
 *
 * Stale: the newest mtime under `web/` (and of package-lock.json, whose packages the bundle holds)
 * is later than `dist/web/index.html`'s. Exits with vite's status.
 *
 * Safe when several processes start at once (tests that each run `npm start`): one builds while
 * holding `dist/.web-build.lock` (a directory, created atomically), into a fresh directory that
 * then replaces `dist/web` by rename; the others wait for the lock and find the build current.
 * A lock older than 5 minutes is a crashed build's and is taken over.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, rmdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const webDir = join(root, "web");
const distDir = join(root, "dist");
const outDir = join(distDir, "web");
const builtIndex = join(outDir, "index.html");
const lockDir = join(distDir, ".web-build.lock");
const STALE_LOCK_MS = 5 * 60_000;

/** The newest modification time (ms) of any file under `dir`, skipping node_modules. */
export function newestMtime(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    if (name === "node_modules") continue;
    const p = join(dir, name);
    const st = statSync(p);
    newest = Math.max(newest, st.isDirectory() ? newestMtime(p) : st.mtimeMs);
  }
  return newest;
}

/** Why the console needs a build, or undefined when dist/web is current. */
export function staleReason(): string | undefined {
  if (!existsSync(builtIndex)) return "dist/web is missing";
  const builtAt = statSync(builtIndex).mtimeMs;
  const sources = Math.max(newestMtime(webDir), statSync(join(root, "package-lock.json")).mtimeMs);
  return sources > builtAt ? "web/ changed since the last build" : undefined;
}

/** Takes the build lock, waiting (polling every 200 ms) while another process holds it. */
function lock(): void {
  mkdirSync(distDir, { recursive: true });
  for (;;) {
    try {
      mkdirSync(lockDir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      try {
        if (Date.now() - statSync(lockDir).mtimeMs > STALE_LOCK_MS) rmSync(lockDir, { recursive: true, force: true });
      } catch {
        // released meanwhile
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
}

/** Runs vite build into a fresh directory and swaps it in for dist/web. Returns vite's status. */
function build(reason: string): number {
  console.log(`build-web: building the console (${reason})`);
  const tmp = join(distDir, `web.build-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  const r = spawnSync(
    process.execPath,
    [join(root, "node_modules", "vite", "bin", "vite.js"), "build", "--config", join(webDir, "vite.config.ts"), "--outDir", tmp, "--emptyOutDir", "--logLevel", "warn"],
    { cwd: root, stdio: "inherit" },
  );
  if (r.status !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    console.error("build-web: vite build failed");
    return r.status ?? 1;
  }
  const old = join(distDir, `web.old-${process.pid}`);
  if (existsSync(outDir)) renameSync(outDir, old);
  renameSync(tmp, outDir);
  rmSync(old, { recursive: true, force: true });
  return 0;
}

function main(): number {
  const force = process.argv.includes("--force");
  if (!force && staleReason() === undefined) return 0;
  lock();
  try {
    // Another process may have built it while this one waited.
    const reason = force ? "forced" : staleReason();
    return reason === undefined ? 0 : build(reason);
  } finally {
    rmdirSync(lockDir);
  }
}

process.exitCode = main();
