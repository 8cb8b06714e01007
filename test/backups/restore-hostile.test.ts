import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import mqtt from "mqtt";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { nodeClientId, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { createServer, type AppContext } from "../../src/server.js";
import { ADMIN_PASSWORD, assertError, createConfig, createNode, injectJson, type Res } from "../http/harness.js";
import { assertHttpError, buildZip, importAndRestore, importZip, packSnapshot, snapshotDb, startBackupsHarness, unzip, type BackupsHarness } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * A snapshot is input from whoever handed the operator the zip.
 * Its manifest digest is written by that author, so nothing in it is trusted: every row is
 * checked with the API's rules before anything is written, configs are re-rendered, broker
 * credentials and machine snapshots are dropped (docs/history/decisions-2026.md "snapshot restore").
 */

const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** A machine snapshot shaped like XState's but in a state the node machine does not have: trusted, it would break restore and every later start. */
const CRAFTED_MACHINE = JSON.stringify({ status: "active", value: { x: "y" }, context: { lastSignalAt: null } });

/** An edited copy of a database (in memory; the input is not changed). */
function tamper(db: Buffer, edit: (d: SQLite.Database) => void): Buffer {
  const d = new SQLite(db);
  try {
    // A hostile author's own SQLite need not honour CHECK constraints.
    d.pragma("ignore_check_constraints = ON");
    edit(d);
    return Buffer.from(d.serialize());
  } finally {
    d.close();
  }
}

/** A real service over `dataDir` (its own lifecycle: closed once, by the test or after it). */
async function boot(t: TestContext, dataDir: string, lines: string[] = []): Promise<{ server: AppContext; req(method: string, url: string): Promise<Res>; close(): Promise<void> }> {
  const log = createLogger("info", { write: (line: string) => void lines.push(line) });
  const server = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD }), log, { clock: new ManualClock() });
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= server.close());
  t.after(close);
  const login = await injectJson(server, {
    method: "POST",
    url: "/api/v1/auth/login",
    headers: { "content-type": "application/json" },
    payload: JSON.stringify({ password: ADMIN_PASSWORD }),
  });
  assert.equal(login.status, 200, login.text);
  const token = login.json.access_token as string;
  return { server, close, req: (method, url) => injectJson(server, { method, url, headers: { authorization: `Bearer ${token}` } }) };
}

test("spec §2.4: a crafted machine_snapshot cannot break restore or any later start; the node is projected from its columns", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-hostile-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const h = await startBackupsHarness(t, { dataDir });
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { mode: "dynamic" });
  const other = await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const db = tamper(await snapshotDb(h), (d) =>
    d.prepare("UPDATE node_client_state SET machine_snapshot = ?, machine_version = 1 WHERE node_id = ?").run(CRAFTED_MACHINE, node.node_id),
  );

  await importAndRestore(h, db);

  const stored = sqliteOf(h.server.store).prepare("SELECT machine_snapshot FROM node_client_state WHERE node_id = ?").get(node.node_id) as { machine_snapshot: string | null };
  assert.ok(!stored.machine_snapshot?.includes('"x":"y"'), "the snapshot's machine state is not kept");
  const p = h.server.registry.projection(config.config_id, node.node_id);
  assert.ok(p, "the node is under management");
  assert.equal(p.mode, "dynamic");
  assert.equal(p.presence, "offline");
  assert.equal(p.clientInitialized, false);
  assert.equal((await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}`)).status, 200);

  // The next start over the same data directory works and serves both nodes.
  await h.server.close();
  const again = await boot(t, dataDir);
  assert.equal(again.server.registry.has(config.config_id, node.node_id), true);
  assert.equal((await again.req("GET", `/api/v1/configs/${config.config_id}/nodes/${other.node_id}/config`)).status, 200);
  await again.close();
});

test("spec §2.4/§6.3: a staged config text with PostUp from a snapshot is never served; every config is re-rendered from the restored inputs", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h, { network_cidr: "10.40.0.0/24" });
  const a = await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const b = await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const url = (n: { node_id: string }) => `/api/v1/configs/${config.config_id}/nodes/${n.node_id}/config`;
  const before = { a: (await h.req("GET", url(a))).json, b: (await h.req("GET", url(b))).json };
  const evil = "PostUp = touch /tmp/svc-pwned";
  const db = tamper(await snapshotDb(h), (d) => {
    // a: the text and its sha both updated, in the node and on the text (a consistent forgery);
    // b: the text alone (its labels still name the renderer's sha).
    const textA = `${before.a.config_text}${evil}\n`;
    d.prepare("UPDATE node_staged_texts SET config_text = ?, config_sha256 = ? WHERE node_id = ?").run(textA, sha256(textA), a.node_id);
    d.prepare("UPDATE nodes SET staged_config_sha256 = ? WHERE node_id = ?").run(sha256(textA), a.node_id);
    d.prepare("UPDATE node_staged_texts SET config_text = ? WHERE node_id = ?").run(`${before.b.config_text}${evil}\n`, b.node_id);
  });

  await importAndRestore(h, db);

  for (const [n, was] of [
    [a, before.a],
    [b, before.b],
  ] as const) {
    const staged = (await h.req("GET", url(n))).json;
    assert.ok(!staged.config_text.includes("PostUp"), `${n.node_id}: no injected line is served`);
    assert.equal(staged.config_text, was.config_text, "the renderer's text for the same inputs");
    assert.equal(staged.config_sha256, sha256(staged.config_text));
    // The download a bound agent or an operator fetches is the same text.
    const grant = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${n.node_id}/download-token`);
    const file = await h.http(grant.json.download_path);
    assert.equal(file.status, 200);
    assert.equal(file.body.toString("utf8"), was.config_text);
  }
  // An untouched node keeps its version; a node whose text was changed gets a new one.
  assert.equal((await h.req("GET", url(b))).json.config_version, before.b.config_version + 1);
});

test("spec §2.4/§5: an MQTT password hash chosen by a snapshot's author opens no broker login; restored dynamic nodes must re-bind", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { mode: "dynamic" });
  const username = nodeUsername(config.config_id, node.node_id);
  const password = "chosen-by-the-snapshot-author";
  const db = tamper(await snapshotDb(h), (d) =>
    d
      .prepare("UPDATE node_client_state SET client_initialized = 1, mqtt_username = ?, mqtt_password_hash = ? WHERE node_id = ?")
      .run(username, sha256(password), node.node_id),
  );

  await importAndRestore(h, db);

  const row = sqliteOf(h.server.store)
    .prepare("SELECT client_initialized, mqtt_username, mqtt_password_hash FROM node_client_state WHERE node_id = ?")
    .get(node.node_id);
  assert.deepEqual(row, { client_initialized: 0, mqtt_username: null, mqtt_password_hash: null });
  const client = mqtt.connect(`mqtt://127.0.0.1:${h.server.mqtt.broker!.port}`, {
    protocolVersion: 4,
    clientId: nodeClientId(config.config_id, node.node_id),
    username,
    password,
    reconnectPeriod: 0,
  });
  t.after(() => client.end(true));
  const outcome = await new Promise<string>((resolve) => {
    client.once("connect", () => resolve("connected"));
    client.once("error", (err) => resolve(`refused: ${err.message}`));
  });
  assert.match(outcome, /^refused/);
});

test("spec §2.4: an interface_name with CR/LF in a snapshot is refused at import naming table, row and field; nothing changes", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id);
  const db = tamper(await snapshotDb(h), (d) =>
    d.prepare("UPDATE nodes SET interface_name = ? WHERE node_id = ?").run("wg0\r\nX-Evil: 1", node.node_id),
  );
  const fp = h.fingerprint();
  const dir = h.snapshotDir();
  const res = await importZip(h, await packSnapshot(db));
  assertHttpError(res, "VALIDATION_FAILED");
  assert.match(res.json.error.message, /nodes/);
  assert.match(res.json.error.message, new RegExp(node.node_id));
  assert.match(res.json.error.message, /interface_name/);
  assert.equal(h.fingerprint(), fp);
  assert.deepEqual(h.snapshotDir(), dir);
});

/** Each edit breaks one rule the API enforces; the refusal names the table and field. */
const BAD_ROWS: Array<{ label: string; table: string; field: string; sql: string }> = [
  { label: "config name with a C1 control", table: "configs", field: "name", sql: "UPDATE configs SET name = 'a\u0085b'" },
  { label: "config name with a newline", table: "configs", field: "name", sql: "UPDATE configs SET name = 'a\nb'" },
  { label: "loopback network", table: "configs", field: "network_cidr", sql: "UPDATE configs SET network_cidr = '127.0.0.0/24'" },
  { label: "unknown tunnel protocol", table: "configs", field: "tunnel_protocol", sql: "UPDATE configs SET tunnel_protocol = 'ipsec'" },
  { label: "awg params not JSON", table: "configs", field: "awg_params", sql: "UPDATE configs SET awg_params = '{'" },
  { label: "interface_name ..", table: "nodes", field: "interface_name", sql: "UPDATE nodes SET interface_name = '..'" },
  { label: "address outside the network", table: "nodes", field: "address", sql: "UPDATE nodes SET address = '10.99.0.5' WHERE rowid = 1" },
  { label: "public address with a space", table: "nodes", field: "public_address", sql: "UPDATE nodes SET public_address = 'a b' WHERE rowid = 1" },
  { label: "listen port 0", table: "nodes", field: "listen_port", sql: "UPDATE nodes SET listen_port = 0 WHERE rowid = 1" },
  { label: "public key not of the private key", table: "nodes", field: "public_key", sql: "UPDATE nodes SET public_key = (SELECT public_key FROM nodes WHERE rowid = 2) WHERE rowid = 1" },
  { label: "private key not a key", table: "nodes", field: "private_key", sql: "UPDATE nodes SET private_key = 'x' WHERE rowid = 1" },
  { label: "forward id with upper case", table: "port_forwards", field: "forward_id", sql: "UPDATE port_forwards SET forward_id = 'FWD-1'" },
  { label: "tag with a space", table: "node_tags", field: "tag", sql: "INSERT INTO node_tags (node_id, tag) SELECT node_id, 'a b' FROM nodes WHERE rowid = 1" },
  { label: "runtime state unknown to the spec", table: "node_client_state", field: "runtime_state", sql: "UPDATE node_client_state SET runtime_state = 'exploded'" },
  { label: "pair not in node order", table: "mesh_pairs", field: "node_a", sql: "INSERT INTO mesh_pairs (pair_id, config_id, node_a, node_b, enabled, created_at, updated_at) SELECT 'pair-swapped', config_id, max(node_id), min(node_id), 1, 0, 0 FROM nodes" },
  { label: "removal not in node order", table: "mesh_pair_removals", field: "node_a", sql: "INSERT INTO mesh_pair_removals (node_a, node_b, config_id) SELECT max(node_id), min(node_id), config_id FROM nodes" },
  { label: "port forward target not IPv4", table: "port_forwards", field: "target_address", sql: "UPDATE port_forwards SET target_address = '1.2.3.4; reboot'" },
  { label: "control log kind", table: "control_logs", field: "kind", sql: "INSERT INTO control_logs (node_id, config_id, kind, created_at, updated_at) SELECT node_id, config_id, 'shell', 0, 0 FROM nodes WHERE rowid = 1" },
];

test("spec §2.4: every table of a snapshot is validated row by row with the API's rules; a refusal names table, row and field and writes nothing", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h, { network_cidr: "10.50.0.0/24" });
  const a = await createNode(h, config.config_id, { public_address: "192.0.2.1", listen_port: 51820 });
  const b = await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const pf = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/port-forwards`, {
    protocol: "tcp",
    listen_port: 8443,
    target_address: b.address,
    target_port: 443,
  });
  assert.equal(pf.status, 201, pf.text);
  const good = await snapshotDb(h);
  // The untouched snapshot is accepted (the rules do not refuse what the API wrote).
  const ok = await importZip(h, await packSnapshot(good));
  assert.equal(ok.status, 201, ok.body.toString("utf8"));
  const fp = h.fingerprint();
  for (const bad of BAD_ROWS) {
    const db = tamper(good, (d) => d.exec(bad.sql));
    const dir = h.snapshotDir();
    const res = await importZip(h, await packSnapshot(db));
    assertHttpError(res, "VALIDATION_FAILED", bad.label);
    if (process.env.SHOW_REFUSALS) console.log(bad.label, "->", res.json.error.message);
    assert.match(res.json.error.message, new RegExp(`\\b${bad.table}\\b`), `${bad.label}: names the table`);
    assert.match(res.json.error.message, new RegExp(`\\b${bad.field}\\b`), `${bad.label}: names the field`);
    assert.deepEqual(h.snapshotDir(), dir, `${bad.label}: nothing stored`);
  }
  assert.equal(h.fingerprint(), fp);
});

test("spec §2.4: restore is atomic — a stored snapshot replaced on disk by a hostile one is refused and the live data and actors are untouched", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id);
  const snap = (await h.req("POST", "/api/v1/backups")).json;
  const zipPath = join(h.dataDir, "snapshots", `${snap.snapshot_id}.zip`);
  const db = tamper((await unzip(readFileSync(zipPath))).get("svc.db")!, (d) =>
    d.prepare("UPDATE nodes SET interface_name = ? WHERE node_id = ?").run("wg0\nPostUp = reboot", node.node_id),
  );
  writeFileSync(zipPath, await packSnapshot(db));
  await createNode(h, config.config_id);
  const fp = h.fingerprint();
  const actors = h.server.registry.size;
  const res = await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`);
  assertError(res, "VALIDATION_FAILED");
  assert.match(res.json.error.message, /interface_name/);
  assert.equal(h.fingerprint(), fp);
  assert.equal(h.server.registry.size, actors);
});

/** Overwrites the CRC-32 of an entry in its local header (+14) and central directory record (+16). */
function wrongCrc(zip: Buffer, name: string): Buffer {
  const out = Buffer.from(zip);
  const nameBuf = Buffer.from(name);
  let patched = 0;
  for (let i = 0; i + 46 <= out.length; i++) {
    const sig = out.readUInt32LE(i);
    if (sig === 0x04034b50 && out.subarray(i + 30, i + 30 + out.readUInt16LE(i + 26)).equals(nameBuf)) {
      out.writeUInt32LE((out.readUInt32LE(i + 14) ^ 0x5a5a5a5a) >>> 0, i + 14);
      patched++;
    } else if (sig === 0x02014b50 && out.subarray(i + 46, i + 46 + out.readUInt16LE(i + 28)).equals(nameBuf)) {
      out.writeUInt32LE((out.readUInt32LE(i + 16) ^ 0x5a5a5a5a) >>> 0, i + 16);
      patched++;
    }
  }
  assert.equal(patched, 2);
  return out;
}

test("spec §2.4: a zip entry whose data does not match its CRC-32 is refused at import (stored or deflated) and nothing is stored", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h);
  await createNode(h, config.config_id);
  const db = await snapshotDb(h);
  const dir = h.snapshotDir();
  for (const entry of ["svc.db", "manifest.json"]) {
    for (const compress of [true, false]) {
      const manifest = { format: 1, version: "0.1.0", created_at: "2026-01-01T00:00:00.000Z", db_sha256: sha256(db), db_size_bytes: db.length };
      const zip = await buildZip([
        { name: "manifest.json", data: Buffer.from(JSON.stringify(manifest)), compress },
        { name: "svc.db", data: db, compress },
      ]);
      const res = await importZip(h, wrongCrc(zip, entry));
      assertHttpError(res, "VALIDATION_FAILED", `${entry} compress=${compress}`);
      assert.match(res.json.error.message, /CRC-32/i);
      assert.deepEqual(h.snapshotDir(), dir);
    }
  }
});

test("spec §2.4: at cold start a node whose stored state cannot be restored is quarantined with an error log naming it; the other nodes serve", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-quarantine-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await boot(t, dataDir);
  const token = (
    await injectJson(first.server, {
      method: "POST",
      url: "/api/v1/auth/login",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ password: ADMIN_PASSWORD }),
    })
  ).json.access_token as string;
  const post = (url: string, body: unknown) =>
    injectJson(first.server, { method: "POST", url, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, payload: JSON.stringify(body) });
  const config = (await post("/api/v1/configs", { name: "office", tunnel_protocol: "wireguard", network_cidr: "10.60.0.0/24" })).json;
  const node = async (name: string) => {
    const res = await post(`/api/v1/configs/${config.config_id}/nodes`, { name, mode: "dynamic", public_address: "192.0.2.1" });
    assert.equal(res.status, 201, res.text);
    return res.json.node_id as string;
  };
  const good = await node("good");
  const badIds = [await node("crafted"), await node("garbage"), await node("unknown-state"), await node("other-node"), await node("bad-context")];
  await first.close();

  // Bad rows written straight into the real SQLite file; the good node's own stored snapshot is
  // the template of the subtler ones.
  const file = new SQLite(join(dataDir, "svc.db"));
  const stored = JSON.parse(
    (file.prepare("SELECT machine_snapshot FROM node_client_state WHERE node_id = ?").get(good) as { machine_snapshot: string }).machine_snapshot,
  ) as { value: Record<string, unknown>; context: Record<string, unknown> };
  /** The good node's stored snapshot made the bad node's own, with one defect. */
  const variant = (nodeId: string, edit: (v: typeof stored) => void) => {
    const copy = structuredClone(stored);
    copy.context.nodeId = nodeId;
    edit(copy);
    return JSON.stringify(copy);
  };
  const bad = [
    CRAFTED_MACHINE, // a state the machine does not have
    "{not json",
    variant(badIds[2]!, (v) => (v.value.presence = "teleported")),
    variant(badIds[3]!, (v) => (v.context.nodeId = good)), // another node's state
    variant(badIds[4]!, (v) => (v.context.stagedVersion = "many")),
  ];
  const set = file.prepare("UPDATE node_client_state SET machine_snapshot = ?, machine_version = 1 WHERE node_id = ?");
  bad.forEach((json, i) => set.run(json, badIds[i]));
  file.close();

  const lines: string[] = [];
  const second = await boot(t, dataDir, lines);
  assert.equal(second.server.registry.has(config.config_id, good), true, "the good node serves");
  assert.deepEqual(
    second.server.registry
      .quarantined()
      .map((q) => q.nodeId)
      .sort(),
    [...badIds].sort(),
  );
  for (const id of badIds) assert.equal(second.server.registry.has(config.config_id, id), false, "a quarantined node has no actor");
  assert.equal((await second.req("GET", `/api/v1/configs/${config.config_id}/nodes/${good}/config`)).status, 200);
  assert.equal((await second.req("GET", `/api/v1/configs/${config.config_id}/nodes/${good}/endpoint-status`)).status, 200);
  // A quarantined node's REST reads answer from its columns.
  assert.equal((await second.req("GET", `/api/v1/configs/${config.config_id}/nodes/${badIds[0]}/endpoint-status`)).status, 200);
  const errors = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.level === 50);
  for (const id of badIds) {
    const logged = errors.find((l) => l.node_id === id);
    assert.ok(logged, `an error line names ${id}; got ${JSON.stringify(errors)}`);
    assert.equal(logged.config_id, config.config_id);
    assert.match(String(logged.msg), /quarantined/);
    if (process.env.SHOW_REFUSALS) console.log(id, logged.reason);
    assert.equal(typeof logged.reason, "string");
  }
});

test("spec §2.4/§4 rule 12: a client bound before a restore is cut off and its broker password stops working; the node re-binds", { timeout: 20_000 }, async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { mode: "dynamic" });
  const snap = (await h.req("POST", "/api/v1/backups")).json;
  const cmd = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/bind-command`);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  assert.ok(token, cmd.text);
  const bound = await h.http("/api/client/bind", {
    method: "POST",
    body: JSON.stringify({ bind_token: token, server_url: h.baseUrl, client_version: "1.2.3", platform: "linux", hostname: "edge-1" }),
    headers: { "content-type": "application/json" },
  });
  assert.equal(bound.status, 200, bound.body.toString("utf8"));
  const login = () =>
    mqtt.connect(`mqtt://127.0.0.1:${h.server.mqtt.broker!.port}`, {
      protocolVersion: 4,
      clientId: bound.json.mqtt.client_id,
      username: bound.json.mqtt.username,
      password: bound.json.mqtt.password,
      reconnectPeriod: 0,
    });
  const client = login();
  t.after(() => client.end(true));
  await new Promise<void>((resolve, reject) => {
    client.once("connect", () => resolve());
    client.once("error", reject);
  });
  const closed = new Promise<void>((resolve) => client.once("close", () => resolve()));

  const restored = await h.req("POST", `/api/v1/backups/${snap.snapshot_id}/restore`);
  assert.equal(restored.status, 200, restored.text);
  await closed; // the broker cut the live connection

  const again = login();
  t.after(() => again.end(true));
  const outcome = await new Promise<string>((resolve) => {
    again.once("connect", () => resolve("connected"));
    again.once("error", (err) => resolve(`refused: ${err.message}`));
  });
  assert.match(outcome, /^refused/);
  assert.equal(h.server.registry.projection(config.config_id, node.node_id)?.clientInitialized, false);
});

test("spec §2.4: a snapshot whose rows pass one by one but whose configs cannot be rendered is refused at import, naming the config", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h);
  const a = await createNode(h, config.config_id, { public_address: "192.0.2.1", listen_port: 51820 });
  const b = await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const pf = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${a.node_id}/port-forwards`, {
    protocol: "udp",
    listen_port: 5353,
    target_address: b.address,
    target_port: 53,
  });
  assert.equal(pf.status, 201, pf.text);
  // A UDP forward on the node's own WireGuard port: each row is fine, the config is not.
  const db = tamper(await snapshotDb(h), (d) => d.prepare("UPDATE port_forwards SET listen_port = 51820").run());
  const dir = h.snapshotDir();
  const res = await importZip(h, await packSnapshot(db));
  assertHttpError(res, "VALIDATION_FAILED");
  assert.match(res.json.error.message, /table configs/);
  assert.match(res.json.error.message, new RegExp(config.config_id));
  assert.deepEqual(h.snapshotDir(), dir);
});
