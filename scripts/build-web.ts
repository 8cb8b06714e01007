/**
 * Builds the web console (`web/` → `dist/web/`, issue 12) when it is missing or older than its
 * sources, so that `npm start` and `npm test` on a fresh clone serve a current console.
 *
 *   tsx scripts/build-web.ts            build if dist/web is missing or stale
 *   tsx scripts/build-web.ts --force    always build (npm run build:web)
 *
 * Stale: the newest mtime under `web/` (and of package-lock.json, whose packages the bundle holds)
 * is later than `dist/web/index.html`'s. Exits with vite's status.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const webDir = join(root, "web");
const builtIndex = join(root, "dist", "web", "index.html");

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

function main(): number {
  const force = process.argv.includes("--force");
  const reason = force ? "forced" : staleReason();
  if (reason === undefined) return 0;
  console.log(`build-web: building the console (${reason})`);
  const r = spawnSync(process.execPath, [join(root, "node_modules", "vite", "bin", "vite.js"), "build", "--config", join(webDir, "vite.config.ts"), "--logLevel", "warn"], {
    cwd: root,
    stdio: "inherit",
  });
  if (r.status !== 0) console.error("build-web: vite build failed");
  return r.status ?? 1;
}

process.exitCode = main();
