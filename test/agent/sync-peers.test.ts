/**
 * `Toolchain.syncPeers`: the peers of a running interface changed in place, as wg-quick(8)
 * documents (`wg syncconf <iface> <(wg-quick strip <iface>)`), without a shell: the stripped
 * text goes through a private temp file. Exact argv through a recording CommandRunner; the real
 * tools run in test/e2e/hitless.test.ts.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { test } from "node:test";
import type { CommandResult, CommandRunner } from "../../src/agent/toolchain.types.js";
import { createToolchains, ToolchainCommandError } from "../../src/agent/toolchains.js";

const STRIPPED = "[Interface]\nPrivateKey = YHpg2Y8HdFqYsJ5BqCrCQ6dVcvGlmUXUnNDtUuVTGFE=\n\n[Peer]\nPublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\nAllowedIPs = 10.77.0.3/32\n";

interface Seen {
  argv: string[];
  /** For `syncconf`: the file's content, its mode and its directory's mode at the time of the call. */
  file?: { text: string; mode: number; dirMode: number; path: string };
}

function runner(answer: (argv: string[]) => Partial<CommandResult>): { run: CommandRunner; seen: Seen[] } {
  const seen: Seen[] = [];
  const run: CommandRunner = async (file, args) => {
    const argv = [file, ...args];
    const s: Seen = { argv };
    if (args[0] === "syncconf") {
      const path = args[2] ?? "";
      s.file = { text: readFileSync(path, "utf8"), mode: statSync(path).mode & 0o777, dirMode: statSync(dirname(path)).mode & 0o777, path };
    }
    seen.push(s);
    return { code: 0, stdout: "", stderr: "", ...answer(argv) };
  };
  return { run, seen };
}

test("syncPeers on Linux: `wg-quick strip <configPath>`, its output in a private temp file, `wg syncconf <iface> <file>`; the file is removed after", async () => {
  for (const [protocol, quick, tool, dir] of [
    ["wireguard", "wg-quick", "wg", "/etc/wireguard"],
    ["awg_2", "awg-quick", "awg", "/etc/amnezia/amneziawg"],
  ] as const) {
    const r = runner((argv) => (argv[1] === "strip" ? { stdout: STRIPPED } : {}));
    const chain = createToolchains({ platform: "linux", run: r.run })(protocol);
    assert.ok(chain.syncPeers);
    await chain.syncPeers("svc0");
    assert.deepEqual(r.seen[0]?.argv, [quick, "strip", `${dir}/svc0.conf`]);
    const sync = r.seen[1];
    assert.deepEqual(sync?.argv.slice(0, 3), [tool, "syncconf", "svc0"]);
    assert.deepEqual(sync?.file && { text: sync.file.text, mode: sync.file.mode, dirMode: sync.file.dirMode }, { text: STRIPPED, mode: 0o600, dirMode: 0o700 }, "the private key is readable by the agent only");
    assert.equal(existsSync(dirname(sync?.file?.path ?? "/")), false, "the temp directory is gone");
    assert.equal(r.seen.length, 2);
  }
});

test("syncPeers: a failing strip throws before syncconf runs; a failing syncconf throws with its output and still removes the file", async () => {
  const strip = runner((argv) => (argv[1] === "strip" ? { code: 1, stderr: "wg-quick: `/etc/wireguard/svc0.conf' does not exist" } : {}));
  const chain = createToolchains({ platform: "linux", run: strip.run })("wireguard");
  await assert.rejects(chain.syncPeers?.("svc0") ?? Promise.resolve(), (err: unknown) => err instanceof ToolchainCommandError && /strip .*does not exist/.test(err.message));
  assert.equal(strip.seen.length, 1);

  const sync = runner((argv) => (argv[1] === "strip" ? { stdout: STRIPPED } : { code: 1, stderr: "Unable to modify interface: Protocol not supported" }));
  const failing = createToolchains({ platform: "linux", run: sync.run })("wireguard");
  await assert.rejects(failing.syncPeers?.("svc0") ?? Promise.resolve(), /wg syncconf svc0 .*\(exit 1\): Unable to modify interface/);
  assert.equal(existsSync(dirname(sync.seen[1]?.file?.path ?? "/")), false);
});

test("syncPeers: refused names never reach a tool; Windows has no strip, so no syncPeers (pushes there restart)", async () => {
  const r = runner(() => ({}));
  const chain = createToolchains({ platform: "linux", run: r.run })("wireguard");
  await assert.rejects(chain.syncPeers?.("-rf") ?? Promise.resolve(), /invalid interface name/);
  assert.equal(r.seen.length, 0);
  assert.equal(createToolchains({ platform: "win32", run: r.run })("wireguard").syncPeers, undefined);
});
