import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { writeProfile } from "../../src/agent/profile.js";
import { renderSystemdUnit } from "../../src/cli/service/index.js";
import { ID_PATTERN } from "../../src/protocol/ids.js";
import { VERSION } from "../../src/lib/version.js";
import { sampleProfile } from "../cli/fixtures.js";
import { assertError, createConfig, createNode, startHarness, type Harness } from "../http/harness.js";
import { requireSystem } from "../helpers/system.js";
import { sqliteOf } from "../../src/store/connection.js";
import { tempDir } from "../helpers/temp-dir.js";

/**
 * spec §4 rules 4, 6, 7 (local_build), §3.7 and §5 (file tokens), against the real service
 * listening on 127.0.0.1. The zip of linux/amd64 is built once and shared by the subtests.
 */

const BUILD = "/api/v1/tools/download/client-artifacts/build";
const GRANT = "/api/v1/tools/download/client-artifacts/download-grant";
const FIVE_MINUTES = 5 * 60 * 1000;
const FILE = `svc-client-linux-amd64-v${VERSION}.zip`;
const ID = `art-linux-amd64-v${VERSION.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
const LINUX = { source: "local_build", goos: "linux", goarch: "amd64" } as const;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a program (no shell) with a bound on its time. */
function run(file: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: opts.cwd ?? tmpdir(),
      env: opts.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
      timeout: opts.timeoutMs ?? 60_000,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");

/** GET of the zip through inject, as bytes. */
async function download(h: Harness, url: string, auth: boolean | string): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer; text: string }> {
  const headers: Record<string, string> = {};
  if (auth !== false) headers.authorization = `Bearer ${typeof auth === "string" ? auth : h.token}`;
  const res = await h.server.app.inject({ method: "GET", url, headers });
  return { status: res.statusCode, headers: res.headers, body: res.rawPayload, text: res.body };
}

test("local_build: build, grant and download of the client zip (spec §4 rules 4, 6, 7)", { timeout: 180_000 }, async (t) => {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const h = await startHarness(t, { publicUrl: baseUrl });
  await h.server.app.listen({ host: "127.0.0.1", port });

  const built = await h.req("POST", BUILD, LINUX);
  assert.equal(built.status, 200, built.text);
  const zipPath = join(h.dataDir, "artifacts", FILE);
  const zip = readFileSync(zipPath);

  await t.test("spec §4 rule 4: build answers artifact_id, filename, size and sha256 of the zip kept under {dataDir}/artifacts", async () => {
    assert.deepEqual(built.json, { source: "local_build", artifact_id: ID, filename: FILE, size_bytes: zip.length, sha256: sha256(zip) });
    assert.match(built.json.artifact_id, ID_PATTERN);
    // Cached: a second build answers the same file without rebuilding it.
    const mtime = statSync(zipPath).mtimeMs;
    const again = await h.req("POST", BUILD, LINUX);
    assert.deepEqual(again.json, built.json);
    assert.equal(statSync(zipPath).mtimeMs, mtime, "not rebuilt");
    assert.deepEqual(readdirSync(join(h.dataDir, "artifacts")), [FILE], "no temp files left");
  });

  await t.test("spec §4 rule 7: an admin session downloads the zip without a token", async () => {
    const res = await download(h, `/api/v1/tools/download/client-artifacts/${ID}`, true);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers["content-type"], "application/zip");
    assert.equal(res.headers["content-disposition"], `attachment; filename="${FILE}"`);
    assert.equal(res.headers["cache-control"], "no-store");
    assert.equal(sha256(res.body), built.json.sha256);
  });

  await t.test("DESIGN §3: the zip unzips with the system unzip; SHA256SUMS verifies; svcctl --version prints the server version", async (st) => {
    if (!requireSystem(st, { binaries: ["unzip", "sha256sum", "sh"] })) return;
    const dir = tempDir(st, "svc-artifact-unzip-");
    writeFileSync(join(dir, FILE), zip);
    const unzip = await run("unzip", ["-oq", FILE, "-d", "svc-client"], { cwd: dir });
    assert.equal(unzip.code, 0, unzip.stderr);
    const out = join(dir, "svc-client");
    assert.deepEqual(readdirSync(out, { recursive: true }).map(String).sort(), [
      "README.txt",
      "SHA256SUMS",
      "service",
      "service/svc-agent.service",
      "svcctl",
      "svcctl.mjs",
    ]);
    assert.equal(statSync(join(out, "svcctl")).mode & 0o777, 0o755, "the launcher is executable");
    const sums = await run("sha256sum", ["-c", "SHA256SUMS"], { cwd: out });
    assert.equal(sums.code, 0, sums.stdout + sums.stderr);
    assert.equal(sums.stdout.trim().split("\n").length, 4, sums.stdout);

    // spec §9 rules 2-3: the bundle carries the server's version, injected at build time; it
    // runs from a directory without any package.json around it.
    const direct = await run(process.execPath, [join(out, "svcctl.mjs"), "--version"], { cwd: dir });
    assert.equal(direct.code, 0, direct.stderr);
    assert.equal(direct.stdout.trim(), VERSION);
    const env = { ...process.env, PATH: `${join(process.execPath, "..")}:${process.env["PATH"] ?? ""}` };
    const launched = await run(join(out, "svcctl"), ["--version"], { cwd: dir, env });
    assert.equal(launched.code, 0, launched.stderr);
    assert.equal(launched.stdout.trim(), VERSION);
    // README: `ln -sf <dir>/svcctl /usr/local/bin/svcctl`; the launcher follows the links.
    mkdirSync(join(dir, "bin"));
    symlinkSync(join(out, "svcctl"), join(dir, "bin", "svcctl-abs"));
    symlinkSync("svcctl-abs", join(dir, "bin", "svcctl"));
    const linked = await run(join(dir, "bin", "svcctl"), ["--version"], { cwd: tmpdir(), env });
    assert.equal(linked.code, 0, linked.stderr);
    assert.equal(linked.stdout.trim(), VERSION);

    assert.equal(
      readFileSync(join(out, "service/svc-agent.service"), "utf8"),
      renderSystemdUnit({ command: ["/usr/bin/node", "/opt/svc-client/svcctl.mjs", "agent", "run", "--profile-dir", "/etc/svc-agent"] }),
    );
    assert.match(readFileSync(join(out, "README.txt"), "utf8"), new RegExp(`svc client ${VERSION.replace(/\./g, "\\.")} for linux/amd64`));
  });

  await t.test("the bundled agent runtime loads: `svcctl agent run` starts, reports its version and stops on SIGTERM", async (st) => {
    if (!requireSystem(st, { binaries: ["unzip"] })) return;
    const dir = tempDir(st, "svc-artifact-agent-");
    writeFileSync(join(dir, FILE), zip);
    assert.equal((await run("unzip", ["-oq", FILE, "-d", "svc-client"], { cwd: dir })).code, 0);
    const profileDir = join(dir, "profile");
    // Nothing listens on port 1: the agent keeps retrying until it is stopped.
    await writeProfile(profileDir, sampleProfile({ mqtt: { host: "127.0.0.1", port: 1, tls: false } }));
    const child = spawn(process.execPath, [join(dir, "svc-client", "svcctl.mjs"), "--profile-dir", profileDir, "agent", "run"], {
      cwd: dir,
      env: { ...process.env, SVC_AGENT_TUNNEL_DIR: join(dir, "tunnels") },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 60_000,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    // Stop it once the runtime has logged something of its own (an MQTT error or connect).
    await new Promise<void>((resolve) => {
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        stdout += d;
        if (/"msg":"mqtt error"|"msg":"connected"/.test(stdout)) resolve();
      });
      child.on("close", () => resolve());
    });
    child.kill("SIGTERM");
    const code = await exited;
    assert.equal(code, 0, `${stdout}\n${stderr}`);
    const lines = stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines[0]?.msg, "agent starting");
    assert.equal(lines[0]?.client_version, VERSION);
    assert.equal(lines.at(-1)?.msg, "agent stopped");
  });

  await t.test("spec §4 rule 6: the grant's copied command, run by bash, downloads and unzips the zip with only the file token", async (st) => {
    if (!requireSystem(st, { binaries: ["bash", "curl", "unzip"] })) return;
    const grant = await h.req("POST", GRANT, LINUX);
    assert.equal(grant.status, 200, grant.text);
    const g = grant.json;
    assert.equal(g.artifact_id, ID);
    assert.equal(g.filename, FILE);
    assert.equal(g.sha256, built.json.sha256);
    assert.equal(g.size_bytes, zip.length);
    assert.equal(g.download_path, `/api/v1/tools/download/client-artifacts/${ID}?download_token=${g.download_token}`);
    assert.equal(g.download_token_expires_at, new Date(h.clock.now() + FIVE_MINUTES).toISOString());
    assert.equal(g.command, `curl -fL -o ${FILE} '${baseUrl}${g.download_path}' && unzip -oq ${FILE} -d svc-client`);
    assert.ok(!g.command.includes(h.token), "never the admin session token");
    const rows = sqliteOf(h.server.store).prepare("SELECT kind, resource_id FROM download_tokens").all();
    assert.deepEqual(rows, [{ kind: "client_artifact", resource_id: ID }]);

    const dir = tempDir(st, "svc-artifact-curl-");
    const res = await run("bash", ["-c", g.command], { cwd: dir });
    assert.equal(res.code, 0, res.stderr);
    assert.equal(sha256(readFileSync(join(dir, FILE))), built.json.sha256);
    assert.equal(readFileSync(join(dir, "svc-client", "svcctl.mjs")).length > 0, true);
    const sums = readFileSync(join(dir, "svc-client", "SHA256SUMS"), "utf8");
    assert.ok(sums.includes(`${sha256(readFileSync(join(dir, "svc-client", "svcctl.mjs")))}  svcctl.mjs`));
  });

  await t.test("spec §3.7: the token works for 5 minutes, then INVALID_DOWNLOAD_TOKEN", async () => {
    const g = (await h.req("POST", GRANT, LINUX)).json;
    h.clock.advance(FIVE_MINUTES - 1);
    assert.equal((await download(h, g.download_path, false)).status, 200);
    h.clock.advance(1);
    assertError(toRes(await download(h, g.download_path, false)), "INVALID_DOWNLOAD_TOKEN");
  });

  await t.test("spec §3.7, §7: another artifact's token and a node-config token are DOWNLOAD_TOKEN_SCOPE_MISMATCH", async () => {
    const arm = await h.req("POST", GRANT, { source: "local_build", goos: "linux", goarch: "arm64" });
    assert.equal(arm.status, 200, arm.text);
    assert.notEqual(arm.json.artifact_id, ID);
    assertError(
      toRes(await download(h, `/api/v1/tools/download/client-artifacts/${ID}?download_token=${arm.json.download_token}`, false)),
      "DOWNLOAD_TOKEN_SCOPE_MISMATCH",
    );
    assert.equal((await download(h, arm.json.download_path, false)).status, 200, "its own artifact");

    const config = await createConfig(h);
    const node = await createNode(h, config.config_id);
    const nodeToken = (await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/download-token`)).json.download_token;
    assertError(
      toRes(await download(h, `/api/v1/tools/download/client-artifacts/${ID}?download_token=${nodeToken}`, false)),
      "DOWNLOAD_TOKEN_SCOPE_MISMATCH",
    );
  });

  await t.test("spec §5: without an admin session or a token the download is 401; unknown tokens INVALID_DOWNLOAD_TOKEN", async () => {
    const url = `/api/v1/tools/download/client-artifacts/${ID}`;
    assertError(toRes(await download(h, url, false)), "UNAUTHORIZED");
    assertError(toRes(await download(h, url, "A".repeat(43))), "UNAUTHORIZED", "unknown bearer, no token");
    assertError(toRes(await download(h, `${url}?download_token=${"x".repeat(43)}`, false)), "INVALID_DOWNLOAD_TOKEN");
    assertError(toRes(await download(h, `${url}?download_token=`, false)), "INVALID_DOWNLOAD_TOKEN");
    // Either credential is enough: a valid session with a stale token still downloads.
    assert.equal((await download(h, `${url}?download_token=${"x".repeat(43)}`, true)).status, 200);
  });

  await t.test("unknown artifact ids are NOT_FOUND; malformed ones VALIDATION_FAILED", async () => {
    assertError(toRes(await download(h, "/api/v1/tools/download/client-artifacts/art-linux-amd64-v0-0-1", true)), "NOT_FOUND", "another version");
    assertError(toRes(await download(h, "/api/v1/tools/download/client-artifacts/art-plan9-amd64-v0-1-0", true)), "NOT_FOUND");
    assertError(toRes(await download(h, "/api/v1/tools/download/client-artifacts/ART", true)), "VALIDATION_FAILED");
  });

  await t.test("a zip removed from the cache is rebuilt on the next download; other versions' zips are pruned", async () => {
    rmSync(zipPath);
    const artifactsDir = join(h.dataDir, "artifacts");
    writeFileSync(join(artifactsDir, "svc-client-linux-amd64-v0.0.1.zip"), "old version");
    writeFileSync(join(artifactsDir, `.${FILE}.abcdef.tmp`), "interrupted build");
    const g = (await h.req("POST", GRANT, LINUX)).json; // grant rebuilds it
    assert.equal(statSync(zipPath).size > 0, true);
    assert.deepEqual(readdirSync(artifactsDir).sort(), [`svc-client-linux-arm64-v${VERSION}.zip`, FILE].sort());
    rmSync(zipPath);
    const res = await download(h, g.download_path, false); // and so does a download
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.length, statSync(zipPath).size);
  });

  await t.test("concurrent builds of one artifact share one build", async () => {
    const [a, b] = await Promise.all([h.server.artifacts.localBuild("windows", "amd64"), h.server.artifacts.localBuild("windows", "amd64")]);
    assert.equal(a, b, "the same build result object");
    assert.equal(a.filename, `svc-client-windows-amd64-v${VERSION}.zip`);
    const later = await h.server.artifacts.localBuild("windows", "amd64");
    assert.notEqual(later, a, "a later call looks the cache up again");
    assert.equal(later.sha256, a.sha256);
  });

  await t.test("DESIGN §3: unsupported goos/goarch is VALIDATION_FAILED for build and grant; nothing is written", async () => {
    const before = h.fingerprint();
    const files = readdirSync(join(h.dataDir, "artifacts")).sort();
    for (const [goos, goarch] of [["plan9", "amd64"], ["darwin", "arm"], ["windows", "arm"], ["linux", "mips"], ["LINUX", "amd64"]]) {
      for (const path of [BUILD, GRANT]) {
        assertError(await h.req("POST", path, { source: "local_build", goos, goarch }), "VALIDATION_FAILED", `${path} ${goos}/${goarch}`);
      }
    }
    assertError(await h.req("POST", GRANT, { source: "local_build", goos: "linux", goarch: "amd64", extra: 1 }), "VALIDATION_FAILED");
    assert.equal(h.fingerprint(), before);
    assert.deepEqual(readdirSync(join(h.dataDir, "artifacts")).sort(), files);
  });

  await t.test("build and grant need the admin session", async () => {
    assertError(await h.req("POST", BUILD, LINUX, { auth: false }), "UNAUTHORIZED");
    assertError(await h.req("POST", GRANT, LINUX, { auth: false }), "UNAUTHORIZED");
  });
});

/** The harness's assertError takes its own response shape. */
function toRes(r: { status: number; headers: Record<string, unknown>; text: string }) {
  let json: unknown;
  try {
    json = JSON.parse(r.text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers as Record<string, string>, text: r.text, json };
}
