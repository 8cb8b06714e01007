import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { applyConfigPush, atomicWriteFile, sha256Hex } from "../../src/agent/config-push.js";
import type { CommandResult, Toolchain, ToolchainFor } from "../../src/agent/toolchain.types.js";
import type { ConfigPushPayload, TunnelProtocol } from "../../src/protocol/envelope.schema.js";

// spec §3.8 (config push sequence on the agent) with a RECORDING fake toolchain at the
// Toolchain seam: every isRunning / down / up and every config write is recorded in order;
// running state and failures are configurable. Config files are real files in a temp dir, so
// "config untouched" is checked on disk.

const IFACE = "svc0";
const OLD: Record<TunnelProtocol, string> = { wireguard: "[Interface]\n# OLD wireguard\n", awg_2: "[Interface]\n# OLD awg_2\nJc = 4\n" };
const NEW_TEXT = "[Interface]\nPrivateKey = AAAA\nAddress = 10.77.0.2/24\n# NEW v8\n";

type Method = "isRunning" | "down" | "up";

interface Host {
  dir: string;
  paths: Record<TunnelProtocol, string>;
  calls: string[];
  running: Record<TunnelProtocol, boolean>;
  /** `${method}:${protocol}` -> error message thrown by that call. */
  failures: Map<string, string>;
  toolchains: ToolchainFor;
  writeConfig: (path: string, text: string) => Promise<void>;
  writeFailure?: string;
}

async function host(t: TestContext, running: Partial<Record<TunnelProtocol, boolean>> = {}): Promise<Host> {
  const dir = await mkdtemp(join(tmpdir(), "svc-push-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const paths: Record<TunnelProtocol, string> = {
    wireguard: join(dir, "wireguard", `${IFACE}.conf`),
    awg_2: join(dir, "amneziawg", `${IFACE}.conf`),
  };
  for (const protocol of ["wireguard", "awg_2"] as const) {
    await mkdir(join(paths[protocol], ".."), { recursive: true });
    await writeFile(paths[protocol], OLD[protocol], { mode: 0o600 });
  }
  const h: Host = {
    dir,
    paths,
    calls: [],
    running: { wireguard: running.wireguard ?? false, awg_2: running.awg_2 ?? false },
    failures: new Map(),
    toolchains: () => {
      throw new Error("replaced below");
    },
    writeConfig: async () => {},
  };
  const chain = (protocol: TunnelProtocol): Toolchain => {
    const step = (method: Method, iface: string) => {
      h.calls.push(`${method} ${protocol} ${iface}`);
      const failure = h.failures.get(`${method}:${protocol}`);
      if (failure !== undefined) throw new Error(failure);
    };
    return {
      protocol,
      configPath: (iface) => {
        assert.equal(iface, IFACE);
        return paths[protocol];
      },
      isRunning: async (iface) => {
        step("isRunning", iface);
        return h.running[protocol];
      },
      down: async (iface) => {
        step("down", iface);
        h.running[protocol] = false;
      },
      up: async (iface) => {
        step("up", iface);
        h.running[protocol] = true;
      },
      show: async (): Promise<CommandResult> => ({ code: 0, stdout: "", stderr: "" }),
    };
  };
  const chains = { wireguard: chain("wireguard"), awg_2: chain("awg_2") };
  h.toolchains = (protocol) => chains[protocol];
  h.writeConfig = async (path, text) => {
    h.calls.push(`write ${path}`);
    if (h.writeFailure !== undefined) throw new Error(h.writeFailure);
    await atomicWriteFile(path, text);
  };
  return h;
}

function payload(previous: TunnelProtocol, target: TunnelProtocol, over: Partial<ConfigPushPayload> = {}): ConfigPushPayload {
  return {
    action: "push_config",
    tunnel_protocol: target,
    previous_tunnel_protocol: previous,
    interface_name: IFACE,
    config_version: 8,
    config_sha256: createHash("sha256").update(NEW_TEXT).digest("hex"),
    config_text: NEW_TEXT,
    ...over,
  };
}

const push = (h: Host, p: ConfigPushPayload) => applyConfigPush(p, { toolchains: h.toolchains, writeConfig: h.writeConfig });

async function assertUntouched(h: Host): Promise<void> {
  assert.equal(await readFile(h.paths.wireguard, "utf8"), OLD.wireguard, "wireguard config untouched");
  assert.equal(await readFile(h.paths.awg_2, "utf8"), OLD.awg_2, "awg_2 config untouched");
}

// ---- each protocol, running or not ---------------------------------------------------------

test("spec §3.8: wireguard→wireguard while running: inspect once, stop, write, restart with wireguard → applied", async (t) => {
  const h = await host(t, { wireguard: true });
  const r = await push(h, payload("wireguard", "wireguard"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, [
    "isRunning wireguard svc0",
    "down wireguard svc0",
    `write ${h.paths.wireguard}`,
    "up wireguard svc0",
  ]);
  assert.equal(await readFile(h.paths.wireguard, "utf8"), NEW_TEXT);
  assert.equal((await stat(h.paths.wireguard)).mode & 0o777, 0o600);
  assert.equal(await readFile(h.paths.awg_2, "utf8"), OLD.awg_2);
  assert.match(r.message, /restarted with the wireguard toolchain/);
});

test("spec §3.8 step 4: wireguard→wireguard while stopped: only writes, never starts → applied", async (t) => {
  const h = await host(t);
  const r = await push(h, payload("wireguard", "wireguard"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", `write ${h.paths.wireguard}`]);
  assert.equal(await readFile(h.paths.wireguard, "utf8"), NEW_TEXT);
  assert.equal(h.running.wireguard, false);
  assert.match(r.message, /was not running and was not started/);
});

test("spec §3.8: awg_2→awg_2 while running: stop and restart with awg_2 → applied", async (t) => {
  const h = await host(t, { awg_2: true });
  const r = await push(h, payload("awg_2", "awg_2"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, ["isRunning awg_2 svc0", "down awg_2 svc0", `write ${h.paths.awg_2}`, "up awg_2 svc0"]);
  assert.equal(await readFile(h.paths.awg_2, "utf8"), NEW_TEXT);
});

test("spec §3.8: wireguard→awg_2 with the old interface running: stop with wireguard, write at awg_2's path, start with awg_2", async (t) => {
  const h = await host(t, { wireguard: true });
  const r = await push(h, payload("wireguard", "awg_2"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, [
    "isRunning wireguard svc0",
    "isRunning awg_2 svc0",
    "down wireguard svc0",
    `write ${h.paths.awg_2}`,
    "up awg_2 svc0",
  ]);
  assert.equal(await readFile(h.paths.awg_2, "utf8"), NEW_TEXT);
  assert.equal(await readFile(h.paths.wireguard, "utf8"), OLD.wireguard, "the previous toolchain's file is not rewritten");
  assert.deepEqual(h.running, { wireguard: false, awg_2: true });
});

test("spec §3.8 step 4: wireguard→awg_2 with nothing running: inspects both, writes at awg_2's path, starts nothing", async (t) => {
  const h = await host(t);
  const r = await push(h, payload("wireguard", "awg_2"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", "isRunning awg_2 svc0", `write ${h.paths.awg_2}`]);
  assert.deepEqual(h.running, { wireguard: false, awg_2: false });
});

test("spec §3.8: awg_2→wireguard with the old interface running: stop with awg_2, restart with wireguard", async (t) => {
  const h = await host(t, { awg_2: true });
  const r = await push(h, payload("awg_2", "wireguard"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, [
    "isRunning awg_2 svc0",
    "isRunning wireguard svc0",
    "down awg_2 svc0",
    `write ${h.paths.wireguard}`,
    "up wireguard svc0",
  ]);
  assert.equal(await readFile(h.paths.wireguard, "utf8"), NEW_TEXT);
  assert.deepEqual(h.running, { wireguard: true, awg_2: false });
});

test("spec §3.8 step 2: both running: each stopped with its own toolchain before the write, one restart with the target", async (t) => {
  const h = await host(t, { wireguard: true, awg_2: true });
  const r = await push(h, payload("wireguard", "awg_2"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, [
    "isRunning wireguard svc0",
    "isRunning awg_2 svc0",
    "down wireguard svc0",
    "down awg_2 svc0",
    `write ${h.paths.awg_2}`,
    "up awg_2 svc0",
  ]);
  assert.deepEqual(h.running, { wireguard: false, awg_2: true });
});

test("spec §3.8: only the target running on a protocol switch: stopped and restarted with the target", async (t) => {
  const h = await host(t, { awg_2: true });
  const r = await push(h, payload("wireguard", "awg_2"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", "isRunning awg_2 svc0", "down awg_2 svc0", `write ${h.paths.awg_2}`, "up awg_2 svc0"]);
});

test("spec §3.8 steps 2–4: call order — every stop before the write, the write before the start", async (t) => {
  for (const [previous, target] of [["wireguard", "wireguard"], ["wireguard", "awg_2"], ["awg_2", "wireguard"], ["awg_2", "awg_2"]] as const) {
    const h = await host(t, { wireguard: true, awg_2: true });
    const r = await push(h, payload(previous, target));
    assert.equal(r.status, "applied", r.message);
    const write = h.calls.findIndex((c) => c.startsWith("write "));
    const lastDown = h.calls.findLastIndex((c) => c.startsWith("down "));
    const lastInspect = h.calls.findLastIndex((c) => c.startsWith("isRunning "));
    const up = h.calls.findIndex((c) => c.startsWith("up "));
    assert.ok(lastInspect < h.calls.findIndex((c) => c.startsWith("down ")), `${previous}→${target}: inspect before stop`);
    assert.ok(lastDown < write, `${previous}→${target}: stops before write`);
    assert.ok(write < up, `${previous}→${target}: write before up`);
    assert.equal(h.calls.filter((c) => c.startsWith("up ")).length, 1);
    assert.equal(h.calls[up], `up ${target} svc0`, "restart with the target toolchain only");
    assert.equal(h.calls[write], `write ${h.paths[target]}`, "written at the target toolchain's path");
  }
});

// ---- failures ------------------------------------------------------------------------------

test("spec §3.8 step 2: the first stop fails → failed, nothing else stopped, config untouched on disk", async (t) => {
  const h = await host(t, { wireguard: true, awg_2: true });
  h.failures.set("down:wireguard", "`wg-quick down /etc/wireguard/svc0.conf` failed (exit 1): device busy");
  const r = await push(h, payload("wireguard", "awg_2"));
  assert.equal(r.status, "failed");
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", "isRunning awg_2 svc0", "down wireguard svc0"]);
  assert.match(r.message, /stopping svc0 with the wireguard toolchain failed: .*device busy; config not written/);
  await assertUntouched(h);
});

test("spec §3.8 step 2: the second stop fails → failed, config untouched, the message says what was already stopped", async (t) => {
  const h = await host(t, { wireguard: true, awg_2: true });
  h.failures.set("down:awg_2", "awg-quick: `svc0' is not a WireGuard interface");
  const r = await push(h, payload("wireguard", "awg_2"));
  assert.equal(r.status, "failed");
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", "isRunning awg_2 svc0", "down wireguard svc0", "down awg_2 svc0"]);
  assert.match(r.message, /stopping svc0 with the awg_2 toolchain failed/);
  assert.match(r.message, /already stopped under wireguard and left stopped/);
  assert.ok(!h.calls.some((c) => c.startsWith("up ")), "nothing restarted");
  await assertUntouched(h);
});

test("spec §3.8 step 2: the only running interface fails to stop → failed, config untouched", async (t) => {
  const h = await host(t, { wireguard: true });
  h.failures.set("down:wireguard", "permission denied");
  const r = await push(h, payload("wireguard", "wireguard"));
  assert.equal(r.status, "failed");
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", "down wireguard svc0"]);
  await assertUntouched(h);
});

test("spec §3.8 + §6.3 config_sha256: a digest mismatch → failed before anything is inspected or stopped", async (t) => {
  const h = await host(t, { wireguard: true, awg_2: true });
  const r = await push(h, payload("wireguard", "awg_2", { config_sha256: sha256Hex("something else") }));
  assert.equal(r.status, "failed");
  assert.match(r.message, /config_sha256 mismatch for config v8/);
  assert.deepEqual(h.calls, [], "a corrupt push never takes a tunnel down");
  assert.deepEqual(h.running, { wireguard: true, awg_2: true });
  await assertUntouched(h);
});

test("spec §3.8 step 5: the restart fails → failed, with the new config written", async (t) => {
  const h = await host(t, { wireguard: true });
  h.failures.set("up:awg_2", "`awg-quick up …` failed (exit 1): Unable to modify interface");
  const r = await push(h, payload("wireguard", "awg_2"));
  assert.equal(r.status, "failed");
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", "isRunning awg_2 svc0", "down wireguard svc0", `write ${h.paths.awg_2}`, "up awg_2 svc0"]);
  assert.match(r.message, /written to .*but starting svc0 with the awg_2 toolchain failed: .*Unable to modify interface/);
  assert.equal(await readFile(h.paths.awg_2, "utf8"), NEW_TEXT);
});

test("spec §3.8 step 5: the write fails → failed, nothing started, the stopped interface is reported", async (t) => {
  const h = await host(t, { wireguard: true });
  h.writeFailure = "ENOSPC: no space left on device";
  const r = await push(h, payload("wireguard", "wireguard"));
  assert.equal(r.status, "failed");
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", "down wireguard svc0", `write ${h.paths.wireguard}`]);
  assert.match(r.message, /ENOSPC.*svc0 was stopped \(wireguard\) and is left stopped/);
  await assertUntouched(h);
});

test("spec §3.8 step 1: an inspection that errors → failed, nothing stopped or written", async (t) => {
  const h = await host(t, { wireguard: true });
  h.failures.set("isRunning:awg_2", "sc.exe could not be started");
  const r = await push(h, payload("wireguard", "awg_2"));
  assert.equal(r.status, "failed");
  assert.deepEqual(h.calls, ["isRunning wireguard svc0", "isRunning awg_2 svc0"]);
  assert.match(r.message, /inspecting svc0 with the awg_2 toolchain failed/);
  await assertUntouched(h);
});

test("spec §6.3: a payload that fails the schema (interface name) → failed, no tool is called", async (t) => {
  const h = await host(t, { wireguard: true });
  const r = await push(h, payload("wireguard", "wireguard", { interface_name: "svc0;reboot" }));
  assert.equal(r.status, "failed");
  assert.match(r.message, /invalid config push payload \(interface_name/);
  assert.deepEqual(h.calls, []);
  await assertUntouched(h);
});

test("spec §3.8 step 3: without writeConfig the default atomic writer is used at the target's path", async (t) => {
  const h = await host(t);
  const target = join(h.dir, "fresh", "nested", `${IFACE}.conf`);
  const chains: ToolchainFor = (protocol) => ({ ...h.toolchains(protocol), configPath: () => target });
  const r = await applyConfigPush(payload("awg_2", "awg_2"), { toolchains: chains });
  assert.equal(r.status, "applied", r.message);
  assert.equal(await readFile(target, "utf8"), NEW_TEXT);
  assert.equal((await stat(target)).mode & 0o777, 0o600);
  assert.equal((await stat(join(h.dir, "fresh", "nested"))).mode & 0o777, 0o700);
});

test("spec §3.8: log receives the steps", async (t) => {
  const h = await host(t, { awg_2: true });
  const lines: string[] = [];
  const r = await applyConfigPush(payload("awg_2", "awg_2"), { toolchains: h.toolchains, writeConfig: h.writeConfig, log: (m) => lines.push(m) });
  assert.equal(r.status, "applied");
  assert.deepEqual(lines.map((l) => l.split(" ")[0]), ["config", "stopped", "wrote", "started"]);
});

// ---- atomicWriteFile -------------------------------------------------------------------------

test("atomicWriteFile: creates missing directories 0700, writes 0600 (also over a 0644 file), leaves no temp file", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "svc-atomic-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, "a", "b", "svc0.conf");
  await atomicWriteFile(path, "one\n");
  assert.equal(await readFile(path, "utf8"), "one\n");
  assert.equal((await stat(path)).mode & 0o777, 0o600);
  assert.equal((await stat(join(dir, "a"))).mode & 0o777, 0o700);
  assert.equal((await stat(join(dir, "a", "b"))).mode & 0o777, 0o700);

  const loose = join(dir, "loose.conf");
  await writeFile(loose, "old\n", { mode: 0o644 });
  await atomicWriteFile(loose, "new\n");
  assert.equal(await readFile(loose, "utf8"), "new\n");
  assert.equal((await stat(loose)).mode & 0o777, 0o600);
  assert.deepEqual((await readdir(dir)).sort(), ["a", "loose.conf"]);
  assert.deepEqual(await readdir(join(dir, "a", "b")), ["svc0.conf"]);
});

test("atomicWriteFile: a failed rename throws, removes the temp file and leaves the target as it was", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "svc-atomic-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, "svc0.conf");
  await mkdir(path); // a directory where the file should go: rename(2) fails
  await writeFile(join(path, "keep"), "x");
  await assert.rejects(atomicWriteFile(path, "new\n"));
  assert.deepEqual(await readdir(dir), ["svc0.conf"], "no temp file left behind");
  assert.deepEqual(await readdir(path), ["keep"]);
});
