import assert from "node:assert/strict";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { test, type TestContext } from "node:test";
import { agentProfileSchema, profilePath, writeProfile, type AgentProfile } from "../../src/agent/profile.js";
import { CLIENT_VERSION } from "../../src/agent/version.js";
import { createServiceHost } from "../../src/cli/service/index.js";
import { EXIT, main, type CliDeps, type RunAgent } from "../../src/cli/svcctl.js";
import { api, dynamicNode } from "../control/agent-harness.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { recordingRunner, runCli, sampleProfile } from "./fixtures.js";
import { tempDir } from "../helpers/temp-dir.js";

const posix = process.platform !== "win32";

interface Harness {
  deps: CliDeps;
  out: () => string;
  err: () => string;
  calls: string[][];
  unitDir: string;
}

/** svcctl in-process on a pretend Linux host: service commands recorded, unit files in a temp dir. */
function cli(t: TestContext, opts: { privileged?: boolean; fetch?: typeof fetch; loadAgent?: () => Promise<RunAgent>; env?: Record<string, string> } = {}): Harness {
  const dir = tempDir(t, "svc-cli-test-");
  const unitDir = join(dir, "systemd");
  let out = "";
  let err = "";
  const { runner, calls } = recordingRunner((argv) => (argv[1] === "is-active" ? { code: 3, stdout: "inactive\n" } : {}));
  const deps: CliDeps = {
    env: opts.env ?? {},
    platform: "linux",
    hostname: () => "edge-1",
    fetch: opts.fetch ?? globalThis.fetch,
    stdout: (s) => (out += s),
    stderr: (s) => (err += s),
    service: { platform: "linux", host: createServiceHost(runner), isPrivileged: async () => opts.privileged ?? false, paths: { systemdUnitDir: unitDir } },
    launcher: { execPath: "/usr/bin/node", execArgv: [], entry: "/opt/svc/svcctl.mjs" },
    loadAgent: opts.loadAgent ?? (async () => Promise.reject(new Error("Cannot find module '../agent/agent.js'"))),
    onShutdownSignal: () => () => {},
    now: () => new Date("2026-01-01T00:00:00.000Z"),
  };
  return { deps, out: () => out, err: () => err, calls, unitDir };
}

/** A fresh bind token for a new dynamic node (spec §4 rule 10), and the node's ids. */
async function bindToken(s: SseServer): Promise<{ token: string; configId: string; nodeId: string }> {
  const { configId, nodeId } = await dynamicNode(s);
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  assert.equal(cmd.status, 200, JSON.stringify(cmd.json));
  const token = /--token (\S+)$/.exec(cmd.json.command as string)?.[1];
  assert.ok(token, cmd.json.command);
  assert.match(cmd.json.command as string, /^svcctl bind --server \S+ --token \S+$/, "DESIGN 5: the command this CLI understands");
  return { token, configId, nodeId };
}

async function closedPort(): Promise<number> {
  return new Promise((done, fail) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      srv.close(() => (typeof a === "object" && a ? done(a.port) : fail(new Error("no port"))));
    });
  });
}

test("spec 4 rule 11: `svcctl bind --no-service` against the real service stores a 0600 profile; the token then is used", { timeout: 180_000 }, async (t) => {
  const s = await startSseServer(t);
  const { token, configId, nodeId } = await bindToken(s);
  const dir = join(tempDir(t, "svc-cli-test-"), "agent");

  const first = await runCli(["--profile-dir", dir, "bind", "--server", s.baseUrl, "--token", token, "--no-service"]);
  assert.equal(first.code, EXIT.OK, `stdout: ${first.stdout}\nstderr: ${first.stderr}`);
  assert.match(first.stdout, new RegExp(`bound node ${nodeId} of config ${configId}`));
  assert.doesNotMatch(first.stdout + first.stderr, /password|s3cret/i, "the MQTT password is never printed");

  const profile = agentProfileSchema.parse(JSON.parse(readFileSync(profilePath(dir), "utf8")));
  assert.equal(profile.profile.config_id, configId);
  assert.equal(profile.profile.node_id, nodeId);
  assert.equal(profile.topics.heartbeat, `svc/${configId}/${nodeId}/heartbeat`);
  assert.ok(profile.mqtt.password.length > 20);
  if (posix) assert.equal(statSync(profilePath(dir)).mode & 0o777, 0o600);

  // the backend stored what the CLI reported (spec 2.7: client version from bind requests)
  const status = await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/endpoint-status`);
  assert.equal(status.json.client_initialized, true);
  assert.equal(status.json.client_version, CLIENT_VERSION);

  // spec 2.5: one successful use only
  const second = await runCli(["--profile-dir", dir, "bind", "--server", s.baseUrl, "--token", token, "--no-service"]);
  assert.equal(second.code, EXIT.REFUSED, `stdout: ${second.stdout}\nstderr: ${second.stderr}`);
  assert.match(second.stderr, /BIND_TOKEN_USED/);
  assert.match(second.stderr, /already used/);
  // the stored profile is untouched by the refused attempt
  assert.deepEqual(agentProfileSchema.parse(JSON.parse(readFileSync(profilePath(dir), "utf8"))), profile);

  // status reads it back, for scripts
  const st = await runCli(["--profile-dir", dir, "--json", "status"]);
  assert.equal(st.code, EXIT.OK, st.stderr);
  const json = JSON.parse(st.stdout) as { bound: boolean; client_version: string; profile: { config_id: string; node_id: string; server_url: string } };
  assert.equal(json.bound, true);
  assert.equal(json.client_version, CLIENT_VERSION);
  assert.deepEqual([json.profile.config_id, json.profile.node_id], [configId, nodeId]);
});

test("spec 5: bind that must install the service refuses without root before spending the token", { timeout: 60_000 }, async (t) => {
  const s = await startSseServer(t);
  const { token, nodeId } = await bindToken(s);
  const dir = join(tempDir(t, "svc-cli-test-"), "agent");

  const user = cli(t, { privileged: false });
  const code = await main(["--profile-dir", dir, "bind", "--server", s.baseUrl, "--token", token], user.deps);
  assert.equal(code, EXIT.PRIVILEGES, user.err());
  assert.match(user.err(), /NEEDS_PRIVILEGES: .*needs root.*spec §5.*--no-service.*token was not used/);
  assert.deepEqual(user.calls, []);

  // the same token still works, as root: profile stored, unit written, systemd driven
  const root = cli(t, { privileged: true });
  const ok = await main(["--profile-dir", dir, "bind", "--server", `${s.baseUrl}/`, "--token", token], root.deps);
  assert.equal(ok, EXIT.OK, root.err());
  assert.match(root.out(), new RegExp(`bound node ${nodeId}`));
  assert.match(root.out(), /svc-agent\.service installed and started/);
  const unit = readFileSync(join(root.unitDir, "svc-agent.service"), "utf8");
  assert.match(unit, new RegExp(`^ExecStart=/usr/bin/node /opt/svc/svcctl\\.mjs agent run --profile-dir ${resolve(dir)}$`, "m"));
  assert.match(unit, /^User=root$/m);
  assert.deepEqual(root.calls, [
    ["systemctl", "daemon-reload"],
    ["systemctl", "enable", "svc-agent.service"],
    ["systemctl", "restart", "svc-agent.service"],
  ]);
});

test("bind: unknown token → exit 2 with the service's code and message; --json gives the error as JSON", { timeout: 60_000 }, async (t) => {
  const s = await startSseServer(t);
  const dir = tempDir(t, "svc-cli-test-");
  const h = cli(t);
  const code = await main(["--profile-dir", dir, "bind", "--server", s.baseUrl, "--token", "x".repeat(43), "--no-service"], h.deps);
  assert.equal(code, EXIT.REFUSED);
  assert.match(h.err(), /^svcctl: INVALID_BIND_TOKEN: .* refused the bind \(HTTP 401\): unknown bind token\n$/);

  const j = cli(t);
  assert.equal(await main(["--json", "--profile-dir", dir, "bind", "--server", s.baseUrl, "--token", "y".repeat(43), "--no-service"], j.deps), EXIT.REFUSED);
  const body = JSON.parse(j.err()) as { error: { code: string; message: string }; exit_code: number };
  assert.equal(body.error.code, "INVALID_BIND_TOKEN");
  assert.equal(body.exit_code, EXIT.REFUSED);
});

test("bind: an unreachable server is a network error, exit 3, naming the address", { timeout: 60_000 }, async (t) => {
  const port = await closedPort();
  const h = cli(t);
  const code = await main(["--profile-dir", tempDir(t, "svc-cli-test-"), "bind", "--server", `http://127.0.0.1:${port}`, "--token", "t".repeat(43), "--no-service"], h.deps);
  assert.equal(code, EXIT.IO);
  assert.match(h.err(), new RegExp(`NETWORK: cannot reach http://127\\.0\\.0\\.1:${port}/api/client/bind: .*ECONNREFUSED`));
});

test("bind: a 5xx answer is exit 3 (retry later), a broken 200 answer is exit 3, nothing is stored", async (t) => {
  const dir = tempDir(t, "svc-cli-test-");
  const down = cli(t, { fetch: async () => new Response(JSON.stringify({ error: { code: "SERVICE_UNAVAILABLE", message: "database busy" } }), { status: 503 }) });
  assert.equal(await main(["--profile-dir", dir, "bind", "--server", "https://mesh.example.com", "--token", "t".repeat(43), "--no-service"], down.deps), EXIT.IO);
  assert.match(down.err(), /SERVICE_UNAVAILABLE: .*HTTP 503.*database busy/);

  const proxy = cli(t, { fetch: async () => new Response("<html>bad gateway</html>", { status: 502 }) });
  assert.equal(await main(["--profile-dir", dir, "bind", "--server", "https://mesh.example.com", "--token", "t".repeat(43), "--no-service"], proxy.deps), EXIT.IO);
  assert.match(proxy.err(), /HTTP_502/);

  const broken = sampleProfile() as unknown as { mqtt: Record<string, unknown> };
  delete broken.mqtt["password"];
  const odd = cli(t, { fetch: async () => new Response(JSON.stringify(broken), { status: 200 }) });
  assert.equal(await main(["--profile-dir", dir, "bind", "--server", "https://mesh.example.com", "--token", "t".repeat(43), "--no-service"], odd.deps), EXIT.IO);
  assert.match(odd.err(), /INVALID_ANSWER: .*mqtt\.password/);
  assert.throws(() => statSync(profilePath(dir)), /ENOENT/);
});

test("bind sends the DESIGN 5 body: token, normalised server URL, build version, platform, hostname", async (t) => {
  let seen: { url: string; body: Record<string, unknown> } | undefined;
  const h = cli(t, {
    fetch: async (input, init) => {
      seen = { url: String(input), body: JSON.parse(String(init?.body)) as Record<string, unknown> };
      return new Response(JSON.stringify(sampleProfile()), { status: 200, headers: { "content-type": "application/json" } });
    },
  });
  const dir = tempDir(t, "svc-cli-test-");
  assert.equal(await main(["--profile-dir", dir, "--json", "bind", "--server", "https://mesh.example.com/base/", "--token", " tok-123456789012345678901 ", "--no-service"], h.deps), EXIT.OK, h.err());
  assert.deepEqual(seen, {
    url: "https://mesh.example.com/base/api/client/bind",
    body: { bind_token: "tok-123456789012345678901", server_url: "https://mesh.example.com/base", client_version: CLIENT_VERSION, platform: "linux", hostname: "edge-1" },
  });
  assert.deepEqual(JSON.parse(h.out()), {
    config_id: "cfg-abc",
    node_id: "node-xyz",
    server_url: "https://mesh.example.com",
    profile_path: profilePath(dir),
    service: { installed: false, name: null },
  });
});

test("usage errors exit 1: missing --token, a non-http --server, an unknown command", async (t) => {
  const a = cli(t);
  assert.equal(await main(["bind", "--server", "https://x.example"], a.deps), EXIT.USAGE);
  assert.match(a.err(), /required option '--token <token>' not specified/);
  const b = cli(t);
  assert.equal(await main(["bind", "--server", "ftp://x.example", "--token", "t", "--no-service"], b.deps), EXIT.USAGE);
  assert.match(b.err(), /--server must be an http\(s\) URL/);
  const c = cli(t);
  assert.equal(await main(["frobnicate"], c.deps), EXIT.USAGE);
  const d = cli(t);
  assert.equal(await main(["--help"], d.deps), EXIT.OK);
  assert.match(d.out(), /Exit codes:\n {2}0 {2}ok\n {2}1 {2}usage error\n {2}2 {2}the server refused/);
});

test("agent run: hands the profile to runAgent and logs JSON lines on stdout", async (t) => {
  const dir = tempDir(t, "svc-cli-test-");
  const profile = sampleProfile();
  await writeProfile(dir, profile);
  let got: { profile: AgentProfile; profileDir: string; signal?: AbortSignal } | undefined;
  const h = cli(t, {
    loadAgent: async () => async (opts) => {
      got = opts;
      opts.log({ level: "info", msg: "mqtt_connected" });
    },
  });
  assert.equal(await main(["--profile-dir", dir, "agent", "run"], h.deps), EXIT.OK, h.err());
  assert.deepEqual(got?.profile, profile);
  assert.equal(got?.profileDir, dir);
  assert.ok(got?.signal instanceof AbortSignal);
  const lines = h.out().trimEnd().split("\n").map((l) => JSON.parse(l) as { msg: string; time: string });
  assert.deepEqual(lines.map((l) => l.msg), ["agent starting", "mqtt_connected", "agent stopped"]);
  assert.equal(lines[0]?.time, "2026-01-01T00:00:00.000Z");
});

test("agent run: no agent runtime, no profile, or a failing agent are exit 3 with a clear error", async (t) => {
  const dir = tempDir(t, "svc-cli-test-");
  const noProfile = cli(t);
  assert.equal(await main(["--profile-dir", dir, "agent", "run"], noProfile.deps), EXIT.IO);
  assert.match(noProfile.err(), /PROFILE_MISSING: no profile at .*profile\.json: run `svcctl bind` first/);

  await writeProfile(dir, sampleProfile());
  const noRuntime = cli(t);
  assert.equal(await main(["--profile-dir", dir, "agent", "run"], noRuntime.deps), EXIT.IO);
  assert.match(noRuntime.err(), /AGENT_UNAVAILABLE: cannot load the agent runtime/);

  const failing = cli(t, { loadAgent: async () => async () => Promise.reject(new Error("broker refused")) });
  assert.equal(await main(["--profile-dir", dir, "agent", "run"], failing.deps), EXIT.IO);
  assert.match(failing.err(), /AGENT_FAILED: .*broker refused/);

  writeFileSync(profilePath(dir), "{}");
  const invalid = cli(t);
  assert.equal(await main(["--profile-dir", dir, "agent", "run"], invalid.deps), EXIT.IO);
  assert.match(invalid.err(), /PROFILE_INVALID: .*profile\.json is not a valid profile: profile:/);
});

test("status: not bound is a state (exit 0); a bound profile shows config, node, server and the service", async (t) => {
  const dir = tempDir(t, "svc-cli-test-");
  const empty = cli(t, { env: { SVC_AGENT_DIR: dir } });
  assert.equal(await main(["status"], empty.deps), EXIT.OK, empty.err());
  assert.match(empty.out(), /not bound/);
  assert.match(empty.out(), /svc-agent\.service not installed, not running/);

  await writeProfile(dir, sampleProfile());
  const bound = cli(t, { env: { SVC_AGENT_DIR: dir } });
  assert.equal(await main(["--json", "status"], bound.deps), EXIT.OK, bound.err());
  const json = JSON.parse(bound.out()) as Record<string, unknown>;
  assert.deepEqual(json["profile"], { config_id: "cfg-abc", node_id: "node-xyz", server_url: "https://mesh.example.com", mqtt: { host: "mesh.example.com", port: 8883, tls: true } });
  assert.equal((json["service"] as { running: boolean }).running, false);
  assert.doesNotMatch(bound.out(), /s3cret/, "no secret in status output");
});

test("service install/uninstall need root (exit 4); install needs a bound profile (exit 3)", async (t) => {
  const dir = tempDir(t, "svc-cli-test-");
  const user = cli(t, { privileged: false });
  assert.equal(await main(["--profile-dir", dir, "service", "install"], user.deps), EXIT.PRIVILEGES);
  assert.match(user.err(), /needs root/);
  const user2 = cli(t, { privileged: false });
  assert.equal(await main(["--profile-dir", dir, "service", "uninstall"], user2.deps), EXIT.PRIVILEGES);

  const root = cli(t, { privileged: true });
  assert.equal(await main(["--profile-dir", dir, "service", "install"], root.deps), EXIT.IO);
  assert.match(root.err(), /PROFILE_MISSING/);
  assert.deepEqual(root.calls, []);

  await writeProfile(dir, sampleProfile());
  const ok = cli(t, { privileged: true });
  assert.equal(await main(["--profile-dir", dir, "service", "install"], ok.deps), EXIT.OK, ok.err());
  assert.match(readFileSync(join(ok.unitDir, "svc-agent.service"), "utf8"), /--profile-dir /);
  const st = cli(t);
  assert.equal(await main(["--json", "service", "status"], st.deps), EXIT.OK);
  assert.equal((JSON.parse(st.out()) as { service: { manager: string } }).service.manager, "systemd");
});
