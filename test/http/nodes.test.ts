import assert from "node:assert/strict";
import { test } from "node:test";
import { testSettings } from "../../src/config.js";
import { publicKeyFromPrivate } from "../../src/domain/keys.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { assertError, createConfig, createNode, startHarness, ADMIN_PASSWORD } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

test("POST /nodes allocates the lowest free tunnel address, generates keys and defaults listen_port for public nodes", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { network_cidr: "10.50.0.0/24" });
  const a = await createNode(h, config.config_id, { name: "alpha", public_address: "203.0.113.5", tags: ["edge", "eu"] });
  const b = await createNode(h, config.config_id, { name: "beta", interface_name: "wg-beta" });
  assert.equal(a.address, "10.50.0.1");
  assert.equal(b.address, "10.50.0.2");
  assert.equal(a.listen_port, 51820, "public node gets the default WireGuard port");
  assert.equal(b.listen_port, null, "a node without public address listens on a random port");
  assert.equal(a.interface_name, "svc0");
  assert.equal(b.interface_name, "wg-beta");
  assert.deepEqual(a.tags, ["edge", "eu"]);
  assert.equal(a.mode, "static");
  assert.equal(a.effective_mode, "static");
  assert.deepEqual(a.client, {
    client_initialized: false,
    client_presence_state: "offline",
    runtime_state: "unknown",
    last_reachable_at: null,
    client_version: null,
    config_version_state: null,
  });
  assert.equal("private_key" in a, false, "the private key never leaves through the node resource");
  const staged = await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/config`);
  const priv = /^PrivateKey = (.+)$/m.exec(staged.json.config_text)?.[1];
  assert.ok(priv);
  assert.equal(publicKeyFromPrivate(priv), a.public_key);

  // Deleting frees the address; the next node reuses it.
  assert.equal((await h.req("DELETE", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}`)).status, 204);
  const c = await createNode(h, config.config_id);
  assert.equal(c.address, "10.50.0.1");
});

test("a new node is paired with every existing node unless auto_pair is false", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  for (let i = 0; i < 4; i++) await createNode(h, config.config_id);
  const pairs = await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs`);
  assert.equal(pairs.json.mesh_pairs.length, 6);
  await createNode(h, config.config_id, { auto_pair: false });
  assert.equal((await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs`)).json.mesh_pairs.length, 6);
});

test("an explicit address must be a free host address of the network", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { network_cidr: "10.60.0.0/24" });
  const a = await createNode(h, config.config_id, { address: "10.60.0.200" });
  assert.equal(a.address, "10.60.0.200");
  const before = h.fingerprint();
  const url = `/api/v1/configs/${config.config_id}/nodes`;
  assertError(await h.req("POST", url, { name: "x", mode: "static", address: "10.60.0.200" }), "CONFLICT");
  assertError(await h.req("POST", url, { name: "x", mode: "static", address: "10.61.0.1" }), "VALIDATION_FAILED");
  assertError(await h.req("POST", url, { name: "x", mode: "static", address: "10.60.0.0" }), "VALIDATION_FAILED");
  assertError(await h.req("POST", url, { name: "x", mode: "static", address: "10.60.0.255" }), "VALIDATION_FAILED");
  assertError(await h.req("POST", url, { name: "x", mode: "static", address: "not-an-ip" }), "VALIDATION_FAILED");
  assert.equal(h.fingerprint(), before);
});

test("an exhausted address pool answers ADDRESS_POOL_EXHAUSTED and writes nothing", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { network_cidr: "10.70.0.0/30" });
  await createNode(h, config.config_id);
  await createNode(h, config.config_id);
  const before = h.fingerprint();
  const res = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes`, { name: "third", mode: "static" });
  assertError(res, "ADDRESS_POOL_EXHAUSTED");
  assert.equal(res.json.error.details.network_cidr, "10.70.0.0/30");
  assert.equal(h.fingerprint(), before);
});

test("duplicate node names in one config answer CONFLICT; the same name in another config is fine", async (t) => {
  const h = await startHarness(t);
  const c1 = await createConfig(h);
  const c2 = await createConfig(h, { network_cidr: "10.21.0.0/24" });
  await createNode(h, c1.config_id, { name: "gateway" });
  const n2 = await createNode(h, c1.config_id, { name: "other" });
  await createNode(h, c2.config_id, { name: "gateway" });
  const before = h.fingerprint();
  assertError(await h.req("POST", `/api/v1/configs/${c1.config_id}/nodes`, { name: "GATEWAY", mode: "static" }), "CONFLICT");
  assertError(await h.req("PATCH", `/api/v1/configs/${c1.config_id}/nodes/${n2.node_id}`, { name: "gateway" }), "CONFLICT");
  assert.equal(h.fingerprint(), before);
});

test("bad node bodies answer VALIDATION_FAILED and write nothing", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const url = `/api/v1/configs/${config.config_id}/nodes`;
  const before = h.fingerprint();
  const bad: unknown[] = [
    { name: "a", mode: "hybrid" },
    { name: "a", mode: "static", listen_port: 0 },
    { name: "a", mode: "static", listen_port: 65536 },
    { name: "a", mode: "static", listen_port: 1.5 },
    { name: "a", mode: "static", interface_name: "name-longer-than-15" },
    { name: "a", mode: "static", interface_name: "bad/name" },
    { name: "a", mode: "static", public_address: "not a host" },
    { name: "a", mode: "static", public_address: "x".repeat(1024) },
    { name: "a", mode: "static", tags: ["ok", "bad tag"] },
    { name: "a", mode: "static", tags: Array.from({ length: 33 }, (_, i) => `t${i}`) },
    { name: "a", mode: "static", auto_pair: "yes" },
  ];
  for (const body of bad) assertError(await h.req("POST", url, body), "VALIDATION_FAILED", JSON.stringify(body).slice(0, 80));
  assert.equal(h.fingerprint(), before);
});

test("PATCH /nodes moves a node to another free host address of the network: the node and every peer naming it re-stage; a taken or outside address changes nothing", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { network_cidr: "10.62.0.0/24" });
  const a = await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const b = await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const url = `/api/v1/configs/${config.config_id}/nodes/${a.node_id}`;
  const text = async (n: string) => (await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${n}/config`)).json as { config_version: number; config_text: string };
  const [va, vb] = [(await text(a.node_id)).config_version, (await text(b.node_id)).config_version];
  const before = h.fingerprint();
  assertError(await h.req("PATCH", url, { address: b.address }), "CONFLICT");
  assertError(await h.req("PATCH", url, { address: "10.63.0.1" }), "VALIDATION_FAILED");
  assertError(await h.req("PATCH", url, { address: "10.62.0.255" }), "VALIDATION_FAILED");
  assert.equal(h.fingerprint(), before, "a refused address writes nothing");
  const moved = await h.req("PATCH", url, { address: "10.62.0.77" });
  assert.equal(moved.status, 200, moved.text);
  assert.equal(moved.json.address, "10.62.0.77");
  const [ta, tb] = [await text(a.node_id), await text(b.node_id)];
  assert.deepEqual([ta.config_version, tb.config_version], [va + 1, vb + 1]);
  assert.match(ta.config_text, /^Address = 10\.62\.0\.77\/24$/m);
  assert.match(tb.config_text, /^AllowedIPs = 10\.62\.0\.77\/32$/m);
});

test("PATCH /nodes re-stages peers only when their rendered config changes (DESIGN §3 Config versions)", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const a = await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const b = await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const version = async (n: string) =>
    (await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${n}/config`)).json.config_version as number;
  const [va, vb] = [await version(a.node_id), await version(b.node_id)];
  // Tagging changes nothing in any config text.
  await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}`, { tags: ["x"] });
  assert.deepEqual([await version(a.node_id), await version(b.node_id)], [va, vb]);
  // Renaming changes the comment naming a in b's [Peer] section, not a's own config.
  await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}`, { name: "renamed" });
  assert.deepEqual([await version(a.node_id), await version(b.node_id)], [va, vb + 1]);
  const renamed = (await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${b.node_id}/config`)).json.config_text;
  assert.match(renamed, new RegExp(`^# renamed \\(node ${a.node_id}\\)$`, "m"));
  // A new endpoint changes b's [Peer] section, not a's own config.
  const patched = await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}`, { public_address: "192.0.2.9" });
  assert.equal(patched.status, 200, patched.text);
  assert.equal(await version(a.node_id), va);
  assert.equal(await version(b.node_id), vb + 2);
  const text = (await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${b.node_id}/config`)).json.config_text;
  assert.match(text, /^Endpoint = 192\.0\.2\.9:51820$/m);
  const tags = await h.req("GET", `/api/v1/configs/${config.config_id}/tags`);
  assert.deepEqual(tags.json.tags, [{ tag: "x", node_ids: [a.node_id] }]);
});

test("deleting a node removes it from its peers' configs", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const a = await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const b = await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const text = async () => (await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/config`)).json.config_text;
  assert.match(await text(), new RegExp(`PublicKey = ${b.public_key.replace(/[+/]/g, "\\$&")}`));
  assert.equal((await h.req("DELETE", `/api/v1/configs/${config.config_id}/nodes/${b.node_id}`)).status, 204);
  assert.doesNotMatch(await text(), /\[Peer\]/);
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${b.node_id}`), "NOT_FOUND");
  assert.equal((await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs`)).json.mesh_pairs.length, 0);
});

test("spec §1.7: with MQTT services disabled, a new dynamic node is refused and stored dynamic nodes are projected as static", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const dyn = await createNode(h, config.config_id, { mode: "dynamic" });
  assert.equal(dyn.effective_mode, "dynamic");
  assert.equal(dyn.client.config_version_state, "pending", "spec §3.5: never pushed is pending");
  const stored = h.fingerprint();
  await h.server.close();

  // A second start over the same database with the switch off.
  const off = await createServer(
    testSettings({ dataDir: h.dataDir, adminPassword: ADMIN_PASSWORD, mqttEnabled: false }),
    createLogger("silent"),
    { clock: h.clock },
  );
  t.after(() => off.close().catch(() => undefined));
  const login = await off.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: ADMIN_PASSWORD } });
  const auth = { authorization: `Bearer ${login.json().access_token}` };
  const node = await off.app.inject({ method: "GET", url: `/api/v1/configs/${config.config_id}/nodes/${dyn.node_id}`, headers: auth });
  assert.equal(node.json().mode, "dynamic", "stored kind unchanged");
  assert.equal(node.json().effective_mode, "static");
  assert.equal(node.json().client.client_presence_state, "offline");
  assert.equal(node.json().client.runtime_state, "unknown");
  const refused = await off.app.inject({
    method: "POST",
    url: `/api/v1/configs/${config.config_id}/nodes`,
    headers: auth,
    payload: { name: "new-dyn", mode: "dynamic" },
  });
  assert.equal(refused.statusCode, 409);
  assert.equal(refused.json().error.code, "MQTT_DISABLED");
  const toDynamic = await off.app.inject({
    method: "PATCH",
    url: `/api/v1/configs/${config.config_id}/nodes/${dyn.node_id}`,
    headers: auth,
    payload: { mode: "dynamic" },
  });
  assert.equal(toDynamic.json().error.code, "MQTT_DISABLED");
  const rows = sqliteOf(off.store).prepare("SELECT mode FROM nodes").all();
  assert.deepEqual(rows, [{ mode: "dynamic" }]);
  assert.ok(stored.length > 0);
});
