/**
 * A node config download in the Amnezia apps' formats through a download token (spec §4 rows
 * 1–2, rule 1): `format=wireguard|amneziawg|amneziavpn`, the wireguard bytes unchanged.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { inflateSync } from "node:zlib";
import { assertError, createConfig, createNode, startHarness, type Harness } from "./harness.js";

/** A download token's path for the node, with `format` appended when given. */
async function downloadPath(h: Harness, configId: string, nodeId: string, format?: string): Promise<string> {
  const issued = await h.req("POST", `/api/v1/configs/${configId}/nodes/${nodeId}/download-token`);
  assert.equal(issued.status, 200, issued.text);
  const path = String(issued.json.download_path);
  return format === undefined ? path : `${path}&format=${encodeURIComponent(format)}`;
}

test("spec §4 rows 1-2: an awg_2 phone's config downloads as wireguard, amneziawg and amneziavpn through one download token", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { name: "Office mesh", tunnel_protocol: "awg_2" });
  await createNode(h, config.config_id, { name: "gw", public_address: "203.0.113.1", listen_port: 51820 });
  const phone = await createNode(h, config.config_id, { name: "phone" });
  const staged = await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${phone.node_id}/config`);
  assert.equal(staged.status, 200, staged.text);
  const path = await downloadPath(h, config.config_id, phone.node_id);

  // wireguard, by default or by name: today's bytes, whose sha is the staged one (spec §3.5).
  for (const suffix of ["", "&format=wireguard"]) {
    const res = await h.req("GET", `${path}${suffix}`, undefined, { auth: false });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.text, staged.json.config_text);
    assert.equal(createHash("sha256").update(res.text, "utf8").digest("hex"), staged.json.config_sha256);
    assert.equal(res.headers["content-disposition"], 'attachment; filename="Office-mesh-phone.conf"');
  }

  const awg = await h.req("GET", `${path}&format=amneziawg`, undefined, { auth: false });
  assert.equal(awg.status, 200, awg.text);
  assert.match(String(awg.headers["content-type"]), /^text\/plain/);
  assert.equal(awg.headers["content-disposition"], 'attachment; filename="Office-mesh-phone.conf"');
  assert.equal(awg.headers["cache-control"], "no-store");
  assert.ok(!awg.text.includes("#"), "no comments");
  assert.match(awg.text, /^\[Interface\]\nPrivateKey = /);
  assert.match(awg.text, /^Jc = \d+$/m);
  assert.match(awg.text, /^H4 = \d+(-\d+)?$/m);

  const vpn = await h.req("GET", `${path}&format=amneziavpn`, undefined, { auth: false });
  assert.equal(vpn.status, 200, vpn.text);
  assert.equal(vpn.headers["content-disposition"], 'attachment; filename="Office-mesh-phone.vpn"');
  assert.match(vpn.text, /^vpn:\/\/[A-Za-z0-9_-]+$/);
  // Decoded from the documented layout: base64url, 4-byte big-endian length, zlib, JSON.
  const bytes = Buffer.from(vpn.text.slice("vpn://".length), "base64url");
  const json = inflateSync(bytes.subarray(4));
  assert.equal(json.length, bytes.readUInt32BE(0));
  const doc = JSON.parse(json.toString("utf8"));
  assert.equal(doc.defaultContainer, "amnezia-awg");
  assert.equal(doc.hostName, "203.0.113.1");
  assert.equal(doc.description, "Office mesh – phone");
  const last = JSON.parse(doc.containers[0].awg.last_config);
  assert.equal(last.config, awg.text);
  assert.equal(doc.containers[0].awg.protocol_version, "2");

  // The download records the version served, whatever the format.
  const after = await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${phone.node_id}/config`);
  assert.equal(after.json.last_download?.config_version, staged.json.config_version);
});

test("spec §7: an unknown format is VALIDATION_FAILED, and no format opens a node without its token", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { public_address: "203.0.113.1" });
  const path = await downloadPath(h, config.config_id, node.node_id);
  for (const format of ["wg-quick", "AMNEZIAWG", ""]) {
    assertError(await h.req("GET", `${path}&format=${format}`, undefined, { auth: false }), "VALIDATION_FAILED", format);
  }
  const bare = `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/config/download?format=amneziawg`;
  assertError(await h.req("GET", bare, undefined, { auth: false }), "INVALID_DOWNLOAD_TOKEN");
});

test("a hub's config is refused in the Amnezia formats (CONFLICT): the apps cannot run its forwarding", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { tunnel_protocol: "awg_2" });
  const hub = await createNode(h, config.config_id, { name: "gw", public_address: "203.0.113.1", hub: true });
  await createNode(h, config.config_id, { name: "phone" });
  const path = await downloadPath(h, config.config_id, hub.node_id);
  for (const format of ["amneziawg", "amneziavpn"]) {
    const res = await h.req("GET", `${path}&format=${format}`, undefined, { auth: false });
    assertError(res, "CONFLICT", format);
    assert.equal(res.json.error.details?.reason, "host_only_commands");
  }
  assert.equal((await h.req("GET", path, undefined, { auth: false })).status, 200, "the wireguard text still downloads");
});

test("amneziavpn needs one server: a node with two peers with endpoints is refused (CONFLICT needs_one_server)", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  await createNode(h, config.config_id, { public_address: "203.0.113.1" });
  await createNode(h, config.config_id, { public_address: "203.0.113.2" });
  const phone = await createNode(h, config.config_id, { name: "phone" });
  const path = await downloadPath(h, config.config_id, phone.node_id);
  const res = await h.req("GET", `${path}&format=amneziavpn`, undefined, { auth: false });
  assertError(res, "CONFLICT");
  assert.equal(res.json.error.details?.reason, "needs_one_server");
  assert.equal((await h.req("GET", `${path}&format=amneziawg`, undefined, { auth: false })).status, 200);
});

/** `GET …/config/apps` of a node, answered 200. */
async function appConfigs(h: Harness, configId: string, nodeId: string) {
  const res = await h.req("GET", `/api/v1/configs/${configId}/nodes/${nodeId}/config/apps`);
  assert.equal(res.status, 200, res.text);
  return res.json as { config_version: number; config_sha256: string; apps: Array<{ app: string; filename: string; text: string | null; refusal: { reason: string; message: string } | null }> };
}

test("the console's per-app configs are the download formats' bodies: a wireguard phone gets all three apps", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { name: "Office mesh" });
  await createNode(h, config.config_id, { name: "gw", public_address: "203.0.113.1" });
  const phone = await createNode(h, config.config_id, { name: "phone" });
  const answer = await appConfigs(h, config.config_id, phone.node_id);
  assert.deepEqual(answer.apps.map((a) => [a.app, a.filename, a.refusal]), [
    ["wireguard", "Office-mesh-phone.conf", null],
    ["amneziawg", "Office-mesh-phone.conf", null],
    ["amneziavpn", "Office-mesh-phone.vpn", null],
  ]);
  const path = await downloadPath(h, config.config_id, phone.node_id);
  for (const entry of answer.apps) {
    const res = await h.req("GET", `${path}&format=${entry.app}`, undefined, { auth: false });
    assert.equal(res.text, entry.text, `${entry.app}: the same body as the download`);
  }
  const staged = await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${phone.node_id}/config`);
  assert.equal(answer.config_sha256, staged.json.config_sha256);
});

test("the WireGuard app is not offered an awg_2 config (needs_amnezia_app); a full-mesh node is refused by AmneziaVPN only; unknown nodes are 404", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { tunnel_protocol: "awg_2" });
  await createNode(h, config.config_id, { public_address: "203.0.113.1" });
  await createNode(h, config.config_id, { public_address: "203.0.113.2" });
  const phone = await createNode(h, config.config_id, { name: "phone" });
  const answer = await appConfigs(h, config.config_id, phone.node_id);
  assert.deepEqual(answer.apps.map((a) => [a.app, a.refusal?.reason ?? null, a.text === null]), [
    ["wireguard", "needs_amnezia_app", true],
    ["amneziawg", null, false],
    ["amneziavpn", "needs_one_server", true],
  ]);
  assert.match(answer.apps[0]?.refusal?.message ?? "", /AmneziaWG or AmneziaVPN app/);
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/nd_missing/config/apps`), "NOT_FOUND");
});
