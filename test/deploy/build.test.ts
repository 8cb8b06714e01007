import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { repoRoot, startService } from "../helpers/service.js";

// The production build. `npm run build` compiles src/ to dist/src/ (tsconfig.build.json)
// and `node dist/src/main.js` serves with production dependencies only, the layout of the
// Dockerfile's runtime stage: package.json, node_modules without devDependencies, dist/, no src/.
// Docker is not available to the test suite; this rebuilds that layout in a temporary directory.

interface LockEntry {
  dev?: boolean;
  optional?: boolean;
}
const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  version: string;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const lock = JSON.parse(readFileSync(join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> };

/**
 * `node_modules` as `npm ci --omit=dev` leaves it, without downloading: a symlink to each
 * top-level package of the lockfile that is not `dev` (nested copies live inside their parents).
 */
function productionNodeModules(dir: string): void {
  mkdirSync(dir);
  for (const [path, entry] of Object.entries(lock.packages)) {
    const m = /^node_modules\/((?:@[^/]+\/)?[^/]+)$/.exec(path);
    if (m === null || entry.dev === true) continue;
    const real = join(repoRoot, "node_modules", m[1]!);
    if (!existsSync(real)) continue; // an optional package of another platform
    mkdirSync(dirname(join(dir, m[1]!)), { recursive: true });
    symlinkSync(real, join(dir, m[1]!), "dir");
  }
}

describe("compiled production build", { timeout: 300_000 }, () => {
  let root = "";
  let build: { status: number | null; output: string } = { status: null, output: "" };

  before(() => {
    // The Dockerfile's build stage: package files, tsconfigs and src/, every dependency.
    root = mkdtempSync(join(tmpdir(), "svc-build-"));
    for (const f of ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json"]) cpSync(join(repoRoot, f), join(root, f));
    cpSync(join(repoRoot, "src"), join(root, "src"), { recursive: true });
    // The console: its sources and the script that builds it.
    cpSync(join(repoRoot, "web"), join(root, "web"), { recursive: true });
    mkdirSync(join(root, "scripts"));
    cpSync(join(repoRoot, "scripts/build-web.ts"), join(root, "scripts/build-web.ts"));
    symlinkSync(join(repoRoot, "node_modules"), join(root, "node_modules"), "dir");
    const res = spawnSync("npm", ["run", "build"], { cwd: root, encoding: "utf8", timeout: 240_000 });
    build = { status: res.status, output: `${String(res.error ?? "")}${res.stdout}${res.stderr}` };
    // The runtime stage: package.json, dist/ and production node_modules only (the Dockerfile's COPY lines).
    for (const f of ["src", "web", "scripts", "package-lock.json", "tsconfig.json", "tsconfig.build.json"]) rmSync(join(root, f), { recursive: true });
    rmSync(join(root, "node_modules"));
    productionNodeModules(join(root, "node_modules"));
  });
  after(() => {
    if (root !== "") rmSync(root, { recursive: true, force: true });
  });

  test("`npm run build` emits JavaScript for src/ to dist/src/ and the console to dist/web/, nothing else", () => {
    assert.equal(build.status, 0, build.output);
    assert.deepEqual(readdirSync(join(root, "dist")).sort(), ["src", "web"], "nothing but src/ and the console (no test/, scripts/)");
    assert.ok(existsSync(join(root, "dist/web/index.html")), "the built console");
    assert.ok(existsSync(join(root, "dist/src/main.js")));
    assert.ok(existsSync(join(root, "dist/src/cli/svcctl.js")), "the client entry esbuild bundles");
    assert.equal(readdirSync(join(root, "dist/src"), { recursive: true }).filter((f) => String(f).endsWith(".ts")).length, 0);
  });

  test("the compiler and tsx are devDependencies; esbuild is a runtime dependency (local_build bundles)", () => {
    for (const dev of ["typescript", "tsx"]) {
      assert.equal(pkg.dependencies[dev], undefined, `${dev} is not a runtime dependency`);
      assert.ok(pkg.devDependencies[dev], `${dev} is a devDependency`);
      assert.equal(existsSync(join(root, "node_modules", dev)), false, `${dev} is absent from the production node_modules`);
    }
    assert.ok(pkg.dependencies["esbuild"]);
    assert.match(pkg.scripts["build"] ?? "", /tsc -p tsconfig\.build\.json && tsx scripts\/build-web\.ts --force$/);
  });

  test("`node dist/src/main.js` with production dependencies only serves GET /api/v1/health (spec §9 rule 2 version)", async (t) => {
    assert.equal(build.status, 0, build.output);
    const service = await startService({}, { argv: [process.execPath, "dist/src/main.js"], cwd: root });
    t.after(() => service.stop());
    const res = await fetch(`${service.baseUrl}/api/v1/health`);
    assert.equal(res.status, 200);
    // The version comes from package.json three levels above dist/src/lib/version.js.
    assert.deepEqual(await res.json(), { status: "ok", version: pkg.version });
    // The console is served from dist/web: its page, not the 503 of a missing build.
    const page = await fetch(`${service.baseUrl}/`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<div id="root">/);
  });

  test("the compiled service bundles the client from dist/src/cli/svcctl.js (local_build, spec §4 rule 4)", () => {
    assert.equal(build.status, 0, build.output);
    const script = [
      'const { bundleClient, CLIENT_ENTRY } = await import("./dist/src/services/client-bundle.js");',
      'const { code } = await bundleClient({ version: "9.8.7" });',
      'const { writeFileSync } = await import("node:fs");',
      'writeFileSync("svcctl.mjs", code);',
      "console.log(CLIENT_ENTRY);",
    ].join("\n");
    const res = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: root, encoding: "utf8", timeout: 120_000 });
    assert.equal(res.status, 0, `${res.stdout}${res.stderr}`);
    assert.equal(res.stdout.trim(), join(root, "dist/src/cli/svcctl.js"));
    const version = spawnSync(process.execPath, [join(root, "svcctl.mjs"), "--version"], { encoding: "utf8", timeout: 30_000 });
    assert.equal(version.stdout.trim(), "9.8.7", version.stderr);
  });

  test("the compiled, unbundled svcctl reports the package.json version (spec §9 rule 3: no define, a checkout)", () => {
    assert.equal(build.status, 0, build.output);
    const res = spawnSync(process.execPath, ["dist/src/cli/svcctl.js", "--version"], { cwd: root, encoding: "utf8", timeout: 30_000 });
    assert.equal(res.stdout.trim(), pkg.version, res.stderr);
  });
});
