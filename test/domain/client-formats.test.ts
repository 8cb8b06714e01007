/**
 * The Amnezia apps' formats of a node's config (src/domain/client-formats.ts), checked against
 * what the apps' sources accept: the AmneziaWG apps' wg-quick key whitelist (amneziawg-android
 * `config/Interface.java`, `config/Peer.java`; amneziawg-apple
 * `TunnelConfiguration+WgQuickConfig.swift`), and the AmneziaVPN app's `vpn://` link and QR
 * chunks, read back by decoders written here from amnezia-client's layout (exportController.cpp,
 * importController.cpp), not by the module's own code.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { inflateSync } from "node:zlib";
import fc from "fast-check";
import type { AwgParams } from "../../src/domain/awg.js";
import {
  amneziaVpnPayload,
  amneziaVpnQrChunks,
  ClientFormatRefusal,
  toAmneziaVpnLink,
  toAmneziaWgText,
} from "../../src/domain/client-formats.js";
import { generateKeyPair } from "../../src/domain/keys.js";
import { amneziaVpnQrChunksOfLink } from "../../src/protocol/amneziavpn-qr.js";
import { renderNodeConfig, type RenderInput, type RenderPeer } from "../../src/domain/render.js";
import { reassembleAmneziaVpnChunks } from "../helpers/amneziavpn-decoder.js";

/** The keys the AmneziaWG apps' parsers accept, per section (WireGuard's plus Jc…I5). */
const APP_WHITELIST = {
  Interface: new Set(["PrivateKey", "Address", "ListenPort", "DNS", "MTU", "Jc", "Jmin", "Jmax", "S1", "S2", "S3", "S4", "H1", "H2", "H3", "H4", "I1", "I2", "I3", "I4", "I5"]),
  Peer: new Set(["PublicKey", "PresharedKey", "AllowedIPs", "Endpoint", "PersistentKeepalive"]),
};

const AWG_RANGES: AwgParams = { jc: 6, jmin: 48, jmax: 912, s1: 73, s2: 118, s3: 41, s4: 15, h1: "1183522840-1279914772", h2: "326400577-470918512", h3: "1917343022-2012448310", h4: "5836231-141022856" };
const AWG_SINGLE: AwgParams = { jc: 3, jmin: 10, jmax: 50, s1: 20, s2: 30, s3: 12, s4: 9, h1: "100", h2: "200", h3: "300", h4: "400" };

const KEYS = Array.from({ length: 10 }, () => generateKeyPair());

/**
 * Sections of a wg-quick text as the Amnezia importer reads it: `[X]` headers, every other
 * non-comment line split on the literal `" = "` (importController.cpp `extractWireGuardConfig`).
 */
function sectionsOf(text: string): Array<{ name: string; entries: Array<[string, string]> }> {
  const out: Array<{ name: string; entries: Array<[string, string]> }> = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header?.[1] !== undefined) {
      out.push({ name: header[1], entries: [] });
      continue;
    }
    const parts = line.split(" = ");
    assert.equal(parts.length, 2, `a line the importer cannot split: ${line}`);
    out.at(-1)?.entries.push([parts[0] ?? "", parts[1] ?? ""]);
  }
  return out;
}

const publicAddress = fc.oneof(
  fc.constant(null),
  fc.constantFrom("203.0.113.10", "198.51.100.7", "2001:db8::7", "vpn.example.net"),
);

/** A random non-hub node without port forwards, with 0..8 peers, of either protocol. */
const renderInput: fc.Arbitrary<RenderInput> = fc
  .record({
    awg: fc.constantFrom(null, AWG_RANGES, AWG_SINGLE),
    peerCount: fc.integer({ min: 0, max: 8 }),
    own: publicAddress,
    peerAddresses: fc.array(publicAddress, { minLength: 8, maxLength: 8 }),
    withListenPort: fc.boolean(),
  })
  .map(({ awg, peerCount, own, peerAddresses, withListenPort }) => {
    const peers: RenderPeer[] = Array.from({ length: peerCount }, (_, i) => {
      const address = peerAddresses[i] ?? null;
      return { node_id: `peer-${i}`, public_key: KEYS[i + 1]?.publicKey ?? "", address: `10.9.0.${i + 2}`, public_address: address, listen_port: address === null ? null : 51820 + i };
    });
    return {
      config_id: "c1",
      tunnel_protocol: awg === null ? "wireguard" : "awg_2",
      network_cidr: "10.9.0.0/24",
      awg,
      node: { node_id: "phone", private_key: KEYS[0]?.privateKey ?? "", address: "10.9.0.1", listen_port: withListenPort || own !== null ? 51900 : null, public_address: own },
      peers,
      port_forwards: [],
    } satisfies RenderInput;
  });

test("the amneziawg text has only the AmneziaWG apps' keys, no empty value, and the wireguard text's keys and values", () => {
  fc.assert(
    fc.property(renderInput, (input) => {
      const wireguard = renderNodeConfig(input);
      const text = toAmneziaWgText(wireguard);
      assert.ok(text.endsWith("\n") && !text.includes("\r"));
      for (const line of text.split("\n")) {
        assert.ok(!line.startsWith("#"), "no comments");
        if (line === "" || /^\[(Interface|Peer)\]$/.test(line)) continue;
        assert.match(line, /^[A-Za-z0-9]+ = \S.*$/, "canonical Key = Value with a value");
      }
      const app = sectionsOf(text);
      const wg = sectionsOf(wireguard);
      assert.deepEqual(app.map((s) => s.name), wg.map((s) => s.name));
      app.forEach((section, i) => {
        const allowed = section.name === "Peer" ? APP_WHITELIST.Peer : APP_WHITELIST.Interface;
        for (const [key] of section.entries) assert.ok(allowed.has(key), `${key} in [${section.name}]`);
        const shared = (wg[i]?.entries ?? []).filter(([key]) => allowed.has(key));
        assert.deepEqual(new Map(section.entries), new Map(shared));
        assert.equal(section.entries.length, shared.length);
      });
      // awg_2 configs keep every obfuscation parameter, wireguard ones have none.
      const iface = new Map(app[0]?.entries);
      for (const key of ["Jc", "Jmin", "Jmax", "S1", "S2", "S3", "S4", "H1", "H2", "H3", "H4"]) assert.equal(iface.has(key), input.awg !== null, key);
    }),
    { numRuns: 200 },
  );
});

test("a hub's or a port forward's config is refused in the Amnezia formats instead of silently losing its PostUp lines", () => {
  const base = { config_id: "c1", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24", awg: null, peers: [] } as const;
  const node = { node_id: "hub", private_key: KEYS[0]?.privateKey ?? "", address: "10.9.0.1", listen_port: 51820, public_address: "203.0.113.1" };
  const hub = renderNodeConfig({ ...base, node: { ...node, hub: true }, port_forwards: [] });
  const forward = renderNodeConfig({ ...base, node, port_forwards: [{ protocol: "tcp", listen_port: 8080, target_address: "10.9.0.1", target_port: 80 }] });
  for (const text of [hub, forward]) {
    assert.match(text, /^PostUp = /m);
    assert.throws(() => toAmneziaWgText(text), (err) => err instanceof ClientFormatRefusal && err.reason === "host_only_commands" && err.format === "amneziawg");
    assert.throws(() => toAmneziaVpnLink(text, { description: "x" }), (err) => err instanceof ClientFormatRefusal && err.reason === "host_only_commands");
  }
});

/** The AmneziaVPN import document of a `vpn://` link, decoded from the documented layout. */
function decodeVpnLink(link: string): { json: Record<string, unknown>; compressed: Buffer } {
  assert.ok(link.startsWith("vpn://"));
  const body = link.slice("vpn://".length);
  assert.match(body, /^[A-Za-z0-9_-]+$/, "base64url without padding");
  const compressed = Buffer.from(body, "base64url");
  const length = compressed.readUInt32BE(0);
  const json = inflateSync(compressed.subarray(4));
  assert.equal(json.length, length, "qCompress's 4-byte big-endian length is the uncompressed size");
  return { json: JSON.parse(json.toString("utf8")) as Record<string, unknown>, compressed };
}

/** A phone with one server (the hub), in `protocol`. */
function phoneConfig(awg: AwgParams | null, hubAddress: string): string {
  return renderNodeConfig({
    config_id: "c1",
    tunnel_protocol: awg === null ? "wireguard" : "awg_2",
    network_cidr: "10.9.0.0/24",
    awg,
    node: { node_id: "phone", private_key: KEYS[0]?.privateKey ?? "", address: "10.9.0.5", listen_port: null, public_address: null },
    peers: [{ node_id: "hub", public_key: KEYS[1]?.publicKey ?? "", address: "10.9.0.1", public_address: hubAddress, listen_port: 51820, name: "Hub" }],
    port_forwards: [],
  });
}

test("the vpn:// link decodes to the AmneziaVPN import document of an awg_2 node, its config text the amneziawg one", () => {
  for (const [hubAddress, host] of [["203.0.113.10", "203.0.113.10"], ["2001:db8::7", "2001:db8::7"], ["vpn.example.net", "vpn.example.net"]] as const) {
    const wireguard = phoneConfig(AWG_RANGES, hubAddress);
    const { json } = decodeVpnLink(toAmneziaVpnLink(wireguard, { description: "Office – phone" }));
    assert.equal(json.defaultContainer, "amnezia-awg");
    assert.equal(json.description, "Office – phone");
    assert.equal(json.hostName, host);
    const containers = json.containers as Array<Record<string, unknown>>;
    assert.equal(containers.length, 1);
    assert.equal(containers[0]?.container, "amnezia-awg");
    const awg = containers[0]?.awg as Record<string, unknown>;
    assert.equal(awg.transport_proto, "udp");
    assert.equal(awg.protocol_version, "2");
    assert.equal(awg.port, "51820");
    const last = JSON.parse(String(awg.last_config)) as Record<string, unknown>;
    assert.equal(last.config, toAmneziaWgText(wireguard));
    assert.equal(last.hostName, host);
    assert.equal(last.port, 51820);
    assert.equal(last.client_priv_key, KEYS[0]?.privateKey);
    assert.equal(last.client_pub_key, KEYS[0]?.publicKey);
    assert.equal(last.server_pub_key, KEYS[1]?.publicKey);
    assert.equal(last.client_ip, "10.9.0.5/24");
    assert.deepEqual(last.allowed_ips, ["10.9.0.1/32"]);
    assert.equal(last.persistent_keep_alive, "25");
    assert.equal(last.psk_key, undefined, "no empty pre-shared key");
    const expected = { Jc: "6", Jmin: "48", Jmax: "912", S1: "73", S2: "118", S3: "41", S4: "15", H1: AWG_RANGES.h1, H2: AWG_RANGES.h2, H3: AWG_RANGES.h3, H4: AWG_RANGES.h4 };
    for (const [key, value] of Object.entries(expected)) assert.equal(last[key], value, key);
    // The importer's own reading of the text: every line splits on " = " into two parts.
    const text = sectionsOf(String(last.config));
    assert.equal(new Map(text[1]?.entries).get("Endpoint"), hubAddress.includes(":") ? `[${hubAddress}]:51820` : `${hubAddress}:51820`);
  }
});

test("a wireguard node's vpn:// link names the amnezia-wireguard container and carries no obfuscation keys", () => {
  const { json } = decodeVpnLink(toAmneziaVpnLink(phoneConfig(null, "203.0.113.10"), { description: "d" }));
  assert.equal(json.defaultContainer, "amnezia-wireguard");
  const container = (json.containers as Array<Record<string, unknown>>)[0] ?? {};
  assert.equal(container.container, "amnezia-wireguard");
  const wireguard = container.wireguard as Record<string, unknown>;
  assert.equal(wireguard.protocol_version, undefined);
  const last = JSON.parse(String(wireguard.last_config)) as Record<string, unknown>;
  assert.equal(last.Jc, undefined);
  assert.equal(last.hostName, "203.0.113.10");
});

test("the AmneziaVPN app models one server: a node with no peer, several, or one without an endpoint is refused", () => {
  const base = { config_id: "c1", tunnel_protocol: "awg_2", network_cidr: "10.9.0.0/24", awg: AWG_RANGES, port_forwards: [] } as const;
  const node = { node_id: "phone", private_key: KEYS[0]?.privateKey ?? "", address: "10.9.0.5", listen_port: null, public_address: null };
  const peer = (i: number, address: string | null): RenderPeer => ({ node_id: `p${i}`, public_key: KEYS[i]?.publicKey ?? "", address: `10.9.0.${i + 10}`, public_address: address, listen_port: address === null ? null : 51820 });
  for (const peers of [[], [peer(1, "203.0.113.1"), peer(2, "203.0.113.2")], [peer(1, null)]]) {
    const text = renderNodeConfig({ ...base, node, peers });
    assert.throws(() => toAmneziaVpnLink(text, { description: "d" }), (err) => err instanceof ClientFormatRefusal && err.reason === "needs_one_server");
  }
});

test("the AmneziaVPN QR chunks reassemble, in any order, to the link's compressed bytes", () => {
  const wireguard = phoneConfig(AWG_RANGES, "vpn.example.net");
  const payload = amneziaVpnPayload(wireguard, { description: "d" });
  const { compressed } = decodeVpnLink(toAmneziaVpnLink(wireguard, { description: "d" }));
  assert.deepEqual(payload, compressed);
  assert.deepEqual(reassembleAmneziaVpnChunks(amneziaVpnQrChunks(payload)), payload);
  // The console's way: cut the downloaded link itself (no zlib in a browser).
  const link = toAmneziaVpnLink(wireguard, { description: "d" });
  assert.deepEqual(amneziaVpnQrChunksOfLink(link), amneziaVpnQrChunks(payload));
  assert.throws(() => amneziaVpnQrChunksOfLink("https://example.net"), RangeError);
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 1, maxLength: 5000 }), fc.integer(), (bytes, seed) => {
      const data = Buffer.from(bytes);
      const chunks = amneziaVpnQrChunks(data);
      assert.equal(chunks.length, Math.ceil(data.length / 850));
      const k = Math.abs(seed) % chunks.length;
      const shuffled = [...chunks.slice(k), ...chunks.slice(0, k)].reverse();
      assert.deepEqual(reassembleAmneziaVpnChunks(shuffled), data);
    }),
    { numRuns: 100 },
  );
  assert.throws(() => amneziaVpnQrChunks(Buffer.alloc(255 * 850 + 1)), (err) => err instanceof ClientFormatRefusal && err.reason === "too_large");
  assert.equal(amneziaVpnQrChunks(Buffer.alloc(255 * 850)).length, 255);
});

test("empty values and comments never reach the AmneziaWG apps (an empty PublicKey or PresharedKey is their 'syntax error in peer')", () => {
  const text = ["# a comment", "[Interface]", "PrivateKey = " + (KEYS[0]?.privateKey ?? ""), "Address = 10.9.0.5/24", "DNS =", "", "[Peer]", "# peer", "PublicKey = " + (KEYS[1]?.publicKey ?? ""), "PresharedKey =", "AllowedIPs = 10.9.0.1/32", "Endpoint = 203.0.113.1:51820", ""].join("\n");
  assert.equal(
    toAmneziaWgText(text),
    `[Interface]\nPrivateKey = ${KEYS[0]?.privateKey}\nAddress = 10.9.0.5/24\n\n[Peer]\nPublicKey = ${KEYS[1]?.publicKey}\nAllowedIPs = 10.9.0.1/32\nEndpoint = 203.0.113.1:51820\n`,
  );
  const { json } = decodeVpnLink(toAmneziaVpnLink(text, { description: "d" }));
  assert.equal(json.dns1, undefined);
  const last = JSON.parse(String(((json.containers as Array<Record<string, unknown>>)[0]?.wireguard as Record<string, unknown>).last_config)) as Record<string, unknown>;
  assert.equal(last.psk_key, undefined);
});
