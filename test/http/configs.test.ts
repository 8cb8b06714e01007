import assert from "node:assert/strict";
import { test } from "node:test";
import { awgParamsSchema } from "../../src/domain/awg.js";
import { assertError, createConfig, createNode, startHarness } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

test("POST /configs creates a config with a normalized network and AmneziaWG parameters generated once (DESIGN §3 awg_2)", async (t) => {
  const h = await startHarness(t);
  const res = await h.req("POST", "/api/v1/configs", { name: "office", tunnel_protocol: "awg_2", network_cidr: "10.30.0.7/24" });
  assert.equal(res.status, 201, res.text);
  assert.match(res.json.config_id, /^[a-z0-9][a-z0-9_-]{0,63}$/);
  assert.equal(res.json.network_cidr, "10.30.0.0/24");
  assert.equal(res.json.tunnel_protocol, "awg_2");
  assert.ok(awgParamsSchema.safeParse(res.json.awg).success, "generated awg params are valid");
  assert.equal(res.json.created_at, new Date(h.clock.now()).toISOString());

  const list = await h.req("GET", "/api/v1/configs");
  assert.deepEqual(list.json.configs, [res.json]);
  const one = await h.req("GET", `/api/v1/configs/${res.json.config_id}`);
  assert.deepEqual(one.json, { ...res.json, nodes: [], tags: [] });
  // Switching protocols keeps the parameters: peers keep agreeing on S1-S4 and H1-H4.
  const patched = await h.req("PATCH", `/api/v1/configs/${res.json.config_id}`, { tunnel_protocol: "wireguard" });
  assert.equal(patched.status, 200, patched.text);
  assert.deepEqual(patched.json.awg, res.json.awg);
});

test("config names are unique regardless of case; a duplicate answers CONFLICT and writes nothing", async (t) => {
  const h = await startHarness(t);
  await createConfig(h, { name: "Office" });
  const other = await createConfig(h, { name: "lab" });
  const before = h.fingerprint();
  assertError(await h.req("POST", "/api/v1/configs", { name: "office", tunnel_protocol: "wireguard", network_cidr: "10.1.0.0/24" }), "CONFLICT");
  assertError(await h.req("PATCH", `/api/v1/configs/${other.config_id}`, { name: "OFFICE" }), "CONFLICT");
  assert.equal(h.fingerprint(), before);
});

test("bad config bodies answer VALIDATION_FAILED and write nothing", async (t) => {
  const h = await startHarness(t);
  const before = h.fingerprint();
  const bad: unknown[] = [
    { name: "a", tunnel_protocol: "openvpn", network_cidr: "10.0.0.0/24" },
    { name: "a", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/31" },
    { name: "a", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/7" },
    { name: "a", tunnel_protocol: "wireguard", network_cidr: "fd00::/64" },
    { name: "a", tunnel_protocol: "wireguard", network_cidr: "300.0.0.0/24" },
    { name: "a", tunnel_protocol: "wireguard", network_cidr: "x".repeat(1024) },
    { name: "x".repeat(1024), tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/24" },
    { name: "line\nbreak", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/24" },
    { name: "nul\u0000", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/24" },
    { name: "   ", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/24" },
    { name: 5, tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/24" },
    { tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/24" },
  ];
  for (const body of bad) assertError(await h.req("POST", "/api/v1/configs", body), "VALIDATION_FAILED", JSON.stringify(body).slice(0, 80));
  assert.equal(h.fingerprint(), before);
});

test("network_cidr changes only while the config has no nodes", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { network_cidr: "10.40.0.0/24" });
  const moved = await h.req("PATCH", `/api/v1/configs/${config.config_id}`, { network_cidr: "10.41.0.0/16" });
  assert.equal(moved.status, 200, moved.text);
  assert.equal(moved.json.network_cidr, "10.41.0.0/16");
  await createNode(h, config.config_id);
  const before = h.fingerprint();
  assertError(await h.req("PATCH", `/api/v1/configs/${config.config_id}`, { network_cidr: "10.42.0.0/24" }), "CONFLICT");
  assert.equal(h.fingerprint(), before);
});

test("changing the tunnel protocol re-stages every node's config with a new version", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const a = await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const staged = async () => (await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/config`)).json;
  const v1 = await staged();
  assert.equal(v1.config_version, 1);
  assert.doesNotMatch(v1.config_text, /^Jc = /m);
  await h.req("PATCH", `/api/v1/configs/${config.config_id}`, { tunnel_protocol: "awg_2" });
  const v2 = await staged();
  assert.equal(v2.config_version, 2);
  assert.match(v2.config_text, /^Jc = \d+$/m);
  // A write that changes nothing in the text keeps the version (DESIGN §3 Config versions).
  await h.req("PATCH", `/api/v1/configs/${config.config_id}`, { name: "renamed" });
  assert.equal((await staged()).config_version, 2);
});

test("DELETE /configs removes the config, its nodes and their download tokens", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id);
  const token = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/download-token`);
  const del = await h.req("DELETE", `/api/v1/configs/${config.config_id}`);
  assert.equal(del.status, 204);
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}`), "NOT_FOUND");
  assertError(await h.req("GET", token.json.download_path, undefined, { auth: false }), "INVALID_DOWNLOAD_TOKEN");
  const left = sqliteOf(h.server.store).prepare("SELECT (SELECT count(*) FROM nodes) + (SELECT count(*) FROM download_tokens) + (SELECT count(*) FROM node_client_state) AS n").get() as { n: number };
  assert.equal(left.n, 0);
  assertError(await h.req("DELETE", `/api/v1/configs/${config.config_id}`), "NOT_FOUND");
});
