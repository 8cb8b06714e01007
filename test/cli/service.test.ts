import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import {
  agentCommand,
  createServiceHost,
  installService,
  renderLaunchdPlist,
  renderSystemdUnit,
  ServiceError,
  serviceStatus,
  systemdQuote,
  uninstallService,
  windowsBinPath,
  windowsProfileAclCommand,
  windowsQuote,
  windowsReinstallCommands,
  windowsServiceCommands,
  type ServiceTarget,
} from "../../src/cli/service/index.js";
import { findOnPath, requireSystem } from "../helpers/system.js";
import { recordingRunner } from "./fixtures.js";
import { tempDir } from "../helpers/temp-dir.js";

const COMMAND = ["/usr/bin/node", "/opt/svc/svcctl.mjs", "agent", "run", "--profile-dir", "/etc/svc-agent"];

test("spec 5: the systemd unit runs `<node> <entry> agent run --profile-dir <dir>` as root with Restart=always", () => {
  assert.equal(
    renderSystemdUnit({ command: COMMAND }),
    [
      "# Written by svcctl: the svc mesh agent as a system service (spec §5: svc-agent.service, root).",
      "# Reinstall with `svcctl service install`; remove with `svcctl service uninstall`.",
      "[Unit]",
      "Description=svc mesh agent",
      "Wants=network-online.target",
      "After=network-online.target",
      "StartLimitIntervalSec=0",
      "",
      "[Service]",
      "Type=simple",
      "User=root",
      "ExecStart=/usr/bin/node /opt/svc/svcctl.mjs agent run --profile-dir /etc/svc-agent",
      "Restart=always",
      "RestartSec=5",
      "",
      "[Install]",
      "WantedBy=multi-user.target",
      "",
    ].join("\n"),
  );
  assert.throws(() => renderSystemdUnit({ command: ["node", "x"] }), /absolute/);
});

test("systemd quoting: spaces, quotes, backslashes, % specifiers and $ variables survive", () => {
  assert.equal(systemdQuote("/etc/svc-agent"), "/etc/svc-agent");
  assert.equal(systemdQuote("/srv/my agent"), '"/srv/my agent"');
  assert.equal(systemdQuote('a"b\\c'), '"a\\"b\\\\c"');
  assert.equal(systemdQuote("100%"), "100%%");
  assert.equal(systemdQuote("$HOME"), "$$HOME");
  assert.equal(systemdQuote(""), '""');
  assert.throws(() => systemdQuote("a\nb"), /control character/);
});

test("the systemd unit passes `systemd-analyze verify`", { timeout: 60_000 }, (t) => {
  // .ci/run installs systemd: a skip with a reason when missing, a failure under
  // SVC_TEST_REQUIRE_SYSTEM=1 (DESIGN §4).
  if (!requireSystem(t, { binaries: ["systemd-analyze"] })) return;
  const analyze = findOnPath("systemd-analyze");
  assert.ok(analyze !== undefined);
  const dir = tempDir(t, "svc-service-test-");
  const unit = join(dir, "svc-agent.service");
  const entry = join(dir, "entry with space", "svcctl.mjs");
  mkdirSync(join(dir, "entry with space"));
  const profileDir = join(dir, "profile 100% $x");
  const text = renderSystemdUnit({ command: [process.execPath, entry, "agent", "run", "--profile-dir", profileDir] });
  writeFileSync(unit, text);
  const res = spawnSync(analyze, ["verify", unit], { encoding: "utf8", timeout: 30_000 });
  assert.equal(res.error, undefined, String(res.error));
  const complaints = `${res.stdout}\n${res.stderr}`.split("\n").filter((l) => l.includes(unit) || l.includes("svc-agent.service"));
  assert.deepEqual(complaints, [], `systemd-analyze verify: ${res.stdout}${res.stderr}`);
  assert.equal(res.status, 0, `systemd-analyze verify: ${res.stdout}${res.stderr}`);
});

const EXPECTED_PLIST = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by svcctl: the svc mesh agent as a LaunchDaemon (spec §5: root). -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>com.svc.agent</string>
  <key>ProgramArguments</key>
  <array>
    <string>/usr/local/bin/node</string>
    <string>/opt/svc/svcctl.mjs</string>
    <string>agent</string>
    <string>run</string>
    <string>--profile-dir</string>
    <string>/Library/Application Support/svc-agent</string>
  </array>
  <key>UserName</key>
  <string>root</string>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <true/>
  <key>ThrottleInterval</key>
  <integer>5</integer>
  <key>StandardOutPath</key>
  <string>/Library/Logs/svc-agent.log</string>
  <key>StandardErrorPath</key>
  <string>/Library/Logs/svc-agent.log</string>
</dict>
</plist>
`;

/** Each <key> of the top dict, followed by exactly one value element (no XML parser in Node). */
function plistKeys(xml: string): Map<string, string> {
  const body = xml.slice(xml.indexOf("<dict>") + "<dict>".length, xml.lastIndexOf("</dict>"));
  const out = new Map<string, string>();
  const re = /<key>([^<]*)<\/key>\s*(<(string|integer|true|false|array)\b[^>]*?(?:\/>|>[\s\S]*?<\/\3>))/g;
  let consumed = 0;
  for (let m = re.exec(body); m !== null; m = re.exec(body)) {
    assert.equal(body.slice(consumed, m.index).trim(), "", `nothing but whitespace between entries, before <key>${m[1]}</key>`);
    out.set(m[1] ?? "", m[2] ?? "");
    consumed = m.index + m[0].length;
  }
  assert.equal(body.slice(consumed).trim(), "", "every <key> is followed by a value element");
  return out;
}

test("spec 5: the LaunchDaemon plist is the expected text, every key has a value, root, RunAtLoad, KeepAlive", (t) => {
  const command = ["/usr/local/bin/node", "/opt/svc/svcctl.mjs", "agent", "run", "--profile-dir", "/Library/Application Support/svc-agent"];
  const xml = renderLaunchdPlist({ command });
  assert.equal(xml, EXPECTED_PLIST);
  const keys = plistKeys(xml);
  assert.equal(keys.get("Label"), "<string>com.svc.agent</string>");
  assert.equal(keys.get("UserName"), "<string>root</string>");
  assert.equal(keys.get("RunAtLoad"), "<true/>");
  assert.equal(keys.get("KeepAlive"), "<true/>");
  assert.match(keys.get("ProgramArguments") ?? "", /^<array>/);

  // XML metacharacters in a path are escaped, and the structure still holds
  const odd = renderLaunchdPlist({ command: ["/usr/local/bin/node", "/opt/a&b/<x>.mjs", "agent", "run"] });
  assert.match(odd, /<string>\/opt\/a&amp;b\/&lt;x&gt;\.mjs<\/string>/);
  assert.equal(plistKeys(odd).size, 8);

  const plutil = findOnPath("plutil");
  if (plutil === undefined) {
    t.diagnostic("plutil not on PATH (not macOS): checked the golden text and key/value structure only");
    return;
  }
  const dir = tempDir(t, "svc-service-test-");
  const file = join(dir, "com.svc.agent.plist");
  writeFileSync(file, xml);
  const res = spawnSync(plutil, ["-lint", file], { encoding: "utf8", timeout: 30_000 });
  assert.equal(res.status, 0, `${res.stdout}${res.stderr}`);
});

test("spec 5: the Windows service is SvcAgent as LocalSystem, started automatically", () => {
  const command = ["C:\\Program Files\\nodejs\\node.exe", "C:\\Program Files\\svc\\svcctl.mjs", "agent", "run", "--profile-dir", "C:\\ProgramData\\svc-agent"];
  const binPath = '"C:\\Program Files\\nodejs\\node.exe" "C:\\Program Files\\svc\\svcctl.mjs" agent run --profile-dir C:\\ProgramData\\svc-agent';
  assert.equal(windowsBinPath(command), binPath);
  assert.deepEqual(windowsServiceCommands({ command }), [
    ["sc.exe", "create", "SvcAgent", "binPath=", binPath, "obj=", "LocalSystem", "start=", "auto", "DisplayName=", "svc mesh agent"],
    ["sc.exe", "description", "SvcAgent", "Runs the svc mesh agent: the node's MQTT control channel and its WireGuard/AmneziaWG tunnel."],
    ["sc.exe", "failure", "SvcAgent", "reset=", "86400", "actions=", "restart/5000/restart/5000/restart/5000"],
    ["sc.exe", "start", "SvcAgent"],
  ]);
  const again = windowsReinstallCommands({ command });
  assert.deepEqual(again[0], ["sc.exe", "stop", "SvcAgent"]);
  assert.deepEqual(again[1], ["sc.exe", "config", "SvcAgent", "binPath=", binPath, "obj=", "LocalSystem", "start=", "auto", "DisplayName=", "svc mesh agent"]);
  assert.deepEqual(windowsProfileAclCommand("C:\\ProgramData\\svc-agent"), [
    "icacls",
    "C:\\ProgramData\\svc-agent",
    "/inheritance:r",
    "/grant:r",
    "*S-1-5-18:(OI)(CI)F",
    "*S-1-5-32-544:(OI)(CI)F",
  ]);
});

test("Windows quoting follows CommandLineToArgvW: backslashes doubled only before a quote", () => {
  assert.equal(windowsQuote("plain"), "plain");
  assert.equal(windowsQuote("C:\\dir\\"), "C:\\dir\\");
  assert.equal(windowsQuote("C:\\my dir\\"), '"C:\\my dir\\\\"');
  assert.equal(windowsQuote('say "hi"'), '"say \\"hi\\""');
  assert.equal(windowsQuote(""), '""');
});

test("the agent command pins the loader (`--import tsx` → a file URL) and drops debug and test flags", () => {
  const cmd = agentCommand("/etc/svc-agent", {
    execPath: "/usr/bin/node",
    execArgv: ["--import", "tsx", "--inspect=9229", "--test", "--require=/abs/preflight.cjs", "--enable-source-maps"],
    entry: "/repo/src/cli/svcctl.ts",
    resolve: (s) => `file:///repo/node_modules/${s}/dist/loader.mjs`,
  });
  assert.deepEqual(cmd, [
    "/usr/bin/node",
    "--import",
    "file:///repo/node_modules/tsx/dist/loader.mjs",
    "--require",
    "/abs/preflight.cjs",
    "--enable-source-maps",
    "/repo/src/cli/svcctl.ts",
    "agent",
    "run",
    "--profile-dir",
    "/etc/svc-agent",
  ]);
  // a bundle runs with no loader at all
  assert.deepEqual(agentCommand("/d", { execPath: "/n", execArgv: [], entry: "/b.mjs" }), ["/n", "/b.mjs", "agent", "run", "--profile-dir", "/d"]);
  // the real resolver finds this repository's tsx
  const real = agentCommand("/d", { execPath: "/n", execArgv: ["--import", "tsx"], entry: "/e" });
  assert.match(real[2] ?? "", /^file:\/\/.*tsx.*\.mjs$/);
});

function target(t: TestContext, opts: { platform: NodeJS.Platform; privileged: boolean; answer?: Parameters<typeof recordingRunner>[0] }) {
  const dir = tempDir(t, "svc-service-test-");
  const { runner, calls } = recordingRunner(opts.answer);
  const svc: ServiceTarget = {
    platform: opts.platform,
    host: createServiceHost(runner),
    isPrivileged: async () => opts.privileged,
    paths: { systemdUnitDir: join(dir, "systemd"), launchDaemonsDir: join(dir, "LaunchDaemons") },
  };
  return { svc, calls, dir };
}

test("spec 5: installing without root is refused with a clear error and changes nothing", async (t) => {
  for (const platform of ["linux", "darwin", "win32"] as const) {
    const { svc, calls, dir } = target(t, { platform, privileged: false });
    await assert.rejects(installService(svc, { command: COMMAND }), (err: unknown) => {
      assert.ok(err instanceof ServiceError);
      assert.equal(err.reason, "privileges");
      assert.match(err.message, platform === "win32" ? /Administrator.*LocalSystem/ : /needs root/);
      return true;
    });
    await assert.rejects(uninstallService(svc), (err: unknown) => err instanceof ServiceError && err.reason === "privileges");
    assert.deepEqual(calls, [], `${platform}: no command ran`);
    assert.equal(existsSync(join(dir, "systemd")) || existsSync(join(dir, "LaunchDaemons")), false);
  }
});

test("linux install writes the unit 0644, reloads, enables and restarts; uninstall reverses it", async (t) => {
  const { svc, calls, dir } = target(t, { platform: "linux", privileged: true });
  const file = await installService(svc, { command: COMMAND });
  assert.equal(file, join(dir, "systemd", "svc-agent.service"));
  assert.equal(readFileSync(file, "utf8"), renderSystemdUnit({ command: COMMAND }));
  if (process.platform !== "win32") assert.equal(statSync(file).mode & 0o777, 0o644);
  assert.deepEqual(calls, [
    ["systemctl", "daemon-reload"],
    ["systemctl", "enable", "svc-agent.service"],
    ["systemctl", "restart", "svc-agent.service"],
  ]);
  calls.length = 0;
  await uninstallService(svc);
  assert.equal(existsSync(file), false);
  assert.deepEqual(calls, [
    ["systemctl", "disable", "--now", "svc-agent.service"],
    ["systemctl", "daemon-reload"],
  ]);
});

test("a failing service manager command is reported with its output", async (t) => {
  const { svc } = target(t, {
    platform: "linux",
    privileged: true,
    answer: (argv) => (argv[1] === "restart" ? { code: 1, stderr: "Job for svc-agent.service failed." } : {}),
  });
  await assert.rejects(installService(svc, { command: COMMAND }), (err: unknown) => {
    assert.ok(err instanceof ServiceError);
    assert.equal(err.reason, "command");
    assert.match(err.message, /systemctl restart svc-agent\.service. exited with 1: Job for svc-agent\.service failed\./);
    return true;
  });
});

test("macOS install writes the plist and boots it into the system domain; a not-loaded bootout is fine", async (t) => {
  const { svc, calls, dir } = target(t, {
    platform: "darwin",
    privileged: true,
    answer: (argv) => (argv[1] === "bootout" ? { code: 3, stderr: "Boot-out failed: 3: No such process" } : {}),
  });
  const file = await installService(svc, { command: COMMAND });
  assert.equal(file, join(dir, "LaunchDaemons", "com.svc.agent.plist"));
  assert.equal(readFileSync(file, "utf8"), renderLaunchdPlist({ command: COMMAND }));
  assert.deepEqual(calls, [
    ["launchctl", "bootout", "system/com.svc.agent"],
    ["launchctl", "enable", "system/com.svc.agent"],
    ["launchctl", "bootstrap", "system", file],
  ]);
  await uninstallService(svc);
  assert.equal(existsSync(file), false);
});

test("Windows install creates SvcAgent fresh, or reconfigures an existing one in place", async (t) => {
  const fresh = target(t, { platform: "win32", privileged: true, answer: (argv) => (argv[1] === "query" ? { code: 1060 } : {}) });
  await installService(fresh.svc, { command: COMMAND });
  assert.deepEqual(fresh.calls, [["sc.exe", "query", "SvcAgent"], ...windowsServiceCommands({ command: COMMAND })]);

  const existing = target(t, { platform: "win32", privileged: true, answer: (argv) => (argv[1] === "stop" ? { code: 1062, stdout: "[SC] ControlService FAILED 1062" } : {}) });
  await installService(existing.svc, { command: COMMAND });
  assert.deepEqual(existing.calls, [["sc.exe", "query", "SvcAgent"], ...windowsReinstallCommands({ command: COMMAND })]);
});

test("service status reads the service manager's answers and needs no privileges", async (t) => {
  const linux = target(t, {
    platform: "linux",
    privileged: false,
    answer: (argv) => (argv[1] === "is-enabled" ? { stdout: "enabled\n" } : { stdout: "active\n" }),
  });
  assert.deepEqual(await serviceStatus(linux.svc), {
    manager: "systemd",
    name: "svc-agent.service",
    file: join(linux.dir, "systemd", "svc-agent.service"),
    installed: true,
    running: true,
    detail: "enabled=enabled active=active",
  });
  const mac = target(t, { platform: "darwin", privileged: false, answer: () => ({ code: 113, stderr: "Could not find service" }) });
  const m = await serviceStatus(mac.svc);
  assert.equal(m.installed, false);
  assert.equal(m.running, false);
  const win = target(t, {
    platform: "win32",
    privileged: false,
    answer: () => ({ stdout: "SERVICE_NAME: SvcAgent\n        TYPE               : 10  WIN32_OWN_PROCESS\n        STATE              : 4  RUNNING\n" }),
  });
  const w = await serviceStatus(win.svc);
  assert.equal(w.installed, true);
  assert.equal(w.running, true);
  const none = target(t, { platform: "freebsd", privileged: false });
  assert.equal((await serviceStatus(none.svc)).manager, "none");
});
