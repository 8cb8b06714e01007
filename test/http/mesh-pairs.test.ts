import assert from "node:assert/strict";
import { test } from "node:test";
import { assertError, createConfig, createNode, startHarness, type Harness } from "./harness.js";

async function configText(h: Harness, configId: string, nodeId: string): Promise<string> {
  return (await h.req("GET", `/api/v1/configs/${configId}/nodes/${nodeId}/config`)).json.config_text;
}

test("connection integrity: a pair no side can initiate is broken with a reason and left out of both configs", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const a = await createNode(h, config.config_id); // behind NAT
  const b = await createNode(h, config.config_id); // behind NAT
  const pairs = (await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs`)).json.mesh_pairs;
  assert.equal(pairs.length, 1);
  assert.equal(pairs[0].integrity.status, "broken");
  assert.match(pairs[0].integrity.reason, /public address/);
  assert.deepEqual(pairs[0].integrity.initiators, []);
  assert.doesNotMatch(await configText(h, config.config_id, a.node_id), /\[Peer\]/);
  assert.doesNotMatch(await configText(h, config.config_id, b.node_id), /\[Peer\]/);

  // Giving b a public endpoint repairs it: a initiates, and keeps its NAT mapping open.
  await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${b.node_id}`, { public_address: "198.51.100.7", listen_port: 40000 });
  const fixed = (await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs`)).json.mesh_pairs[0];
  assert.equal(fixed.integrity.status, "ok");
  assert.equal(fixed.integrity.reason, null);
  assert.deepEqual(fixed.integrity.initiators, [a.node_id]);
  const textA = await configText(h, config.config_id, a.node_id);
  assert.match(textA, /^Endpoint = 198\.51\.100\.7:40000$/m);
  assert.match(textA, /^PersistentKeepalive = 25$/m);
  const textB = await configText(h, config.config_id, b.node_id);
  assert.match(textB, new RegExp(`AllowedIPs = ${a.address}/32`));
  assert.doesNotMatch(textB, /^Endpoint/m, "b cannot reach a; it answers a's handshakes");
});

test("disabling a pair removes the peers from both configs; enabling restores them", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const a = await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const b = await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const pair = (await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs`)).json.mesh_pairs[0];
  const withPeer = await configText(h, config.config_id, a.node_id);
  const off = await h.req("PATCH", `/api/v1/configs/${config.config_id}/mesh-pairs/${pair.pair_id}`, { enabled: false });
  assert.equal(off.status, 200, off.text);
  assert.equal(off.json.enabled, false);
  assert.equal(off.json.integrity.status, "disabled");
  assert.doesNotMatch(await configText(h, config.config_id, a.node_id), /\[Peer\]/);
  assert.doesNotMatch(await configText(h, config.config_id, b.node_id), /\[Peer\]/);
  const on = await h.req("PATCH", `/api/v1/configs/${config.config_id}/mesh-pairs/${pair.pair_id}`, { enabled: true });
  assert.equal(on.json.integrity.status, "ok");
  assert.equal(await configText(h, config.config_id, a.node_id), withPeer);
});

test("mesh pairs: create, duplicate, self-pair, foreign node and delete", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const other = await createConfig(h, { network_cidr: "10.99.0.0/24" });
  const a = await createNode(h, config.config_id, { auto_pair: false, public_address: "192.0.2.1" });
  const b = await createNode(h, config.config_id, { auto_pair: false });
  const foreign = await createNode(h, other.config_id);
  const url = `/api/v1/configs/${config.config_id}/mesh-pairs`;
  const created = await h.req("POST", url, { node_a: b.node_id, node_b: a.node_id });
  assert.equal(created.status, 201, created.text);
  assert.deepEqual([created.json.node_a, created.json.node_b], [a.node_id, b.node_id].sort());
  assert.equal(created.json.integrity.status, "ok");
  const before = h.fingerprint();
  assertError(await h.req("POST", url, { node_a: a.node_id, node_b: b.node_id }), "CONFLICT");
  assertError(await h.req("POST", url, { node_a: a.node_id, node_b: a.node_id }), "VALIDATION_FAILED");
  assertError(await h.req("POST", url, { node_a: a.node_id, node_b: foreign.node_id }), "NOT_FOUND");
  assertError(await h.req("POST", url, { node_a: a.node_id, node_b: "no/such" }), "VALIDATION_FAILED");
  assertError(await h.req("PATCH", `${url}/${created.json.pair_id}`, { enabled: "no" }), "VALIDATION_FAILED");
  assert.equal(h.fingerprint(), before);
  assert.equal((await h.req("DELETE", `${url}/${created.json.pair_id}`)).status, 204);
  assert.doesNotMatch(await configText(h, config.config_id, a.node_id), /\[Peer\]/);
  assertError(await h.req("DELETE", `${url}/${created.json.pair_id}`), "NOT_FOUND");
  // A pair id of another config is not found through this config.
  const otherPair = await h.req("POST", `/api/v1/configs/${other.config_id}/mesh-pairs`, {
    node_a: foreign.node_id,
    node_b: (await createNode(h, other.config_id, { auto_pair: false })).node_id,
  });
  assertError(await h.req("PATCH", `${url}/${otherPair.json.pair_id}`, { enabled: false }), "NOT_FOUND");
});
