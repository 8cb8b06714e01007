/**
 * The dump parser (src/protocol/wg-dump.ts) over real `wg show IFACE dump` output captured from
 * wireguard-go 0.0.20220316 with wireguard-tools 1.0.20210914 in two network namespaces (one
 * peer with a completed handshake, one that never completed one), and over the AmneziaWG
 * layout of amneziawg-tools `show.c` `dump_print` (a longer interface line, the same peer lines).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";
import fc from "fast-check";
import { parseWgDump, WgDumpParseError } from "../../src/protocol/wg-dump.js";
import { wgPeerReportSchema } from "../../src/protocol/wg-peers.schema.js";

const fixture = (name: string): string => readFileSync(join(import.meta.dirname, "..", "fixtures", "wg-dump", name), "utf8");

test("wireguard-go dump: the interface's public key and port, a handshaken peer and a never-handshaken one; no private or preshared key kept", () => {
  const text = fixture("wireguard-go-two-peers.dump");
  const dump = parseWgDump(text);
  assert.equal(dump.public_key, "Qh9uYKS3c9znvxGhwaxQOr1Dme4zwzl6ilUW6wgLQkc=");
  assert.equal(dump.listen_port, 51820);
  assert.deepEqual(dump.peers, [
    {
      public_key: "4vJ7ND3Ls40W+goHz/6qQ6RJo49/4YGq9TZge24c6WI=",
      endpoint: "10.77.0.2:51820",
      allowed_ips: ["10.9.0.2/32", "fd00:9::2/128"],
      latest_handshake: 1795849554,
      rx_bytes: 732,
      tx_bytes: 968,
      persistent_keepalive_s: 25,
    },
    {
      public_key: "L1LqJuPJM6O9Kh3otEpCPp7LkFZVdQ0H5wPPZG40VzE=",
      endpoint: "10.77.0.3:51820",
      allowed_ips: ["10.9.0.3/32"],
      latest_handshake: null,
      rx_bytes: 0,
      tx_bytes: 296,
      persistent_keepalive_s: null,
    },
  ]);
  const secrets = [text.split("\t")[0], text.split("\n")[2]?.split("\t")[1]];
  for (const secret of secrets) assert.ok(secret !== undefined && !JSON.stringify(dump).includes(secret), "no private or preshared key in the parse");
  for (const peer of dump.peers) wgPeerReportSchema.parse(peer);
});

test("wireguard-go dump of the other side: endpoint learnt from the handshake, no keepalive", () => {
  const dump = parseWgDump(fixture("wireguard-go-one-peer.dump"));
  assert.equal(dump.peers.length, 1);
  assert.equal(dump.peers[0]?.endpoint, "10.77.0.1:51820");
  assert.equal(dump.peers[0]?.latest_handshake, 1795849554);
  assert.equal(dump.peers[0]?.persistent_keepalive_s, null);
});

test("awg dump: the long AmneziaWG interface line reads like WireGuard's; '(none)' endpoint and a never-handshaken peer", () => {
  const dump = parseWgDump(fixture("awg-two-peers.dump"));
  assert.equal(dump.public_key, "hYaD5OV2Z7Ak4kI9VT7cB7EUsZRd0LMW6Qs2AiaR8jw=");
  assert.equal(dump.listen_port, 51821);
  assert.deepEqual(
    dump.peers.map((p) => [p.endpoint, p.allowed_ips, p.latest_handshake, p.persistent_keepalive_s]),
    [
      ["192.0.2.10:51821", ["10.8.0.2/32"], 1795849600, 25],
      [null, ["10.8.0.3/32", "fd08::3/128"], null, null],
    ],
  );
});

test("lines dump_print would not write are refused with their line number and without their text", () => {
  const key = "4vJ7ND3Ls40W+goHz/6qQ6RJo49/4YGq9TZge24c6WI=";
  const head = `(none)\t${key}\t0\toff\n`;
  assert.throws(() => parseWgDump(""), WgDumpParseError);
  assert.throws(() => parseWgDump(`${head}${key}\t(none)\t(none)\t(none)\t0\t0\t0\n`), /line 2: a peer line has 8 fields/);
  assert.throws(() => parseWgDump(`${head}${key}\t(none)\t(none)\t(none)\t-1\t0\t0\toff\n`), /line 2: latest handshake/);
  assert.throws(() => parseWgDump(`${head}notakey\t(none)\t(none)\t(none)\t0\t0\t0\toff\n`), (e: unknown) => e instanceof WgDumpParseError && !e.message.includes("notakey"));
  assert.deepEqual(parseWgDump(head), { public_key: key, listen_port: null, peers: [] });
});

const keyArb = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString("base64"));
const peerArb = fc.record({
  public_key: keyArb,
  endpoint: fc.option(fc.tuple(fc.ipV4(), fc.integer({ min: 1, max: 65535 })).map(([h, p]) => `${h}:${p}`), { nil: null }),
  allowed_ips: fc.array(fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([h, c]) => `${h}/${c}`), { maxLength: 4 }),
  latest_handshake: fc.option(fc.integer({ min: 1, max: 2 ** 40 }), { nil: null }),
  rx_bytes: fc.maxSafeNat(),
  tx_bytes: fc.maxSafeNat(),
  persistent_keepalive_s: fc.option(fc.integer({ min: 1, max: 65535 }), { nil: null }),
});

test("for every peer set, the dump_print layout of it parses back to the same peers (both interface layouts)", () => {
  fc.assert(
    fc.property(fc.array(peerArb, { maxLength: 6 }), keyArb, fc.boolean(), (peers, ifaceKey, awg) => {
      const extra = awg ? "\t5\t40\t70\t37\t93\t0\t0\t1\t2\t3\t4" : "";
      const lines = [`(none)\t${ifaceKey}\t51820${extra}\toff`];
      for (const p of peers) {
        lines.push(
          [
            p.public_key,
            "(none)",
            p.endpoint ?? "(none)",
            p.allowed_ips.length === 0 ? "(none)" : p.allowed_ips.join(","),
            String(p.latest_handshake ?? 0),
            String(p.rx_bytes),
            String(p.tx_bytes),
            p.persistent_keepalive_s === null ? "off" : String(p.persistent_keepalive_s),
          ].join("\t"),
        );
      }
      const dump = parseWgDump(`${lines.join("\n")}\n`);
      assert.deepEqual(dump.peers, peers.map((p) => ({ ...p })));
      assert.equal(dump.public_key, ifaceKey);
    }),
    { numRuns: 150 },
  );
});
