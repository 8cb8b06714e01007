import assert from "node:assert/strict";
import { constants } from "node:fs";
import { access, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { test, type TestContext } from "node:test";
import { applyConfigPush, atomicWriteFile, sha256Hex } from "../../src/agent/config-push.js";
import { createCommandRunner } from "../../src/agent/exec.js";
import type { CommandResult, CommandRunner } from "../../src/agent/toolchain.types.js";
import { assertInterfaceName, createToolchains, InvalidInterfaceNameError, ToolchainCommandError } from "../../src/agent/toolchains.js";
import { TUNNEL_PROTOCOLS } from "../../src/protocol/envelope.schema.js";
import { requireSystem } from "../helpers/system.js";

// spec §6.3 "Toolchains by tunnel_protocol": wg / wg-quick and awg / awg-quick on Linux and
// macOS, the tunnel-service executables on Windows. Commands are checked as exact argv through a
// recording CommandRunner; the awg_2 toolchain also runs the stand-ins in
// test/fixtures/awg-standin (AmneziaWG is not packaged for Debian).

interface Call {
  file: string;
  args: readonly string[];
  timeoutMs: number | undefined;
}

function recordingRunner(answer: (call: Call) => Partial<CommandResult> = () => ({})): { run: CommandRunner; calls: Call[]; lines: () => string[] } {
  const calls: Call[] = [];
  const run: CommandRunner = async (file, args, opts) => {
    const call = { file, args: [...args], timeoutMs: opts?.timeoutMs };
    calls.push(call);
    return { code: 0, stdout: "", stderr: "", ...answer(call) };
  };
  return { run, calls, lines: () => calls.map((c) => [c.file, ...c.args].join(" ")) };
}

async function exercise(chain: ReturnType<ReturnType<typeof createToolchains>>, iface = "svc0"): Promise<void> {
  await chain.isRunning(iface);
  await chain.up(iface);
  await chain.down(iface);
  await chain.show(iface);
}

// ---- Linux / macOS ---------------------------------------------------------------------------

test("spec §6.3 toolchains on Linux: wireguard runs `wg show` and `wg-quick up|down /etc/wireguard/<iface>.conf`", async () => {
  const r = recordingRunner();
  const tc = createToolchains({ platform: "linux", run: r.run })("wireguard");
  assert.equal(tc.protocol, "wireguard");
  assert.equal(tc.configPath("svc0"), "/etc/wireguard/svc0.conf");
  await exercise(tc);
  assert.deepEqual(r.lines(), [
    "wg show svc0",
    "wg-quick up /etc/wireguard/svc0.conf",
    "wg-quick down /etc/wireguard/svc0.conf",
    "wg show svc0",
  ]);
  assert.ok(r.calls.every((c) => typeof c.timeoutMs === "number" && c.timeoutMs > 0), "every command has a time limit");
});

test("spec §6.3 toolchains on Linux: awg_2 runs `awg show` and `awg-quick up|down /etc/amnezia/amneziawg/<iface>.conf`", async () => {
  const r = recordingRunner();
  const tc = createToolchains({ platform: "linux", run: r.run })("awg_2");
  assert.equal(tc.protocol, "awg_2");
  assert.equal(tc.configPath("svc0"), "/etc/amnezia/amneziawg/svc0.conf");
  await exercise(tc);
  assert.deepEqual(r.lines(), [
    "awg show svc0",
    "awg-quick up /etc/amnezia/amneziawg/svc0.conf",
    "awg-quick down /etc/amnezia/amneziawg/svc0.conf",
    "awg show svc0",
  ]);
});

test("spec §6.3 toolchains on macOS: Homebrew's wg-quick directory /usr/local/etc/wireguard; awg_2 in /etc/amnezia/amneziawg", async () => {
  const r = recordingRunner();
  const tcs = createToolchains({ platform: "darwin", run: r.run });
  assert.equal(tcs("wireguard").configPath("utun-svc"), "/usr/local/etc/wireguard/utun-svc.conf");
  assert.equal(tcs("awg_2").configPath("svc0"), "/etc/amnezia/amneziawg/svc0.conf");
  await tcs("wireguard").up("svc0");
  await tcs("awg_2").down("svc0");
  assert.deepEqual(r.lines(), ["wg-quick up /usr/local/etc/wireguard/svc0.conf", "awg-quick down /etc/amnezia/amneziawg/svc0.conf"]);
});

test("toolchains: configDirs override per protocol and binDir prefixes every tool", async () => {
  const r = recordingRunner();
  const tcs = createToolchains({ platform: "linux", run: r.run, configDirs: { awg_2: "/tmp/agent-a/awg" }, binDir: "/opt/tools" });
  assert.equal(tcs("awg_2").configPath("svc0"), "/tmp/agent-a/awg/svc0.conf");
  assert.equal(tcs("wireguard").configPath("svc0"), "/etc/wireguard/svc0.conf", "the other protocol keeps its default");
  await exercise(tcs("awg_2"));
  await tcs("wireguard").isRunning("svc0");
  assert.deepEqual(r.lines(), [
    "/opt/tools/awg show svc0",
    "/opt/tools/awg-quick up /tmp/agent-a/awg/svc0.conf",
    "/opt/tools/awg-quick down /tmp/agent-a/awg/svc0.conf",
    "/opt/tools/awg show svc0",
    "/opt/tools/wg show svc0",
  ]);
});

test("spec §6.3 status check: exit 0 of `wg show <iface>` is running, any other exit is not", async () => {
  let code = 0;
  const r = recordingRunner(() => ({ code }));
  const tc = createToolchains({ platform: "linux", run: r.run })("wireguard");
  assert.equal(await tc.isRunning("svc0"), true);
  code = 1;
  assert.equal(await tc.isRunning("svc0"), false);
  code = 127; // tool not installed
  assert.equal(await tc.isRunning("svc0"), false);
});

test("toolchains: a failing up/down throws a ToolchainCommandError carrying the command, exit code and stderr", async () => {
  const r = recordingRunner(() => ({ code: 1, stderr: "wg-quick: `svc0' already exists\n" }));
  const tc = createToolchains({ platform: "linux", run: r.run })("wireguard");
  await assert.rejects(tc.up("svc0"), (err: unknown) => {
    assert.ok(err instanceof ToolchainCommandError);
    assert.equal(err.command, "wg-quick up /etc/wireguard/svc0.conf");
    assert.equal(err.message, "`wg-quick up /etc/wireguard/svc0.conf` failed (exit 1): wg-quick: `svc0' already exists");
    return true;
  });
  await assert.rejects(tc.down("svc0"), ToolchainCommandError);
});

// ---- Windows -----------------------------------------------------------------------------------

test("spec §6.3 toolchains on Windows: wireguard is wireguard.exe tunnel services, sc.exe status, wg.exe show", async () => {
  const r = recordingRunner();
  const tc = createToolchains({ platform: "win32", run: r.run })("wireguard");
  assert.equal(tc.configPath("svc0"), "C:\\ProgramData\\svc\\wireguard\\svc0.conf");
  await exercise(tc);
  assert.deepEqual(r.lines(), [
    "C:\\Windows\\System32\\sc.exe query WireGuardTunnel$svc0",
    "C:\\Program Files\\WireGuard\\wireguard.exe /installtunnelservice C:\\ProgramData\\svc\\wireguard\\svc0.conf",
    "C:\\Program Files\\WireGuard\\wireguard.exe /uninstalltunnelservice svc0",
    "C:\\Program Files\\WireGuard\\wg.exe show svc0",
  ]);
});

test("spec §6.3 toolchains on Windows: awg_2 is AmneziaWG's amneziawg.exe / awg.exe and service AmneziaWGTunnel$<iface>", async () => {
  const r = recordingRunner();
  const env = { ProgramFiles: "D:\\Apps", ProgramData: "E:\\Data", SystemRoot: "C:\\WINNT" };
  const tc = createToolchains({ platform: "win32", run: r.run, env })("awg_2");
  assert.equal(tc.configPath("svc0"), "E:\\Data\\svc\\awg_2\\svc0.conf");
  await exercise(tc);
  assert.deepEqual(r.lines(), [
    "C:\\WINNT\\System32\\sc.exe query AmneziaWGTunnel$svc0",
    "D:\\Apps\\AmneziaWG\\amneziawg.exe /installtunnelservice E:\\Data\\svc\\awg_2\\svc0.conf",
    "D:\\Apps\\AmneziaWG\\amneziawg.exe /uninstalltunnelservice svc0",
    "D:\\Apps\\AmneziaWG\\awg.exe show svc0",
  ]);
});

test("spec §6.3 Windows status: only `sc query` state 4 RUNNING counts; STOPPED and a missing service (1060) do not", async () => {
  const SC = (state: string) => `\r\nSERVICE_NAME: WireGuardTunnel$svc0 \r\n        TYPE               : 10  WIN32_OWN_PROCESS  \r\n        STATE              : ${state}\r\n`;
  let answer: Partial<CommandResult> = {};
  const r = recordingRunner(() => answer);
  const tc = createToolchains({ platform: "win32", run: r.run })("wireguard");
  answer = { code: 0, stdout: SC("4  RUNNING \r\n                                (STOPPABLE, NOT_PAUSABLE, ACCEPTS_SHUTDOWN)") };
  assert.equal(await tc.isRunning("svc0"), true);
  answer = { code: 0, stdout: SC("1  STOPPED ") };
  assert.equal(await tc.isRunning("svc0"), false);
  answer = { code: 1060, stdout: "[SC] EnumQueryServicesStatus:OpenService FAILED 1060:\r\n\r\nThe specified service does not exist as an installed service.\r\n" };
  assert.equal(await tc.isRunning("svc0"), false);
});

// ---- interface names -----------------------------------------------------------------------------

test("spec §6.3 interface_name: names failing the wg-quick rule are refused before any command runs", async () => {
  const bad = ["", "a/b", "../etc", "svc0;reboot", "$(id)", "`id`", "wg 0", "svc0\n", "sixteen-chars-xx", "-h", "--help", ".", "..", "all", "interfaces", "ünï"];
  for (const platform of ["linux", "darwin", "win32"] as const) {
    const r = recordingRunner();
    const tcs = createToolchains({ platform, run: r.run });
    for (const protocol of TUNNEL_PROTOCOLS) {
      const tc = tcs(protocol);
      for (const name of bad) {
        assert.throws(() => tc.configPath(name), InvalidInterfaceNameError, `${platform} ${protocol} configPath(${JSON.stringify(name)})`);
        for (const method of ["isRunning", "up", "down", "show"] as const) {
          await assert.rejects(tc[method](name), InvalidInterfaceNameError, `${platform} ${protocol} ${method}(${JSON.stringify(name)})`);
        }
      }
    }
    assert.deepEqual(r.calls, [], `${platform}: no command ran`);
  }
});

test("toolchains: Windows also refuses reserved device names and names ending in a dot", async () => {
  for (const name of ["CON", "nul", "com1", "LPT9", "aux.svc", "svc0."]) {
    assert.throws(() => assertInterfaceName(name, "win32"), InvalidInterfaceNameError, name);
  }
  for (const name of ["CON", "svc0."]) assert.doesNotThrow(() => assertInterfaceName(name, "linux"), name);
  for (const name of ["svc0", "wg-mesh_1", "a=b+c.d", "x".repeat(15)]) {
    for (const platform of ["linux", "darwin", "win32"] as const) assert.doesNotThrow(() => assertInterfaceName(name, platform));
  }
});

// ---- real tools ----------------------------------------------------------------------------------

const STANDIN_DIR = resolve(import.meta.dirname, "../fixtures/awg-standin");

interface Standin {
  run: CommandRunner;
  log: () => Promise<string[]>;
  configDir: string;
  stateDir: string;
  env: NodeJS.ProcessEnv;
}

async function standin(t: TestContext, extraEnv: NodeJS.ProcessEnv = {}): Promise<Standin> {
  for (const tool of ["awg", "awg-quick"]) await access(join(STANDIN_DIR, tool), constants.X_OK);
  const dir = await mkdtemp(join(tmpdir(), "svc-standin-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const logPath = join(dir, "calls.log");
  const env = {
    ...process.env,
    PATH: `${STANDIN_DIR}${delimiter}${process.env["PATH"] ?? ""}`,
    SVC_STANDIN_LOG: logPath,
    SVC_STANDIN_STATE: join(dir, "state"),
    ...extraEnv,
  };
  return {
    run: createCommandRunner({ env }),
    log: async () => (await readFile(logPath, "utf8").catch(() => "")).split("\n").filter((l) => l !== ""),
    configDir: join(dir, "amneziawg"),
    stateDir: join(dir, "state"),
    env,
  };
}

const AWG_CONFIG = "[Interface]\nPrivateKey = YHpg2Y8HdFqYsJ5BqCrCQ6dVcvGlmUXUnNDtUuVTGFE=\nAddress = 10.77.0.2/24\nJc = 4\nJmin = 40\nJmax = 70\nS1 = 60\nS2 = 90\nH1 = 1294847201\nH2 = 2059261920\nH3 = 3710183473\nH4 = 4159193052\n";

test("spec §6.3 awg_2 with the stand-in awg/awg-quick on PATH: isRunning, up, show, down run the tools and are logged", async (t) => {
  const s = await standin(t);
  const tc = createToolchains({ platform: "linux", run: s.run, configDirs: { awg_2: s.configDir } })("awg_2");
  const path = tc.configPath("svc0");
  assert.equal(path, join(s.configDir, "svc0.conf"));
  await atomicWriteFile(path, AWG_CONFIG);

  assert.equal(await tc.isRunning("svc0"), false);
  await tc.up("svc0");
  assert.equal(await tc.isRunning("svc0"), true);
  assert.equal(await readFile(join(s.stateDir, "svc0.conf"), "utf8"), AWG_CONFIG, "the stand-in was brought up from our file");
  const shown = await tc.show("svc0");
  assert.equal(shown.code, 0);
  assert.match(shown.stdout, /^interface: svc0$/m);
  await assert.rejects(tc.up("svc0"), /already exists/);
  await tc.down("svc0");
  assert.equal(await tc.isRunning("svc0"), false);
  await assert.rejects(tc.down("svc0"), (err: unknown) => err instanceof ToolchainCommandError && /is not a WireGuard interface/.test(err.message));

  assert.deepEqual(await s.log(), [
    "awg show svc0",
    `awg-quick up ${path}`,
    "awg show svc0",
    "awg show svc0",
    `awg-quick up ${path}`,
    `awg-quick down ${path}`,
    "awg show svc0",
    `awg-quick down ${path}`,
  ]);
});

test("spec §3.8 with the stand-in tools: awg_2→awg_2 push while running stops, writes and restarts from the new file", async (t) => {
  const s = await standin(t);
  const tcs = createToolchains({ platform: "linux", run: s.run, configDirs: { awg_2: s.configDir } });
  const path = tcs("awg_2").configPath("svc0");
  await atomicWriteFile(path, AWG_CONFIG);
  await tcs("awg_2").up("svc0");
  const text = AWG_CONFIG.replace("10.77.0.2/24", "10.77.0.9/24");
  const r = await applyConfigPush(
    { action: "push_config", tunnel_protocol: "awg_2", previous_tunnel_protocol: "awg_2", interface_name: "svc0", config_version: 3, config_sha256: sha256Hex(text), config_text: text },
    { toolchains: tcs },
  );
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(await s.log(), [`awg-quick up ${path}`, "awg show svc0", `awg-quick down ${path}`, `awg-quick up ${path}`]);
  assert.equal(await readFile(path, "utf8"), text);
  assert.equal(await readFile(join(s.stateDir, "svc0.conf"), "utf8"), text, "restarted from the new config");
});

test("spec §3.8 step 2 with the stand-in tools: `awg-quick down` failing → failed and the file on disk untouched", async (t) => {
  const s = await standin(t);
  const path = join(s.configDir, "svc0.conf");
  await atomicWriteFile(path, AWG_CONFIG);
  await createToolchains({ platform: "linux", run: s.run, configDirs: { awg_2: s.configDir } })("awg_2").up("svc0");
  const failing = createCommandRunner({ env: { ...s.env, SVC_STANDIN_FAIL: "awg-quick:down" } });
  const tcs = createToolchains({ platform: "linux", run: failing, configDirs: { awg_2: s.configDir } });
  const text = "[Interface]\n# new\n";
  const r = await applyConfigPush(
    { action: "push_config", tunnel_protocol: "awg_2", previous_tunnel_protocol: "awg_2", interface_name: "svc0", config_version: 4, config_sha256: sha256Hex(text), config_text: text },
    { toolchains: tcs },
  );
  assert.equal(r.status, "failed");
  assert.match(r.message, /stopping svc0 with the awg_2 toolchain failed: `awg-quick down .*svc0\.conf` failed \(exit 1\): awg-quick: injected failure/);
  assert.equal(await readFile(path, "utf8"), AWG_CONFIG);
  assert.equal(await tcs("awg_2").isRunning("svc0"), true, "still running");
});

test("spec §6.3 wireguard with the real `wg`: an absent interface is not running (no interface is created)", async (t) => {
  if (!requireSystem(t, { binaries: ["wg"], root: true })) return;
  const tc = createToolchains({ platform: "linux", run: createCommandRunner() })("wireguard");
  assert.equal(await tc.isRunning("svcabsent9"), false);
  const shown = await tc.show("svcabsent9");
  assert.notEqual(shown.code, 0);
  assert.match(shown.stderr, /Unable to access interface|No such device/);
});
