/**
 * The OpenAPI document is fit for generated clients (DESIGN §5 "the contract that outside tools
 * script against"): a third-party linter, `@redocly/cli lint` with its `recommended` rules, finds
 * no error in it, and every operation carries a stable `operationId`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { repoRoot } from "../helpers/service.js";
import { startHarness } from "./harness.js";

const run = promisify(execFile);

interface LintProblem {
  ruleId: string;
  severity: "error" | "warn";
  message: string;
  location: Array<{ pointer?: string }>;
}

/** Runs the redocly CLI on `file` with the recommended rules; its JSON report. */
async function redoclyLint(file: string): Promise<{ totals: { errors: number; warnings: number }; problems: LintProblem[] }> {
  const cli = join(repoRoot, "node_modules", "@redocly", "cli", "bin", "cli.js");
  // Exit status 1 when errors are found: the report is still on stdout.
  const out = await run(process.execPath, [cli, "lint", file, "--extends=recommended", "--format=json", "--max-problems=1000"], {
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
    maxBuffer: 64 * 1024 * 1024,
  }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? "" }));
  return JSON.parse(out.stdout) as { totals: { errors: number; warnings: number }; problems: LintProblem[] };
}

test("the OpenAPI document passes `redocly lint` (recommended rules) with no error", async (t) => {
  const h = await startHarness(t, { publicUrl: "https://mesh.example.net" });
  const res = await h.req("GET", "/api/v1/openapi.json");
  assert.equal(res.status, 200);
  const dir = mkdtempSync(join(tmpdir(), "svc-openapi-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "openapi.json");
  writeFileSync(file, res.text);
  const report = await redoclyLint(file);
  const shown = (p: LintProblem) => `${p.ruleId} ${p.location[0]?.pointer ?? ""}: ${p.message}`;
  assert.deepEqual(report.problems.filter((p) => p.severity === "error").map(shown), []);
  assert.equal(report.totals.errors, 0);
  // What a generated client needs, checked although `recommended` only warns about it.
  const needed = report.problems.filter((p) => CLIENT_RULES.has(p.ruleId) && !KNOWN.some((k) => k.ruleId === p.ruleId && k.pointer === p.location[0]?.pointer));
  assert.deepEqual(needed.map(shown), []);
});

test("every documented operation has a camelCase operationId, unique, the server URL is SVC_PUBLIC_URL", async (t) => {
  const h = await startHarness(t, { publicUrl: "https://mesh.example.net" });
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json as {
    servers: Array<{ url: string }>;
    paths: Record<string, Record<string, { operationId?: string; responses: Record<string, unknown> }>>;
  };
  assert.deepEqual(doc.servers, [{ url: "https://mesh.example.net" }]);
  const ids: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      assert.match(op.operationId ?? "", /^[a-z][A-Za-z0-9]*$/, `${method} ${path}`);
      assert.ok(Object.keys(op.responses).some((s) => s.startsWith("4")), `${method} ${path} documents a 4xx answer`);
      ids.push(op.operationId ?? "");
    }
  }
  assert.equal(new Set(ids).size, ids.length, "operationIds are unique");
  assert.ok(ids.length >= 57);
});

/** Rules of `recommended` that only warn but that generated clients depend on. */
const CLIENT_RULES = new Set([
  "no-empty-servers",
  "operation-operationId",
  "operation-operationId-unique",
  "operation-operationId-url-safe",
  "operation-4xx-response",
  "no-ambiguous-paths",
  "path-parameters-defined",
]);

/**
 * Findings that are the contract itself. Spec §4 fixes `GET /api/v1/backups/export/{snapshot_id}`
 * and DESIGN §5 `POST /api/v1/backups/{snapshot_id}/restore`: both paths match
 * `/api/v1/backups/export/restore`, but with different methods, so no request is ambiguous.
 */
const KNOWN = [{ ruleId: "no-ambiguous-paths", pointer: "#/paths/~1api~1v1~1backups~1export~1{snapshot_id}" }];
