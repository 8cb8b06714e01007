/**
 * Speed: the console's initial JavaScript is at most 250 KB gzip (the heavy views are
 * split out and load on first visit). Measured on the built `dist/web`: every script and
 * modulepreload that index.html names, gzip level 9.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";
import { gzipSync } from "node:zlib";
import { repoRoot } from "../helpers/service.js";
import { ensureConsoleBuilt } from "./harness.js";

const BUDGET_BYTES = 250 * 1024;

test("Speed: the initial JavaScript of the console is at most 250 KB gzip; the mesh and node pages are separate chunks", () => {
  ensureConsoleBuilt();
  const dir = join(repoRoot, "dist", "web");
  const html = readFileSync(join(dir, "index.html"), "utf8");
  const initial = [...html.matchAll(/<(?:script[^>]*\ssrc|link[^>]*rel="modulepreload"[^>]*\shref)="([^"]+\.js)"/g)].map((m) => m[1]!);
  assert.ok(initial.length >= 1, "index.html names its entry script");
  const gzipped = initial.reduce((sum, src) => sum + gzipSync(readFileSync(join(dir, src)), { level: 9 }).length, 0);
  assert.ok(gzipped <= BUDGET_BYTES, `initial JavaScript ${gzipped} bytes gzip > ${BUDGET_BYTES}: ${initial.join(", ")}`);
  // The lazily loaded pages are chunks of their own, not part of it.
  const assets = readdirSync(join(dir, "assets"));
  for (const page of ["mesh", "node"]) {
    assert.ok(assets.some((f) => f.startsWith(`${page}-`) && f.endsWith(".js")), `${page} page has its own chunk`);
    assert.ok(!initial.some((src) => src.includes(`/${page}-`)), `${page} page is in the initial load`);
  }
});
