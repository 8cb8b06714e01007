/**
 * The console's static files (DESIGN §2 `src/http` "the console's static files"):
 * SPA fallback, caching, CSP, API errors untouched, and a clear answer without a build.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test, { type TestContext } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { CONSOLE_CSP } from "../../src/http/console.plugin.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import { ADMIN_PASSWORD, injectJson } from "./harness.js";

/** A server whose console directory is `consoleDir` (a fake build written by the test, or none). */
async function serverWith(t: TestContext, consoleDir: string): Promise<AppContext> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-console-"));
  const server = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, mqttEnabled: false }), createLogger("silent"), {
    clock: new ManualClock(),
    consoleDir,
  });
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return server;
}

function fakeBuild(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-web-build-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, "assets"));
  writeFileSync(join(dir, "index.html"), "<!doctype html><title>console</title>");
  writeFileSync(join(dir, "assets", "index-abc123.js"), "console.log(1)");
  writeFileSync(join(dir, "robots.txt"), "User-agent: *");
  return dir;
}

const get = (server: AppContext, url: string, headers: Record<string, string> = {}) => injectJson(server, { method: "GET", url, headers });

test("/ and every non-API path answer index.html (no-cache, CSP 'self') without a token; hashed assets are immutable", async (t) => {
  const server = await serverWith(t, fakeBuild(t));
  for (const url of ["/", "/login", "/configs/abc/nodes/def?presence=online", "/index.html"]) {
    const res = await get(server, url);
    assert.equal(res.status, 200, url);
    assert.match(String(res.headers["content-type"]), /^text\/html/, url);
    assert.equal(res.text, "<!doctype html><title>console</title>", url);
    assert.equal(res.headers["cache-control"], "no-cache", url);
    assert.equal(res.headers["content-security-policy"], CONSOLE_CSP, url);
    assert.equal(res.headers["x-content-type-options"], "nosniff", url);
  }
  assert.match(CONSOLE_CSP, /default-src 'self'/);
  assert.match(CONSOLE_CSP, /script-src 'self'(;|$)/);

  const asset = await get(server, "/assets/index-abc123.js");
  assert.equal(asset.status, 200);
  assert.equal(asset.text, "console.log(1)");
  assert.match(String(asset.headers["content-type"]), /javascript/);
  assert.equal(asset.headers["cache-control"], "public, max-age=31536000, immutable");

  const other = await get(server, "/robots.txt");
  assert.equal(other.text, "User-agent: *");
  assert.equal(other.headers["cache-control"], "no-cache");

  // HEAD answers the same headers without a body; a cached copy revalidates to 304.
  const head = await injectJson(server, { method: "HEAD", url: "/configs" });
  assert.equal(head.status, 200);
  assert.equal(head.text, "");
  assert.equal(head.headers["content-security-policy"], CONSOLE_CSP);
  const etag = String(asset.headers["etag"]);
  assert.match(etag, /\S/);
  const revalidated = await get(server, "/assets/index-abc123.js", { "if-none-match": etag });
  assert.equal(revalidated.status, 304);

  // A missing hashed file is a 404, never the page in its place.
  const missing = await get(server, "/assets/index-old999.js");
  assert.equal(missing.status, 404);
  assert.equal(missing.json.error.code, "NOT_FOUND");
  // No escape from the build directory.
  const traversal = await get(server, "/assets/..%2f..%2fetc%2fpasswd");
  assert.equal(traversal.status, 404);
  assert.notEqual(traversal.text.includes("root:"), true);
});

test("/api paths no route takes stay JSON errors (401 without a token, 404 with one); other methods are not the console's", async (t) => {
  const server = await serverWith(t, fakeBuild(t));
  const anon = await get(server, "/api/v1/no-such-thing");
  assert.equal(anon.status, 401);
  assert.equal(anon.json.error.code, "UNAUTHORIZED");
  const login = await injectJson(server, { method: "POST", url: "/api/v1/auth/login", headers: { "content-type": "application/json" }, payload: { password: ADMIN_PASSWORD } });
  const auth = { authorization: `Bearer ${login.json.access_token}` };
  for (const url of ["/api/v1/no-such-thing", "/api", "/api/internal/nothing"]) {
    const res = await get(server, url, auth);
    assert.equal(res.status, 404, url);
    assert.equal(res.json.error.code, "NOT_FOUND", url);
    assert.equal(res.headers["content-security-policy"], undefined, url);
  }
  const post = await injectJson(server, { method: "POST", url: "/configs", headers: auth });
  assert.equal(post.status, 404);
  assert.equal(post.json.error.code, "NOT_FOUND");
  // A real API route is untouched.
  assert.equal((await get(server, "/api/v1/health")).json.status, "ok");
});

test("without dist/web, / answers 503 SERVICE_UNAVAILABLE telling how to build the console", async (t) => {
  const empty = mkdtempSync(join(tmpdir(), "svc-web-none-"));
  t.after(() => rmSync(empty, { recursive: true, force: true }));
  const server = await serverWith(t, empty);
  const res = await get(server, "/");
  assert.equal(res.status, 503);
  assert.equal(res.json.error.code, "SERVICE_UNAVAILABLE");
  assert.match(res.json.error.message, /npm run build:web/);
});

test("spec §4 rules 2/5: system status carries the release download base the console builds asset URLs from", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-console-"));
  const server = await createServer(
    testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, mqttEnabled: false, releaseDownloadUrl: "https://releases.example.net/dl" }),
    createLogger("silent"),
    { clock: new ManualClock() },
  );
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const status = await server.systemStatus();
  assert.equal(status.update.release_download_url, "https://releases.example.net/dl");
});
