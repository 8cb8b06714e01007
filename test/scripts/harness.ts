import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { TestContext } from "node:test";
import { repoRoot } from "../helpers/service.js";

/** Writes `files` (path under the root → text) into a fresh directory; removed after the test. */
export function fixtureTree(t: TestContext, files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "svc-check-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

/** Runs `scripts/<name>` as `npm test` does (a tsx process), on `root` or this repository; its exit status and stdout lines. */
export function runCheck(name: string, root?: string): { status: number | null; lines: string[] } {
  const res = spawnSync(process.execPath, ["--import", "tsx", join(repoRoot, "scripts", name), ...(root === undefined ? [] : [root])], {
    cwd: repoRoot,
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(res.error, undefined, String(res.error));
  return { status: res.status, lines: res.stdout.split("\n").filter((l) => l !== "") };
}

/** Runs a check script's `main` in this process on a fixture tree (no tsx start-up per case): its exit status and output lines. */
export function runMain(main: (argv: string[], out: (line: string) => void) => number, root: string): { status: number; lines: string[] } {
  const lines: string[] = [];
  const status = main([root], (line) => lines.push(...line.split("\n").filter((l) => l !== "")));
  return { status, lines };
}
