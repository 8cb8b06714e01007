import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { build } from "esbuild";
import { CLIENT_VERSION, DEV_VERSION, packageVersion } from "../../src/agent/version.js";
import { repoRoot, runCli } from "./fixtures.js";

const pkgVersion = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }).version;

test("spec 9 rule 3: from a checkout the client version is the repository's package.json version", () => {
  assert.equal(CLIENT_VERSION, pkgVersion);
});

test("`svcctl --version` prints the client version and exits 0", { timeout: 90_000 }, async () => {
  const run = await runCli(["--version"]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stdout.trim(), CLIENT_VERSION);
});

test("spec 9 rule 3: the bundle's esbuild define injects the version once, with no package.json beside it", { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-version-bundle-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const outfile = join(dir, "version.mjs");
  await build({
    entryPoints: [join(repoRoot, "src/agent/version.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile,
    define: { "globalThis.__SVC_CLIENT_VERSION__": JSON.stringify("9.8.7") },
    logLevel: "silent",
  });
  const built = readFileSync(outfile, "utf8");
  assert.ok(!built.includes("__SVC_CLIENT_VERSION__"), "the define replaced the expression");
  const mod = (await import(pathToFileURL(outfile).href)) as { CLIENT_VERSION: string };
  assert.equal(mod.CLIENT_VERSION, "9.8.7");
});

test("without a define, a missing or foreign package.json gives the development version", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-version-pkg-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.equal(packageVersion(pathToFileURL(join(dir, "package.json"))), DEV_VERSION);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "some-other-package", version: "5.0.0" }));
  assert.equal(packageVersion(pathToFileURL(join(dir, "package.json"))), DEV_VERSION);
  writeFileSync(join(dir, "package.json"), "{broken");
  assert.equal(packageVersion(pathToFileURL(join(dir, "package.json"))), DEV_VERSION);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "svc-mesh-control", version: "1.4.0" }));
  assert.equal(packageVersion(pathToFileURL(join(dir, "package.json"))), "1.4.0");
});
