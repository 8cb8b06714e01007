/**
 * The topology's placement and the words of link health, without a browser: positions depend on
 * the nodes alone (stable screenshots), neighbours on the circle are at least a label's line
 * apart at any size the drawing takes, hubs sit inside, and transfer and handshake ages read the
 * way the peer table and the edge names print them.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ARC_PER_NODE, circleLayout, LABEL_MAX, TOPOLOGY_MAX_NODES } from "../../web/src/features/mesh/circle-layout.js";
import { ageText, bytesText, linkSentence } from "../../web/src/features/mesh/link-text.js";

const nodes = (n: number, hubs = 0) => Array.from({ length: n }, (_, i) => ({ id: `id-${i}`, name: `node-${String(i).padStart(3, "0")}`, hub: i < hubs }));

test("the circle is deterministic, name-ordered from the top, neighbours at least one label line apart, hubs inside", () => {
  for (const n of [1, 2, 3, 12, 50, TOPOLOGY_MAX_NODES]) {
    const a = circleLayout(nodes(n));
    assert.deepEqual(circleLayout([...nodes(n)].reverse()), a, `${n} nodes: the input order does not move anything`);
    const ring = a.nodes.filter((p) => p.angle !== null);
    assert.equal(ring[0]?.label, "node-000");
    assert.ok(Math.abs((ring[0]?.y ?? 0) + a.radius) < 1e-9, "the first node is at the top");
    if (n > 1) {
      const [p, q] = [ring[0], ring[1]];
      const gap = Math.hypot((p?.x ?? 0) - (q?.x ?? 0), (p?.y ?? 0) - (q?.y ?? 0));
      assert.ok(gap >= ARC_PER_NODE * 0.95, `${n} nodes: neighbours ${gap.toFixed(1)} px apart`);
    }
  }
  const hubbed = circleLayout(nodes(10, 1));
  const hub = hubbed.nodes.find((p) => p.id === "id-0");
  assert.deepEqual([Math.abs(hub?.x ?? 1), Math.abs(hub?.y ?? 1), hub?.angle], [0, 0, null], "one hub at the centre");
  assert.equal(hubbed.nodes.filter((p) => p.angle !== null).length, 9);
  const long = circleLayout([{ id: "x", name: "a".repeat(64), hub: false }]);
  assert.equal(long.nodes[0]?.label.length, LABEL_MAX, "a long name is cut to the label's length with an ellipsis");
});

test("transfer in binary units and handshake ages in whole units", () => {
  assert.deepEqual([0, 1023, 1024, 1536, 307_200, 1_572_864, 5 * 1024 ** 4].map(bytesText), ["0 B", "1023 B", "1.0 KiB", "1.5 KiB", "300 KiB", "1.5 MiB", "5.0 TiB"]);
  const now = Date.parse("2026-01-01T12:00:00Z");
  const ago = (s: number) => new Date(now - s * 1000).toISOString();
  assert.deepEqual([ago(0), ago(12), ago(119), ago(150), ago(4000), ago(7200), ago(200_000)].map((iso) => ageText(iso, now)), ["0 s ago", "12 s ago", "119 s ago", "2 min ago", "66 min ago", "2 h ago", "2 d ago"]);
  assert.equal(ageText(null, now), "never");
  const dir = (s: number | null) => ({ latest_handshake_at: s === null ? null : ago(s), rx_bytes: 0, tx_bytes: 0, endpoint: null });
  const link = { node_a: "a", node_b: "b", configured: "ok", link: "up", a_to_b: dir(40), b_to_a: dir(12), measured_at: ago(5) } as Parameters<typeof linkSentence>[2];
  assert.equal(linkSentence("gate", "edge", link, now), "gate ↔ edge: up, handshake 12 s ago", "the newer side's handshake");
  assert.equal(linkSentence("gate", "edge", undefined, now), "gate ↔ edge: not measured");
});
