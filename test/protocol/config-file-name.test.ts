import assert from "node:assert/strict";
import { test } from "node:test";
import { configFileName, CONFIG_FILE_STEM_MAX } from "../../src/protocol/config-file-name.js";

/** The WireGuard apps' tunnel-name rule (wireguard-windows conf/name.go): what an imported file's stem must match. */
const TUNNEL_NAME = /^[a-zA-Z0-9_=+.-]{1,32}$/;

test("a node's config file is <config>-<node>.conf, each part in the tunnel-name alphabet", () => {
  assert.equal(configFileName({ name: "Office mesh", id: "c1" }, { name: "laptop 7", id: "n1" }), "Office-mesh-laptop-7.conf");
  assert.equal(configFileName({ name: "edge", id: "c1" }, { name: "gw", id: "n1" }), "edge-gw.conf");
  // Runs of other characters become one '-', none dangles at either end.
  assert.equal(configFileName({ name: "  Büro / Köln ", id: "c1" }, { name: "..nas!", id: "n1" }), "B-ro-K-ln-nas.conf");
});

test("a name with no usable character falls back to its id", () => {
  assert.equal(configFileName({ name: "办公室", id: "cfg-1" }, { name: "网关", id: "node_2" }), "cfg-1-node_2.conf");
});

test("long names are cut so the stem stays a valid tunnel name of at most 32 characters, the node keeping up to 20", () => {
  const name = configFileName({ name: "production-mesh-eu-west-datacenter", id: "c" }, { name: "gateway-eu-west-1-primary-router", id: "n" });
  const stem = name.replace(/\.conf$/, "");
  assert.ok(stem.length <= CONFIG_FILE_STEM_MAX, stem);
  assert.match(stem, TUNNEL_NAME);
  assert.equal(stem, "production-gateway-eu-west-1-pr");
  for (const [c, n] of [["a".repeat(64), "b".repeat(64)], ["x", "y"], ["-", "-"], ["a.b", "c.d"]] as const) {
    assert.match(configFileName({ name: c, id: "c0" }, { name: n, id: "n0" }).replace(/\.conf$/, ""), TUNNEL_NAME);
  }
});
