import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { isAppError } from "../../src/errors.js";
import { awgParamsSchema, type AwgParams } from "../../src/domain/awg.js";
import {
  checkPairIntegrity,
  isDirectPair,
  HubGraph,
  NO_INITIATOR_REASON,
  renderNodeConfig,
  stageConfig,
  type RenderInput,
  type RenderPeer,
} from "../../src/domain/render.js";
import { requireBinary } from "./system.js";

// Fixed inputs. Keys were printed by `wg genkey` / `wg pubkey`.
const KEYS = {
  hub: { priv: "iHMbCDUljfHvzGhLX0IVnjZvujGjZJXTR4IW9D5TgkQ=", pub: "9CF0quNCcJu/WjjS/5oH730cYyptH9Le7N5gh+QNzjs=" },
  laptop: { priv: "aHmWX4ygt0GkEShVFPhxxMPhk0kzCqM4p1Tc370+cHc=", pub: "BCVY0tOit9BnjKXNKD21F8fnJrWXAiowK6VbqNQdHzk=" },
  nas: { priv: "CN4FqMBv5QDm2IUdbMrT5Sby/AvEecRl6XDdcshgKn8=", pub: "LP2wTqP5NPKbIfUC8P42vg6k+K3x+0QwG5/ap5aFzTQ=" },
  phone: { priv: "QAuzWF3eEbpB4lpenPKFd28Ivrp0E1oc7slLmb7HZ2c=", pub: "cp6nNeaJx9pd6F/35uwcXaaf3T8DVh/pv9l4vD3MD3Y=" },
} as const;

const AWG: AwgParams = {
  jc: 6,
  jmin: 48,
  jmax: 912,
  s1: 73,
  s2: 118,
  s3: 41,
  s4: 15,
  h1: "1183522840-1279914772",
  h2: "326400577-470918512",
  h3: "1917343022-2012448310",
  h4: "5836231-141022856",
};

const NETWORK = "10.44.0.0/24";

// The mesh: the hub has a public IPv4 endpoint, the nas a public IPv6 one, the phone a DNS name,
// the laptop sits behind NAT with nothing.
const PEER = {
  hub: { node_id: "hub-1", public_key: KEYS.hub.pub, address: "10.44.0.1", public_address: "203.0.113.10", listen_port: 51820 },
  laptop: { node_id: "laptop", public_key: KEYS.laptop.pub, address: "10.44.0.2", public_address: null, listen_port: null },
  nas: { node_id: "nas", public_key: KEYS.nas.pub, address: "10.44.0.3", public_address: "2001:db8::7", listen_port: 51821 },
  phone: { node_id: "phone_2", public_key: KEYS.phone.pub, address: "10.44.0.4", public_address: "vpn.example.net", listen_port: 51822 },
} satisfies Record<string, RenderPeer>;

const hubNode = {
  node_id: "hub-1",
  private_key: KEYS.hub.priv,
  address: "10.44.0.1",
  listen_port: 51820,
  public_address: "203.0.113.10",
};

const FORWARDS = [
  { protocol: "udp", listen_port: 5353, target_address: "10.44.0.4", target_port: 53 },
  { protocol: "tcp", listen_port: 8080, target_address: "10.44.0.3", target_port: 80 },
  { protocol: "tcp", listen_port: 2222, target_address: "10.44.0.2", target_port: 22 },
] as const;

/** Golden cases: name -> input. Peers and forwards are given unsorted on purpose. */
const CASES: Record<string, RenderInput> = {
  // Hub with a public endpoint: no keepalive; Endpoint only for peers that have one; port forwards.
  "wireguard-hub": {
    config_id: "cfg-home",
    tunnel_protocol: "wireguard",
    network_cidr: NETWORK,
    awg: null,
    node: hubNode,
    peers: [PEER.phone, PEER.laptop, PEER.nas],
    port_forwards: FORWARDS,
  },
  // Laptop behind NAT: no ListenPort, keepalive toward every peer, no forwards.
  "wireguard-laptop": {
    config_id: "cfg-home",
    tunnel_protocol: "wireguard",
    network_cidr: NETWORK,
    awg: null,
    node: { node_id: "laptop", private_key: KEYS.laptop.priv, address: "10.44.0.2", listen_port: null, public_address: null },
    peers: [PEER.phone, PEER.hub],
    port_forwards: [],
  },
  // A node with no peers yet (awg params given for a wireguard config are ignored).
  "wireguard-alone": {
    config_id: "cfg-lab",
    tunnel_protocol: "wireguard",
    network_cidr: "172.20.0.9/16",
    awg: AWG,
    node: { node_id: "n0", private_key: KEYS.nas.priv, address: "172.20.3.1", listen_port: 40000, public_address: null },
    peers: [],
    port_forwards: [],
  },
  // awg_2 hub: the WireGuard sections plus Jc..H4.
  "awg2-hub": {
    config_id: "cfg-home",
    tunnel_protocol: "awg_2",
    network_cidr: NETWORK,
    awg: AWG,
    node: hubNode,
    peers: [PEER.phone, PEER.laptop, PEER.nas],
    port_forwards: FORWARDS,
  },
  // A hub (README "Hubs: meshes behind NAT"): forwarding on first, its rule removed last, around
  // the port forwards; peers commented by name.
  "wireguard-hub-forwarding": {
    config_id: "cfg-home",
    tunnel_protocol: "wireguard",
    network_cidr: NETWORK,
    awg: null,
    node: { ...hubNode, hub: true },
    peers: [
      { ...PEER.laptop, name: "Laptop (Ana)" },
      { ...PEER.phone, name: "phone" },
      { ...PEER.nas, name: "nas #2" },
    ],
    port_forwards: [FORWARDS[2]],
  },
  // A node behind NAT whose pairs with other nodes behind NAT go through the hub: their addresses
  // follow the hub's own in its AllowedIPs, in address order; a direct peer keeps its own.
  "wireguard-via-hub": {
    config_id: "cfg-home",
    tunnel_protocol: "wireguard",
    network_cidr: NETWORK,
    awg: null,
    node: { node_id: "laptop", private_key: KEYS.laptop.priv, address: "10.44.0.2", listen_port: null, public_address: null },
    peers: [
      { ...PEER.phone, name: "phone" },
      { ...PEER.hub, name: "hub", routed_addresses: ["10.44.0.12", "10.44.0.5", "10.44.0.6"] },
    ],
    port_forwards: [],
  },
  // awg_2 node that listens but has no public address: ListenPort and keepalive both present.
  "awg2-laptop": {
    config_id: "cfg-home",
    tunnel_protocol: "awg_2",
    network_cidr: NETWORK,
    awg: AWG,
    node: { node_id: "laptop", private_key: KEYS.laptop.priv, address: "10.44.0.2", listen_port: 51830, public_address: null },
    peers: [PEER.nas, PEER.hub],
    port_forwards: [{ protocol: "tcp", listen_port: 443, target_address: "10.44.0.1", target_port: 8443 }],
  },
};

const GOLDEN_DIR = fileURLToPath(new URL("./golden/", import.meta.url));
const AWG_LINE = /^(Jc|Jmin|Jmax|S1|S2|S3|S4|H1|H2|H3|H4) = (.*)$/;
const AWG_LINE_ANYWHERE = /^(Jc|Jmin|Jmax|S1|S2|S3|S4|H1|H2|H3|H4) = /m;

function goldenPath(name: string): string {
  return join(GOLDEN_DIR, `${name}.conf`);
}

for (const [name, input] of Object.entries(CASES)) {
  test(`golden ${name}.conf (spec §6.3 tunnel_protocol ${input.tunnel_protocol})`, () => {
    const text = renderNodeConfig(input);
    if (process.env["UPDATE_GOLDEN"] === "1") {
      writeFileSync(goldenPath(name), text);
      return;
    }
    assert.equal(text, readFileSync(goldenPath(name), "utf8"));
  });
}

test("every WireGuard golden passes `wg-quick strip`", (t) => {
  if (!requireBinary(t, "wg-quick")) return;
  for (const name of Object.keys(CASES).filter((n) => CASES[n]?.tunnel_protocol === "wireguard")) {
    const text = readFileSync(goldenPath(name), "utf8");
    assert.doesNotMatch(text, AWG_LINE_ANYWHERE, `${name} has no AmneziaWG lines`);
    checkWgQuickStrip(name, text, CASES[name]?.peers.length ?? 0);
  }
});

test("every awg_2 golden passes `wg-quick strip` without Jc..H4, and its Jc..H4 parse back into valid params", (t) => {
  if (!requireBinary(t, "wg-quick")) return;
  for (const name of Object.keys(CASES).filter((n) => CASES[n]?.tunnel_protocol === "awg_2")) {
    const text = readFileSync(goldenPath(name), "utf8");
    const lines = text.split("\n");
    const awgLines = lines.filter((line) => AWG_LINE.test(line));
    assert.equal(awgLines.length, 11, `${name}: Jc, Jmin, Jmax, S1-S4, H1-H4`);
    checkWgQuickStrip(name, lines.filter((line) => !AWG_LINE.test(line)).join("\n"), CASES[name]?.peers.length ?? 0);

    const parsed = awgParamsSchema.safeParse(parseAwgLines(awgLines));
    assert.ok(parsed.success, `${name}: ${parsed.success ? "" : parsed.error.message}`);
    assert.deepEqual(parsed.data, CASES[name]?.awg);
  }
});

/** Writes the text as `<iface>.conf` (mode 0600) and checks `wg-quick strip` accepts it. */
function checkWgQuickStrip(name: string, text: string, peerCount: number): void {
  const dir = mkdtempSync(join(tmpdir(), "svc-render-"));
  try {
    const file = join(dir, "svctest0.conf");
    writeFileSync(file, text, { mode: 0o600 });
    chmodSync(file, 0o600);
    const stripped = execFileSync("wg-quick", ["strip", file], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    // strip keeps what `wg setconf` reads and drops the wg-quick-only keys.
    assert.match(stripped, /^\[Interface\]$/m, name);
    assert.match(stripped, /^PrivateKey = /m, name);
    assert.doesNotMatch(stripped, /^(Address|PostUp|PostDown) /m, name);
    assert.equal(stripped.match(/^PublicKey = /gm)?.length ?? 0, peerCount, `${name}: one PublicKey per peer`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Reads `Key = value` AmneziaWG lines back into an AwgParams-shaped object. */
function parseAwgLines(lines: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const line of lines) {
    const match = AWG_LINE.exec(line);
    if (match === null || match[1] === undefined || match[2] === undefined) continue;
    const key = match[1].toLowerCase();
    out[key] = key.startsWith("h") ? match[2] : Number(match[2]);
  }
  return out;
}

test("rendering is deterministic: peer and forward order do not matter; LF only, trailing newline", () => {
  const base = CASES["wireguard-hub"];
  assert.ok(base);
  const a = renderNodeConfig(base);
  const b = renderNodeConfig({ ...base, peers: [...base.peers].reverse(), port_forwards: [...base.port_forwards].reverse() });
  assert.equal(a, b);
  assert.ok(a.endsWith("\n") && !a.endsWith("\n\n"));
  assert.ok(!a.includes("\r"));
  assert.ok(a.startsWith("# Managed by svc: config cfg-home, node hub-1. Changes here are overwritten.\n[Interface]\n"));
});

test("Endpoint brackets IPv6 literals and is rendered only when the peer has address and port", () => {
  const base = CASES["wireguard-laptop"];
  assert.ok(base);
  const text = renderNodeConfig({
    ...base,
    peers: [PEER.nas, { ...PEER.hub, listen_port: null }, { ...PEER.phone, public_address: null }],
  });
  assert.match(text, /^Endpoint = \[2001:db8::7\]:51821$/m);
  assert.equal(text.match(/^Endpoint = /gm)?.length, 1);
});

test("PersistentKeepalive only when this node has no public endpoint", () => {
  const laptop = CASES["wireguard-laptop"];
  assert.ok(laptop);
  const behindNat = renderNodeConfig(laptop);
  assert.equal(behindNat.match(/^PersistentKeepalive = 25$/gm)?.length, 2);
  const reachable = renderNodeConfig({
    ...laptop,
    node: { ...laptop.node, public_address: "198.51.100.4", listen_port: 51830 },
  });
  assert.doesNotMatch(reachable, /PersistentKeepalive/);
  const portOnly = renderNodeConfig({ ...laptop, node: { ...laptop.node, listen_port: 51830 } });
  assert.equal(portOnly.match(/^PersistentKeepalive = 25$/gm)?.length, 2, "a listen port alone is no public endpoint");
});

test("spec §6.3 awg_2 without obfuscation parameters throws VALIDATION_FAILED", () => {
  const base = CASES["awg2-hub"];
  assert.ok(base);
  assert.throws(() => renderNodeConfig({ ...base, awg: null }), (err) => isAppError(err, "VALIDATION_FAILED"));
  assert.throws(
    () => renderNodeConfig({ ...base, awg: { ...AWG, s2: AWG.s1 + 56 } }),
    (err) => isAppError(err, "VALIDATION_FAILED"),
  );
});

test("renderNodeConfig refuses input that could inject lines or break the config", () => {
  const base = CASES["wireguard-hub"];
  assert.ok(base);
  const bad: Array<[string, RenderInput]> = [
    ["config_id with newline", { ...base, config_id: "cfg\nPostUp = id" }],
    ["config_id uppercase", { ...base, config_id: "Cfg" }],
    ["node_id with space", { ...base, node: { ...base.node, node_id: "hub 1" } }],
    ["peer node_id with newline", { ...base, peers: [{ ...PEER.nas, node_id: "nas\n[Peer]" }] }],
    ["public_address injection", { ...base, peers: [{ ...PEER.nas, public_address: "1.2.3.4\nPostUp = rm -rf /" }] }],
    ["public_address with zone id", { ...base, peers: [{ ...PEER.nas, public_address: "fe80::1%eth0" }] }],
    ["public_address all-numeric name", { ...base, peers: [{ ...PEER.nas, public_address: "10.0.0" }] }],
    ["own public_address garbage", { ...base, node: { ...base.node, public_address: "bad host" } }],
    ["bad private key", { ...base, node: { ...base.node, private_key: "x".repeat(44) } }],
    ["bad peer key", { ...base, peers: [{ ...PEER.nas, public_key: "nope" }] }],
    ["peer is the node itself (key)", { ...base, node: { ...base.node, public_key: KEYS.hub.pub }, peers: [{ ...PEER.nas, public_key: KEYS.hub.pub }] }],
    ["peer is the node itself (id)", { ...base, peers: [{ ...PEER.nas, node_id: "hub-1" }] }],
    ["duplicate peer", { ...base, peers: [PEER.nas, PEER.nas] }],
    ["duplicate peer address", { ...base, peers: [PEER.nas, { ...PEER.phone, address: PEER.nas.address }] }],
    ["node address outside network", { ...base, node: { ...base.node, address: "10.45.0.1" } }],
    ["node address is the network address", { ...base, node: { ...base.node, address: "10.44.0.0" } }],
    ["peer address is broadcast", { ...base, peers: [{ ...PEER.nas, address: "10.44.0.255" }] }],
    ["listen port 0", { ...base, node: { ...base.node, listen_port: 0 } }],
    ["listen port 65536", { ...base, peers: [{ ...PEER.nas, listen_port: 65536 }] }],
    ["bad network", { ...base, network_cidr: "10.44.0.0/31" }],
    ["forward target not IPv4", { ...base, port_forwards: [{ protocol: "tcp", listen_port: 1, target_address: "10.44.0.3; reboot", target_port: 1 }] }],
    ["forward port fraction", { ...base, port_forwards: [{ protocol: "tcp", listen_port: 80.5, target_address: "10.44.0.3", target_port: 1 }] }],
    ["duplicate forward", { ...base, port_forwards: [FORWARDS[1], { ...FORWARDS[1], target_port: 81 }] }],
    ["udp forward on the tunnel port", { ...base, port_forwards: [{ protocol: "udp", listen_port: 51820, target_address: "10.44.0.3", target_port: 9 }] }],
    ["peer name with a line break", { ...base, peers: [{ ...PEER.nas, name: "nas\nPostUp = id" }] }],
    ["peer name with a C1 control", { ...base, peers: [{ ...PEER.nas, name: "nas\u0085x" }] }],
    ["peer name empty", { ...base, peers: [{ ...PEER.nas, name: "" }] }],
    ["routed address outside the network", { ...base, peers: [{ ...PEER.nas, routed_addresses: ["10.45.0.9"] }] }],
    ["routed address with injection", { ...base, peers: [{ ...PEER.nas, routed_addresses: ["10.44.0.9/32\nPostUp = id"] }] }],
    ["routed address is a peer's", { ...base, peers: [PEER.laptop, { ...PEER.nas, routed_addresses: [PEER.laptop.address] }] }],
    ["routed address is the node's own", { ...base, peers: [{ ...PEER.nas, routed_addresses: [hubNode.address] }] }],
    ["routed address twice", { ...base, peers: [{ ...PEER.nas, routed_addresses: ["10.44.0.9"] }, { ...PEER.phone, routed_addresses: ["10.44.0.9"] }] }],
  ];
  for (const [why, input] of bad) {
    assert.throws(() => renderNodeConfig(input), (err) => isAppError(err, "VALIDATION_FAILED"), why);
  }
});

test("a TCP forward may share the tunnel's UDP port number", () => {
  const base = CASES["wireguard-hub"];
  assert.ok(base);
  const text = renderNodeConfig({
    ...base,
    port_forwards: [{ protocol: "tcp", listen_port: 51820, target_address: "10.44.0.3", target_port: 9 }],
  });
  assert.match(text, /^PostUp = iptables -t nat -A PREROUTING -p tcp --dport 51820 -j DNAT --to-destination 10\.44\.0\.3:9$/m);
  assert.match(text, /^PostDown = iptables -t nat -D POSTROUTING -p tcp -d 10\.44\.0\.3 --dport 9 -j MASQUERADE$/m);
});

// DESIGN §3 Config versions: the version increments only when the rendered text changes.
test("DESIGN §3 Config versions: first staging is version 1 with the hex SHA-256 of the UTF-8 text", () => {
  // Expected digests from `printf ... | sha256sum`.
  assert.deepEqual(stageConfig(null, "[Interface]\n"), {
    config_version: 1,
    config_sha256: "ea31c77478f33d507751d9b134c1a8a44000f23b9f1b17f4a6bde60794535acb",
    config_text: "[Interface]\n",
  });
  assert.equal(stageConfig(null, "abc").config_sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // UTF-8, not UTF-16 or latin1: "é" hashes as the two bytes c3 a9.
  assert.equal(stageConfig(null, "\u00e9").config_sha256, "4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c");
});

test("DESIGN §3 Config versions: unchanged text keeps the version, changed text bumps it", () => {
  const input = CASES["wireguard-hub"];
  assert.ok(input);
  const v1 = stageConfig(null, renderNodeConfig(input));
  const same = stageConfig(v1, renderNodeConfig({ ...input, peers: [...input.peers].reverse() }));
  assert.equal(same.config_version, 1);
  assert.equal(same.config_sha256, v1.config_sha256);
  const v2 = stageConfig(same, renderNodeConfig({ ...input, peers: input.peers.slice(1) }));
  assert.equal(v2.config_version, 2);
  assert.notEqual(v2.config_sha256, v1.config_sha256);
  const v3 = stageConfig(v2, renderNodeConfig(input)); // back to the first text: still a new version
  assert.equal(v3.config_version, 3);
  assert.equal(v3.config_sha256, v1.config_sha256);
  assert.equal(stageConfig({ config_version: 41, config_sha256: v1.config_sha256 }, v1.config_text).config_version, 41);
});

test("stageConfig rejects a previous version that is not a positive integer", () => {
  for (const config_version of [0, -1, 1.5, Number.NaN]) {
    assert.throws(
      () => stageConfig({ config_version, config_sha256: "00" }, "x"),
      (err) => isAppError(err, "VALIDATION_FAILED"),
      String(config_version),
    );
  }
});

// spec §6.5 workspace.connections[*]: connection-integrity results behind broken-link indicators.
const PUBLIC = { public_address: "203.0.113.10", listen_port: 51820 };
const HIDDEN = { public_address: null, listen_port: null };

test("checkPairIntegrity: both sides public -> ok, both can initiate", () => {
  assert.deepEqual(checkPairIntegrity({ node_id: "a", ...PUBLIC }, { node_id: "b", ...PUBLIC }, true), {
    status: "ok",
    reason: null,
    initiators: ["a", "b"],
    route: "direct",
    hub_node_id: null,
  });
});

test("checkPairIntegrity: only b public -> ok, only a can initiate", () => {
  assert.deepEqual(checkPairIntegrity({ node_id: "a", ...HIDDEN }, { node_id: "b", ...PUBLIC }, true), {
    status: "ok",
    reason: null,
    initiators: ["a"],
    route: "direct",
    hub_node_id: null,
  });
});

test("checkPairIntegrity: only a public -> ok, only b can initiate", () => {
  assert.deepEqual(checkPairIntegrity({ node_id: "a", ...PUBLIC }, { node_id: "b", ...HIDDEN }, true), {
    status: "ok",
    reason: null,
    initiators: ["b"],
    route: "direct",
    hub_node_id: null,
  });
});

test("checkPairIntegrity: neither public -> broken with a human reason", () => {
  const result = checkPairIntegrity({ node_id: "a", ...HIDDEN }, { node_id: "b", ...HIDDEN }, true);
  assert.deepEqual(result, { status: "broken", reason: NO_INITIATOR_REASON, initiators: [], route: null, hub_node_id: null });
  assert.equal(
    result.reason,
    "neither node has a public address and listen port, so no side can initiate a handshake, and no hub is paired with both",
  );
});

test("checkPairIntegrity: neither public but a hub paired with both -> ok, routed via that hub, no initiators", () => {
  assert.deepEqual(checkPairIntegrity({ node_id: "a", ...HIDDEN }, { node_id: "b", ...HIDDEN }, true, "hub-1"), {
    status: "ok",
    reason: null,
    initiators: [],
    route: "via_hub",
    hub_node_id: "hub-1",
  });
  assert.equal(checkPairIntegrity({ node_id: "a", ...HIDDEN }, { node_id: "b", ...HIDDEN }, false, "hub-1").status, "disabled");
  assert.equal(checkPairIntegrity({ node_id: "a", ...PUBLIC }, { node_id: "b", ...HIDDEN }, true, "hub-1").route, "direct", "a possible handshake wins over a hub");
});

test("HubGraph.hubFor: the first hub (by node_id) with an enabled pair with both sides, never one of the two", () => {
  const hubs = new HubGraph([
    ["hub-b", ["x", "y", "z"]],
    ["hub-a", ["x", "z"]],
  ]);
  assert.equal(hubs.hubFor("x", "z"), "hub-a");
  assert.equal(hubs.hubFor("x", "y"), "hub-b");
  assert.equal(hubs.hubFor("y", "w"), null);
  assert.equal(new HubGraph([["x", ["y"]]]).hubFor("x", "y"), null);
  assert.equal(HubGraph.EMPTY.hubFor("x", "y"), null);
});

test("checkPairIntegrity: an address without a port (or a port without an address) is no endpoint", () => {
  const result = checkPairIntegrity(
    { node_id: "a", public_address: "203.0.113.10", listen_port: null },
    { node_id: "b", public_address: null, listen_port: 51820 },
    true,
  );
  assert.equal(result.status, "broken");
});

test("checkPairIntegrity: a disabled pair is disabled whatever the endpoints", () => {
  for (const [a, b] of [
    [PUBLIC, PUBLIC],
    [HIDDEN, HIDDEN],
  ] as const) {
    assert.deepEqual(checkPairIntegrity({ node_id: "a", ...a }, { node_id: "b", ...b }, false), {
      status: "disabled",
      reason: "pair disabled",
      initiators: [],
      route: null,
      hub_node_id: null,
    });
  }
});

test("isDirectPair is exactly checkPairIntegrity's direct route, for every pair of sides and either state", () => {
  const endpoint = fc.record({ public_address: fc.constantFrom(null, "", "198.51.100.7", "vpn.example.org"), listen_port: fc.constantFrom(null, 51820) });
  fc.assert(
    fc.property(endpoint, endpoint, fc.boolean(), (ea, eb, enabled) => {
      const a = { node_id: "node-a", ...ea };
      const b = { node_id: "node-b", ...eb };
      assert.equal(isDirectPair(a, b, enabled), checkPairIntegrity(a, b, enabled).route === "direct");
    }),
    { numRuns: 200 },
  );
});
