/**
 * `Toolchain.syncPeers` and the peer delta it applies (src/agent/peer-delta.ts): the peers of a
 * running interface changed in place, only those that differ, without a shell — `wg-quick
 * strip`, `wg show <iface> peers`, `wg addconf` through a private temp file, `wg set … peer
 * <key> remove`. Exact argv through a recording CommandRunner; the real tools run in
 * test/e2e/hitless.test.ts.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { test } from "node:test";
import { peerDelta, peerSections } from "../../src/agent/peer-delta.js";
import type { CommandResult, CommandRunner } from "../../src/agent/toolchain.types.js";
import { createToolchains, ToolchainCommandError } from "../../src/agent/toolchains.js";

const KEY_B = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
const KEY_C = "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=";
const KEY_D = "KTLgzb6REv/3IJBDAJCRBV7fsoeLzM9HDSiucgayAHg=";
const INTERFACE = "# Managed by svc\n[Interface]\nPrivateKey = YHpg2Y8HdFqYsJ5BqCrCQ6dVcvGlmUXUnNDtUuVTGFE=\nListenPort = 51820\n";
const peer = (key: string, address: string, extra = "") => `\n[Peer]\n# node ${address}\nPublicKey = ${key}\nAllowedIPs = ${address}/32\n${extra}`;
const PREVIOUS = `${INTERFACE}Address = 10.77.0.2/24\n${peer(KEY_B, "10.77.0.3")}${peer(KEY_C, "10.77.0.4", "Endpoint = 192.0.2.4:51820\nPersistentKeepalive = 25\n")}`;
/** What `wg-quick strip` prints for the new file: C's endpoint and keepalive gone, D added, B as it was. */
const STRIPPED = `${INTERFACE}${peer(KEY_B, "10.77.0.3")}${peer(KEY_C, "10.77.0.4")}${peer(KEY_D, "10.77.0.5", "Endpoint = 192.0.2.5:51820\n")}`;

interface Seen {
  argv: string[];
  /** For `addconf`: the file's content, its mode, its directory's mode, its path. */
  file?: { text: string; mode: number; dirMode: number; path: string };
}

function runner(answer: (argv: string[]) => Partial<CommandResult>): { run: CommandRunner; seen: Seen[] } {
  const seen: Seen[] = [];
  const run: CommandRunner = async (file, args) => {
    const s: Seen = { argv: [file, ...args] };
    if (args[0] === "addconf") {
      const path = args[2] ?? "";
      s.file = { text: readFileSync(path, "utf8"), mode: statSync(path).mode & 0o777, dirMode: statSync(dirname(path)).mode & 0o777, path };
    }
    seen.push(s);
    return { code: 0, stdout: "", stderr: "", ...answer(s.argv) };
  };
  return { run, seen };
}

const answers = (running: string[]) => (argv: string[]) => (argv[1] === "strip" ? { stdout: STRIPPED } : argv[3] === "peers" ? { stdout: `${running.join("\n")}\n` } : {});

test("peerDelta: only peers added or changed go to addconf (a dropped keepalive explicitly 0); peers gone are removed; an unchanged peer is not named", () => {
  const delta = peerDelta(PREVIOUS, STRIPPED, [KEY_B, KEY_C]);
  assert.deepEqual({ added: delta.added, changed: delta.changed, removed: delta.removed, remove: delta.remove }, { added: 1, changed: 1, removed: 0, remove: [] });
  assert.equal(
    delta.addconf,
    `[Interface]\n\n[Peer]\nPublicKey = ${KEY_C}\nAllowedIPs = 10.77.0.4/32\nPersistentKeepalive = 0\n\n[Peer]\nPublicKey = ${KEY_D}\nAllowedIPs = 10.77.0.5/32\nEndpoint = 192.0.2.5:51820\n`,
  );
  const gone = peerDelta(STRIPPED, PREVIOUS, [KEY_B, KEY_C, KEY_D, "not a key; reboot"]);
  assert.deepEqual(gone.remove, [KEY_D], "a running peer the new file lacks is removed; a non-key is never passed on");
  assert.equal(gone.changed, 1);
  assert.equal(peerDelta(PREVIOUS, PREVIOUS, [KEY_B, KEY_C]).addconf, null, "nothing differs: nothing to run");
  assert.equal(peerDelta(PREVIOUS, PREVIOUS, [KEY_B]).added, 1, "a peer of the file missing from the interface is added back");
});

test("peerSections: by public key, comments and blank lines dropped; a [Peer] without a key throws", () => {
  assert.deepEqual([...peerSections(PREVIOUS).keys()], [KEY_B, KEY_C]);
  assert.deepEqual(peerSections(PREVIOUS).get(KEY_B), [`PublicKey = ${KEY_B}`, "AllowedIPs = 10.77.0.3/32"]);
  assert.throws(() => peerSections("[Peer]\nAllowedIPs = 10.0.0.1/32\n"), /no PublicKey/);
});

test("syncPeers on Linux: strip, list the running peers, addconf the difference from a private temp file (removed after), set … remove", async () => {
  for (const [protocol, quick, tool, dir] of [
    ["wireguard", "wg-quick", "wg", "/etc/wireguard"],
    ["awg_2", "awg-quick", "awg", "/etc/amnezia/amneziawg"],
  ] as const) {
    const r = runner(answers([KEY_B, KEY_C, "TTTT1234TTTT1234TTTT1234TTTT1234TTTT1234TTg="]));
    const chain = createToolchains({ platform: "linux", run: r.run })(protocol);
    assert.ok(chain.syncPeers);
    assert.deepEqual(await chain.syncPeers("svc0", PREVIOUS), { added: 1, changed: 1, removed: 1 });
    assert.deepEqual(r.seen[0]?.argv, [quick, "strip", `${dir}/svc0.conf`]);
    assert.deepEqual(r.seen[1]?.argv, [tool, "show", "svc0", "peers"]);
    const add = r.seen[2];
    assert.deepEqual(add?.argv.slice(0, 3), [tool, "addconf", "svc0"]);
    assert.match(add?.file?.text ?? "", new RegExp(`PublicKey = ${KEY_D.replace(/[+/]/g, "\\$&")}`));
    assert.doesNotMatch(add?.file?.text ?? "", /PrivateKey|ListenPort|10\.77\.0\.3/, "neither the interface nor an unchanged peer is re-sent");
    assert.deepEqual(add?.file && [add.file.mode, add.file.dirMode], [0o600, 0o700]);
    assert.equal(existsSync(dirname(add?.file?.path ?? "/")), false, "the temp directory is gone");
    assert.deepEqual(r.seen[3]?.argv, [tool, "set", "svc0", "peer", "TTTT1234TTTT1234TTTT1234TTTT1234TTTT1234TTg=", "remove"]);
    assert.equal(r.seen.length, 4);
  }
});

test("syncPeers: nothing differs → no addconf and no set; a failing tool throws with its output, the temp file still removed", async () => {
  const same = runner((argv) => (argv[1] === "strip" ? { stdout: PREVIOUS } : argv[3] === "peers" ? { stdout: `${KEY_B}\n${KEY_C}\n` } : {}));
  await createToolchains({ platform: "linux", run: same.run })("wireguard").syncPeers?.("svc0", PREVIOUS);
  assert.deepEqual(same.seen.map((s) => s.argv[1]), ["strip", "show"]);

  const strip = runner((argv) => (argv[1] === "strip" ? { code: 1, stderr: "wg-quick: `/etc/wireguard/svc0.conf' does not exist" } : {}));
  await assert.rejects(createToolchains({ platform: "linux", run: strip.run })("wireguard").syncPeers?.("svc0", PREVIOUS) ?? Promise.resolve(), (err: unknown) => err instanceof ToolchainCommandError && /strip .*does not exist/.test(err.message));
  assert.equal(strip.seen.length, 1);

  const add = runner((argv) => (argv[1] === "addconf" ? { code: 1, stderr: "Unable to modify interface: Protocol not supported" } : answers([KEY_B])(argv)));
  await assert.rejects(createToolchains({ platform: "linux", run: add.run })("wireguard").syncPeers?.("svc0", PREVIOUS) ?? Promise.resolve(), /wg addconf svc0 .*\(exit 1\): Unable to modify interface/);
  assert.equal(existsSync(dirname(add.seen[2]?.file?.path ?? "/")), false);
});

test("syncPeers: refused names never reach a tool; Windows has no strip, so no syncPeers (pushes there restart)", async () => {
  const r = runner(() => ({}));
  await assert.rejects(createToolchains({ platform: "linux", run: r.run })("wireguard").syncPeers?.("-rf", PREVIOUS) ?? Promise.resolve(), /invalid interface name/);
  assert.equal(r.seen.length, 0);
  assert.equal(createToolchains({ platform: "win32", run: r.run })("wireguard").syncPeers, undefined);
});
