// The harness's own test: the network-namespace lab (test/helpers/netns.ts) and the
// wg-quick + wireguard-go driver (test/helpers/wireguard.ts), proven without the service by a
// mesh built from keys of the real `wg genkey` / `wg pubkey`.
import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { access } from "node:fs/promises";
import { test } from "node:test";
import { createLab, processAlive, run } from "../helpers/netns.js";
import { requireSystem } from "../helpers/system.js";
import {
  WIREGUARD_BINARIES,
  createWgQuick,
  generateWgKeyPair,
  latestHandshakes,
  pingUntilReply,
  socketPath,
  writeWgQuickConfig,
} from "../helpers/wireguard.js";

async function namespaceNames(): Promise<string[]> {
  const { stdout } = await run("ip", ["netns", "list"]);
  return stdout
    .split("\n")
    .map((line) => line.split(" ")[0] ?? "")
    .filter((name) => name !== "");
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

test("lab: three namespaces on a private bridge form a wg-quick + wireguard-go mesh and ping every pair", { timeout: 60_000 }, async (t) => {
  if (!requireSystem(t, { root: true, binaries: WIREGUARD_BINARIES })) return;
  const lab = await createLab(3);
  const wgQuick = await createWgQuick(lab);
  t.after(async () => {
    try {
      await wgQuick.downAll();
    } finally {
      await lab.destroy();
    }
  });

  // The underlay: every node reaches every other over the bridge in the hub namespace.
  for (const from of lab.nodes) {
    for (const to of lab.nodes) {
      if (from !== to) await lab.exec(from.ns, "ping", ["-n", "-c", "1", "-W", "2", to.underlayAddress]);
    }
  }

  const tunnelSubnet = randomInt(1, 251);
  const members = await Promise.all(
    lab.nodes.map(async (node) => ({
      node,
      interfaceName: `svcl-${lab.suffix}-${String.fromCharCode(97 + node.index)}`,
      address: `10.214.${tunnelSubnet}.${node.index + 1}`,
      keys: await generateWgKeyPair(),
    })),
  );
  for (const member of members) {
    const peers = members
      .filter((other) => other !== member)
      .map((other) =>
        [
          "[Peer]",
          `PublicKey = ${other.keys.publicKey}`,
          `AllowedIPs = ${other.address}/32`,
          `Endpoint = ${other.node.underlayAddress}:51820`,
        ].join("\n"),
      );
    const text = [
      "[Interface]",
      `PrivateKey = ${member.keys.privateKey}`,
      `Address = ${member.address}/24`,
      "ListenPort = 51820",
      "",
      peers.join("\n\n"),
      "",
    ].join("\n");
    const confPath = await writeWgQuickConfig(lab.dir, member.interfaceName, text);
    await wgQuick.up(member.node.ns, confPath, member.interfaceName);
  }

  for (const from of members) {
    for (const to of members) {
      if (from !== to) await pingUntilReply(lab, from.node.ns, to.address);
    }
  }
  for (const member of members) {
    const handshakes = await latestHandshakes(lab, member.node.ns, member.interfaceName);
    for (const other of members.filter((candidate) => candidate !== member)) {
      assert.ok((handshakes.get(other.keys.publicKey) ?? 0) > 0, `${member.interfaceName} has a handshake with ${other.interfaceName}`);
    }
  }
});

test("lab: destroy() ends a wireguard-go left running, deletes every namespace and is idempotent", { timeout: 60_000 }, async (t) => {
  if (!requireSystem(t, { root: true, binaries: WIREGUARD_BINARIES })) return;
  const lab = await createLab(2);
  t.after(() => lab.destroy());
  const wgQuick = await createWgQuick(lab);
  const node = lab.nodes[0];
  assert.ok(node !== undefined);
  const interfaceName = `svcl-${lab.suffix}-x`;
  const keys = await generateWgKeyPair();
  const confPath = await writeWgQuickConfig(
    lab.dir,
    interfaceName,
    `[Interface]\nPrivateKey = ${keys.privateKey}\nAddress = 10.214.1.1/24\nListenPort = 51820\n`,
  );
  await wgQuick.up(node.ns, confPath, interfaceName);
  const { stdout: pids } = await run("ip", ["netns", "pids", node.ns]);
  assert.notEqual(pids.trim(), "", "wireguard-go runs inside the node namespace");

  // As if the test had failed before `wg-quick down`: the lab alone must clean up.
  await lab.destroy();
  await lab.destroy();

  const left = await namespaceNames();
  for (const ns of [lab.hubNs, ...lab.nodes.map((labNode) => labNode.ns)]) {
    assert.ok(!left.includes(ns), `${ns} is deleted`);
  }
  for (const pid of pids.trim().split(/\s+/).map(Number)) {
    assert.equal(processAlive(pid), false, `wireguard-go (pid ${pid}) has exited`);
  }
  assert.equal(await exists(socketPath(interfaceName)), false, "the control socket is gone");
  assert.equal(await exists(lab.dir), false, "the lab directory is removed");
});
