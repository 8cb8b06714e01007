import assert from "node:assert/strict";
import { test } from "node:test";
import { assertError, createConfig, createNode, startHarness } from "./harness.js";

/** Values the REST boundary refuses although they fit a field's shape: no host or kernel would take them (DESIGN §5: every boundary validates). */

const RESERVED_NETWORKS = [
  "0.0.0.0/8", // "this network"
  "0.1.2.0/24",
  "127.0.0.0/8", // loopback: a node would get 127.0.0.1
  "127.10.0.0/16",
  "169.254.0.0/16", // link-local
  "224.0.0.0/24", // multicast
  "239.255.0.0/16",
  "240.0.0.0/24", // reserved ("class E")
  "255.255.255.252/30", // ... up to the limited broadcast address
  "224.0.0.0/8",
];

test("a config refuses reserved networks (this-network, loopback, link-local, multicast, class E, broadcast) with VALIDATION_FAILED, on create and update", async (t) => {
  const h = await startHarness(t);
  const empty = await createConfig(h, { network_cidr: "10.1.0.0/24" });
  for (const network_cidr of RESERVED_NETWORKS) {
    const fp = h.fingerprint();
    const created = await h.req("POST", "/api/v1/configs", { name: `n-${network_cidr.replace(/[./]/g, "-")}`, tunnel_protocol: "wireguard", network_cidr });
    assertError(created, "VALIDATION_FAILED", `create ${network_cidr}`);
    assert.match(created.json.error.message, /network_cidr/);
    const updated = await h.req("PATCH", `/api/v1/configs/${empty.config_id}`, { network_cidr });
    assertError(updated, "VALIDATION_FAILED", `update ${network_cidr}`);
    assert.equal(h.fingerprint(), fp, `${network_cidr}: nothing written`);
  }
  // Private, shared (CGNAT) and public unicast networks stay accepted.
  for (const network_cidr of ["10.0.0.0/8", "172.16.0.0/12", "192.168.7.0/24", "100.64.0.0/10", "198.51.100.0/24", "1.0.0.0/8", "223.255.255.0/24"]) {
    const res = await h.req("POST", "/api/v1/configs", { name: `ok-${network_cidr.replace(/[./]/g, "-")}`, tunnel_protocol: "wireguard", network_cidr });
    assert.equal(res.status, 201, `${network_cidr}: ${res.text}`);
  }
});

test("interface_name '.' and '..' are refused on node create and update (Linux refuses them as interface names)", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { interface_name: "wg.0" });
  assert.equal(node.interface_name, "wg.0", "a dot inside a name stays valid");
  for (const interface_name of [".", ".."]) {
    const fp = h.fingerprint();
    assertError(await h.req("POST", `/api/v1/configs/${config.config_id}/nodes`, { name: "x", mode: "static", interface_name }), "VALIDATION_FAILED", interface_name);
    assertError(await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}`, { interface_name }), "VALIDATION_FAILED", interface_name);
    assert.equal(h.fingerprint(), fp);
  }
});

test("names refuse C1 control characters (U+0080-U+009F) as they refuse C0 and DEL", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  for (const ch of ["\u0080", "\u0085", "\u009b", "\u009f"]) {
    const name = `a${ch}b`;
    const fp = h.fingerprint();
    assertError(await h.req("POST", "/api/v1/configs", { name, tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" }), "VALIDATION_FAILED", JSON.stringify(name));
    assertError(await h.req("PATCH", `/api/v1/configs/${config.config_id}`, { name }), "VALIDATION_FAILED");
    assertError(await h.req("POST", `/api/v1/configs/${config.config_id}/nodes`, { name, mode: "static" }), "VALIDATION_FAILED");
    assert.equal(h.fingerprint(), fp);
  }
  // Printable non-ASCII (U+00A0 and beyond) stays allowed.
  assert.equal((await h.req("POST", "/api/v1/configs", { name: "Büro \u00a0Zürich", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).status, 201);
});
