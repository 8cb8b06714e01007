/**
 * Hitless peer updates on the agent (docs/decisions.md "Hitless peer updates"): a push with
 * `apply_mode: "hitless"` changes the peers of the running interface in place when only peers
 * changed, and runs the spec's sequence (§3.8) otherwise. A recording fake toolchain at the
 * Toolchain seam; config files are real files in a temp dir.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { applyConfigPush, atomicWriteFile, interfaceSection, sha256Hex } from "../../src/agent/config-push.js";
import type { Toolchain, ToolchainFor } from "../../src/agent/toolchain.types.js";
import type { ConfigPushPayload, TunnelProtocol } from "../../src/protocol/envelope.schema.js";

const IFACE = "svc0";
const INTERFACE = "# Managed by svc\n[Interface]\nPrivateKey = YHpg2Y8HdFqYsJ5BqCrCQ6dVcvGlmUXUnNDtUuVTGFE=\nAddress = 10.77.0.2/24\nListenPort = 51820\n";
const PEER_B = "\n[Peer]\n# b\nPublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\nAllowedIPs = 10.77.0.3/32\n";
const PEER_C = "\n[Peer]\n# c\nPublicKey = TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=\nAllowedIPs = 10.77.0.4/32\nEndpoint = 192.0.2.4:51820\n";
const OLD_TEXT = `${INTERFACE}${PEER_B}`;
const NEW_TEXT = `${INTERFACE}${PEER_B}${PEER_C}`;

interface Host {
  paths: Record<TunnelProtocol, string>;
  calls: string[];
  running: Record<TunnelProtocol, boolean>;
  /** `${method}:${protocol}` -> error message thrown by that call. */
  failures: Map<string, string>;
  toolchains: ToolchainFor;
  writeConfig: (path: string, text: string) => Promise<void>;
  writeFailure?: string;
  /** The previous config text each syncPeers call was given. */
  previousSeen: string[];
}

async function host(t: TestContext, running: Partial<Record<TunnelProtocol, boolean>>, opts: { syncPeers?: boolean } = {}): Promise<Host> {
  const dir = await mkdtemp(join(tmpdir(), "svc-hitless-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const paths = { wireguard: join(dir, "wireguard", `${IFACE}.conf`), awg_2: join(dir, "amneziawg", `${IFACE}.conf`) };
  for (const path of Object.values(paths)) {
    await mkdir(join(path, ".."), { recursive: true });
    await writeFile(path, OLD_TEXT, { mode: 0o600 });
  }
  const h: Host = {
    paths,
    calls: [],
    running: { wireguard: running.wireguard ?? false, awg_2: running.awg_2 ?? false },
    failures: new Map(),
    previousSeen: [],
    toolchains: () => assert.fail("replaced below"),
    writeConfig: async (path, text) => {
      h.calls.push(`write ${path}`);
      if (h.writeFailure !== undefined) throw new Error(h.writeFailure);
      await atomicWriteFile(path, text);
    },
  };
  const chain = (protocol: TunnelProtocol): Toolchain => {
    const step = (method: string) => {
      h.calls.push(`${method} ${protocol}`);
      const failure = h.failures.get(`${method}:${protocol}`);
      if (failure !== undefined) throw new Error(failure);
    };
    const base: Toolchain = {
      protocol,
      configPath: () => paths[protocol],
      isRunning: async () => (step("isRunning"), h.running[protocol]),
      down: async () => (step("down"), void (h.running[protocol] = false)),
      up: async () => (step("up"), void (h.running[protocol] = true)),
      show: async () => ({ code: 0, stdout: "", stderr: "" }),
    };
    const syncPeers = async (_iface: string, previous: string) => {
      step("syncPeers");
      h.previousSeen.push(previous);
      return { added: 1, changed: 0, removed: 0 };
    };
    return opts.syncPeers === false ? base : { ...base, syncPeers };
  };
  const chains = { wireguard: chain("wireguard"), awg_2: chain("awg_2") };
  h.toolchains = (protocol) => chains[protocol];
  return h;
}

function payload(previous: TunnelProtocol, target: TunnelProtocol, text = NEW_TEXT, over: Partial<ConfigPushPayload> = {}): ConfigPushPayload {
  return {
    action: "push_config",
    tunnel_protocol: target,
    previous_tunnel_protocol: previous,
    interface_name: IFACE,
    config_version: 9,
    config_sha256: sha256Hex(text),
    config_text: text,
    apply_mode: "hitless",
    ...over,
  };
}

const push = (h: Host, p: ConfigPushPayload) => applyConfigPush(p, { toolchains: h.toolchains, writeConfig: h.writeConfig });

test("hitless, only peers changed, interface running: written atomically, then the peers that differ applied in place; never stopped", async (t) => {
  for (const [protocol, tool] of [["wireguard", "wg"], ["awg_2", "awg"]] as const) {
    const h = await host(t, { [protocol]: true });
    const r = await push(h, payload(protocol, protocol));
    assert.equal(r.status, "applied", r.message);
    assert.deepEqual(h.calls, [`isRunning ${protocol}`, `write ${h.paths[protocol]}`, `syncPeers ${protocol}`]);
    assert.equal(r.message, `config v9 written to ${h.paths[protocol]}; applied without restart (${tool}: peers 1 added, 0 changed, 0 removed) to the running svc0`);
    assert.deepEqual(h.previousSeen, [OLD_TEXT], "the peers are compared with the file the interface ran from");
    assert.equal(await readFile(h.paths[protocol], "utf8"), NEW_TEXT);
    assert.equal(h.running[protocol], true);
  }
});

test("hitless, the [Interface] section changed: the spec's sequence (stop, write, start), and the ACK says why", async (t) => {
  const h = await host(t, { wireguard: true });
  const text = NEW_TEXT.replace("ListenPort = 51820", "ListenPort = 51821");
  const r = await push(h, payload("wireguard", "wireguard", text));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, ["isRunning wireguard", "isRunning wireguard", "down wireguard", `write ${h.paths.wireguard}`, "up wireguard"]);
  assert.match(r.message, /svc0 restarted with the wireguard toolchain \(not applied without restart: the \[Interface\] section changed\)$/);
  assert.equal(await readFile(h.paths.wireguard, "utf8"), text);
});

test("hitless, the peer update fails: falls back to the spec's sequence from the written file, and the ACK quotes the failure", async (t) => {
  const h = await host(t, { wireguard: true });
  h.failures.set("syncPeers:wireguard", "`wg addconf svc0 /tmp/x` failed (exit 1): Unable to modify interface");
  const r = await push(h, payload("wireguard", "wireguard"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, [
    "isRunning wireguard",
    `write ${h.paths.wireguard}`,
    "syncPeers wireguard",
    "isRunning wireguard",
    "down wireguard",
    `write ${h.paths.wireguard}`,
    "up wireguard",
  ]);
  assert.match(r.message, /restarted with the wireguard toolchain \(not applied without restart: the peer update failed: .*Unable to modify interface\)$/);
});

test("hitless with the interface down: only written, never started (spec §3.8 step 4), no peer update", async (t) => {
  const h = await host(t, {});
  const r = await push(h, payload("wireguard", "wireguard"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(h.calls, ["isRunning wireguard", "isRunning wireguard", `write ${h.paths.wireguard}`]);
  assert.match(r.message, /svc0 was not running and was not started$/);
});

test("hitless with a protocol switch, or a toolchain without in-place peer updates, or no previous file: the spec's sequence, with the reason", async (t) => {
  const switched = await host(t, { wireguard: true });
  let r = await push(switched, payload("wireguard", "awg_2"));
  assert.equal(r.status, "applied", r.message);
  assert.deepEqual(switched.calls, ["isRunning wireguard", "isRunning awg_2", "down wireguard", `write ${switched.paths.awg_2}`, "up awg_2"]);
  assert.match(r.message, /\(not applied without restart: the tunnel protocol changed\)$/);

  const windows = await host(t, { wireguard: true }, { syncPeers: false });
  r = await push(windows, payload("wireguard", "wireguard"));
  assert.deepEqual(windows.calls, ["isRunning wireguard", "down wireguard", `write ${windows.paths.wireguard}`, "up wireguard"]);
  assert.match(r.message, /cannot change peers in place\)$/);

  const fresh = await host(t, { wireguard: true });
  await rm(fresh.paths.wireguard);
  r = await push(fresh, payload("wireguard", "wireguard"));
  assert.deepEqual(fresh.calls, ["isRunning wireguard", "isRunning wireguard", "down wireguard", `write ${fresh.paths.wireguard}`, "up wireguard"]);
  assert.match(r.message, /the previous config cannot be read: .*ENOENT/);
});

test("without apply_mode (or restart), a peers-only change still runs the spec's sequence", async (t) => {
  for (const over of [{ apply_mode: undefined }, { apply_mode: "restart" as const }]) {
    const h = await host(t, { wireguard: true });
    const r = await push(h, payload("wireguard", "wireguard", NEW_TEXT, over));
    assert.deepEqual(h.calls, ["isRunning wireguard", "down wireguard", `write ${h.paths.wireguard}`, "up wireguard"]);
    assert.match(r.message, /restarted with the wireguard toolchain$/);
  }
});

test("hitless, the write fails: failed, the interface keeps running with its previous peers, the file untouched", async (t) => {
  const h = await host(t, { wireguard: true });
  h.writeFailure = "ENOSPC: no space left on device";
  const r = await push(h, payload("wireguard", "wireguard"));
  assert.equal(r.status, "failed");
  assert.deepEqual(h.calls, ["isRunning wireguard", `write ${h.paths.wireguard}`]);
  assert.match(r.message, /ENOSPC.*; svc0 keeps running with its previous peers$/);
  assert.equal(await readFile(h.paths.wireguard, "utf8"), OLD_TEXT);
  assert.equal(h.running.wireguard, true);
});

test("interfaceSection: the [Interface] lines trimmed, without blank lines, comments or peers; none or two sections → null", () => {
  assert.equal(interfaceSection(OLD_TEXT), interfaceSection(NEW_TEXT));
  assert.equal(interfaceSection(NEW_TEXT), "PrivateKey = YHpg2Y8HdFqYsJ5BqCrCQ6dVcvGlmUXUnNDtUuVTGFE=\nAddress = 10.77.0.2/24\nListenPort = 51820");
  assert.equal(interfaceSection("[Interface]\r\n  # note\r\n\r\nAddress = 10.0.0.1/24  \r\n"), "Address = 10.0.0.1/24");
  assert.notEqual(interfaceSection(NEW_TEXT), interfaceSection(NEW_TEXT.replace("Address = 10.77.0.2/24", "Address = 10.77.0.2/24\nPostUp = true")));
  assert.equal(interfaceSection(PEER_B), null);
  assert.equal(interfaceSection(`${INTERFACE}${INTERFACE}`), null);
});
