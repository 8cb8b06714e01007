import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { VERSION } from "../../src/lib/version.js";
import { assertError, startHarness, type Harness } from "../http/harness.js";

/**
 * spec §4 rules 2, 3, 5 (remote_release) against a real HTTP server on 127.0.0.1 answering
 * GitHub's REST release shape (DESIGN §3 "Release host").
 */

const BUILD = "/api/v1/tools/download/client-artifacts/build";
const GRANT = "/api/v1/tools/download/client-artifacts/download-grant";
const TAG = `v${VERSION}`;
const ASSET = `svc-client-linux-amd64-v${VERSION}.zip`;
const REPO = "/repos/svc-mesh/svc";

interface Release {
  tag_name: string;
  assets: Array<{ name: string; browser_download_url: string }>;
}

interface ReleaseHost {
  /** `{SVC_RELEASE_API_URL}` for this host. */
  apiUrl: string;
  requests: Array<{ method: string; url: string; headers: IncomingHttpHeaders }>;
  /** Releases by tag; a tag not here answers 404 like GitHub. */
  releases: Map<string, Release>;
  /** When set, every request answers this status. */
  failWith: number | undefined;
}

const assetUrl = (tag: string, name: string) => `https://github.com/svc-mesh/svc/releases/download/${tag}/${name}`;

function release(tag: string, names: string[]): Release {
  return { tag_name: tag, assets: names.map((name) => ({ name, browser_download_url: assetUrl(tag, name) })) };
}

async function startReleaseHost(t: TestContext): Promise<ReleaseHost> {
  const host: ReleaseHost = { apiUrl: "", requests: [], releases: new Map(), failWith: undefined };
  const server: Server = createServer((req, res) => {
    host.requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify(body));
    };
    if (host.failWith !== undefined) return send(host.failWith, { message: "Server Error" });
    const prefix = `${REPO}/releases/tags/`;
    const url = req.url ?? "";
    const found = req.method === "GET" && url.startsWith(prefix) ? host.releases.get(decodeURIComponent(url.slice(prefix.length))) : undefined;
    if (!found) return send(404, { message: "Not Found", documentation_url: "https://docs.github.com/rest/releases/releases" });
    // GitHub answers many more fields; the service must ignore them.
    return send(200, { id: 1, draft: false, prerelease: false, name: found.tag_name, ...found, assets: found.assets.map((a) => ({ id: 7, size: 10, ...a })) });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  host.apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}${REPO}`;
  return host;
}

async function harnessFor(t: TestContext, host: { apiUrl: string }): Promise<Harness> {
  return startHarness(t, { releaseApiUrl: host.apiUrl });
}

test("spec §4 rule 2: remote_release finds asset svc-client-{goos}-{goarch}-v{version}.zip of release v{version} and answers its download_url", async (t) => {
  const host = await startReleaseHost(t);
  host.releases.set(
    TAG,
    release(TAG, [`svc-client-linux-arm64-v${VERSION}.zip`, ASSET, `svc-client-windows-amd64-v${VERSION}.zip`, `${ASSET}.sig`]),
  );
  host.releases.set("v0.0.1", release("v0.0.1", ["svc-client-linux-amd64-v0.0.1.zip"]));
  const h = await harnessFor(t, host);
  const before = h.fingerprint();

  const res = await h.req("POST", BUILD, { source: "remote_release", goos: "linux", goarch: "amd64" });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.json, {
    source: "remote_release",
    filename: ASSET,
    download_url: assetUrl(TAG, ASSET),
    // spec §4 rule 5: curl -fL -o <file>, then unzip -oq -d <dir> of the same archive.
    command: `curl -fL -o ${ASSET} ${assetUrl(TAG, ASSET)} && unzip -oq ${ASSET} -d svc-client`,
  });
  assert.equal(host.requests.length, 1);
  assert.equal(host.requests[0]?.method, "GET");
  assert.equal(host.requests[0]?.url, `${REPO}/releases/tags/${TAG}`);
  assert.equal(host.requests[0]?.headers.accept, "application/vnd.github+json");

  // Not cached by the backend (rule 2): every build asks the host again, and nothing is stored.
  const again = await h.req("POST", BUILD, { source: "remote_release", goos: "linux", goarch: "amd64" });
  assert.equal(again.status, 200, again.text);
  assert.equal(host.requests.length, 2);
  assert.equal(h.fingerprint(), before, "no database write");
  assert.equal(existsSync(join(h.dataDir, "artifacts")), false, "no file stored");
});

test("spec §4 rule 3, §7: a missing release tag is RELEASE_NOT_FOUND, and no other version is asked for", async (t) => {
  const host = await startReleaseHost(t);
  host.releases.set("v0.0.1", release("v0.0.1", ["svc-client-linux-amd64-v0.0.1.zip"]));
  host.releases.set("latest", release("v0.0.1", ["svc-client-linux-amd64-v0.0.1.zip"]));
  const h = await harnessFor(t, host);
  const res = await h.req("POST", BUILD, { source: "remote_release", goos: "linux", goarch: "amd64" });
  assertError(res, "RELEASE_NOT_FOUND");
  assert.match(res.json.error.message, new RegExp(TAG.replace(/\./g, "\\.")));
  assert.deepEqual(
    host.requests.map((r) => r.url),
    [`${REPO}/releases/tags/${TAG}`],
    "only v{version} was looked up",
  );
});

test("spec §4 rule 3, §7: a release without the target's asset is RELEASE_NOT_FOUND, never another version's asset", async (t) => {
  const host = await startReleaseHost(t);
  host.releases.set(TAG, release(TAG, [`svc-client-linux-arm64-v${VERSION}.zip`, `svc-client-darwin-amd64-v${VERSION}.zip`, `${ASSET}.sha256`]));
  host.releases.set("v0.0.1", release("v0.0.1", ["svc-client-linux-amd64-v0.0.1.zip"]));
  const h = await harnessFor(t, host);
  const res = await h.req("POST", BUILD, { source: "remote_release", goos: "linux", goarch: "amd64" });
  assertError(res, "RELEASE_NOT_FOUND");
  assert.ok(res.json.error.message.includes(ASSET), res.text);
  assert.deepEqual(res.json.error.details, { tag: TAG, asset: ASSET });
  assert.deepEqual(
    host.requests.map((r) => r.url),
    [`${REPO}/releases/tags/${TAG}`],
  );

  // A host that answers another tag than the one asked for is not taken at its word.
  host.releases.set(TAG, release("v0.0.1", [ASSET]));
  assertError(await h.req("POST", BUILD, { source: "remote_release", goos: "linux", goarch: "amd64" }), "RELEASE_NOT_FOUND");
});

test("remote_release: a release host that is down or failing answers SERVICE_UNAVAILABLE (503)", async (t) => {
  // A port that was just free: nothing listens there.
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const down = await harnessFor(t, { apiUrl: `http://127.0.0.1:${port}${REPO}` });
  assertError(await down.req("POST", BUILD, { source: "remote_release", goos: "linux", goarch: "amd64" }), "SERVICE_UNAVAILABLE");

  const host = await startReleaseHost(t);
  host.failWith = 502;
  const failing = await harnessFor(t, host);
  assertError(await failing.req("POST", BUILD, { source: "remote_release", goos: "darwin", goarch: "arm64" }), "SERVICE_UNAVAILABLE");
  assert.equal(host.requests.length, 2, "a 5xx is tried once more, then given up");

  host.failWith = 403; // GitHub's rate limit
  assertError(await failing.req("POST", BUILD, { source: "remote_release", goos: "darwin", goarch: "arm64" }), "SERVICE_UNAVAILABLE");
  assert.equal(host.requests.length, 3, "a 4xx is not retried");
});

test("remote_release: unsupported goos/goarch is VALIDATION_FAILED and the release host is not asked (DESIGN §3)", async (t) => {
  const host = await startReleaseHost(t);
  host.releases.set(TAG, release(TAG, [ASSET]));
  const h = await harnessFor(t, host);
  for (const [goos, goarch] of [["plan9", "amd64"], ["darwin", "arm"], ["windows", "arm"], ["linux", "386"], ["Linux", "amd64"], ["", "amd64"]]) {
    assertError(await h.req("POST", BUILD, { source: "remote_release", goos, goarch }), "VALIDATION_FAILED", `${goos}/${goarch}`);
  }
  assertError(await h.req("POST", BUILD, { source: "remote_release", goos: "linux" }), "VALIDATION_FAILED", "goarch missing");
  assertError(await h.req("POST", BUILD, { source: "github", goos: "linux", goarch: "amd64" }), "VALIDATION_FAILED", "unknown source");
  assert.equal(host.requests.length, 0);
});

test("spec §4 rule 5: download-grant refuses remote_release (the browser downloads from the release host) and issues no token", async (t) => {
  const host = await startReleaseHost(t);
  host.releases.set(TAG, release(TAG, [ASSET]));
  const h = await harnessFor(t, host);
  const before = h.fingerprint();
  const res = await h.req("POST", GRANT, { source: "remote_release", goos: "linux", goarch: "amd64" });
  assertError(res, "VALIDATION_FAILED");
  assert.match(res.json.error.message, /downloaded directly/);
  assert.equal(h.fingerprint(), before, "no token stored");
  assert.equal(host.requests.length, 0);
});
