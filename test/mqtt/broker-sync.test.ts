import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import mqtt from "mqtt";
import { createLogger } from "../../src/logger.js";
import { BrokerPasswordVault, KEY_FILE_NAME } from "../../src/mqtt/broker-passwords.js";
import { scrubDatabaseCopy } from "../../src/services/snapshots.js";
import { Store } from "../../src/store/db.js";
import type { BrokerAdmin, NodeBrokerAccount } from "../../src/mqtt/broker-admin.js";
import { BrokerSync } from "../../src/mqtt/broker-sync.js";
import { api, bind, dynamicNode as embeddedDynamicNode } from "../control/agent-harness.js";
import { startSseServer } from "../events/sse-harness.js";
import { bindNode, dynamicNode, mosquitto, mosquittoSettings, startService, tempDataDir, until, type MosquittoBroker } from "./mosquitto-harness.js";

const log = createLogger("silent");

test("sealed broker passwords: AES-256-GCM under a key file (mode 0600) made at the first seal; another user, another key or altered text does not open (docs/history/decisions-2026.md \"Broker passwords (the sealed copy) and the threat model\")", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-vault-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const vault = new BrokerPasswordVault(dir, log);
  assert.equal(vault.open("n:c:a", "v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA.AAAA"), undefined, "no key file: nothing opens");
  assert.equal(existsSync(join(dir, KEY_FILE_NAME)), false, "opening never creates the key");
  const sealed = vault.seal("n:c:a", "the-password");
  assert.equal(statSync(join(dir, KEY_FILE_NAME)).mode & 0o777, 0o600);
  assert.doesNotMatch(sealed, /the-password/);
  assert.notEqual(vault.seal("n:c:a", "the-password"), sealed, "a fresh IV each time");
  assert.equal(vault.open("n:c:a", sealed), "the-password");
  assert.equal(new BrokerPasswordVault(dir, log).open("n:c:a", sealed), "the-password", "another process with the same key file");
  assert.equal(vault.open("n:c:b", sealed), undefined, "the username is authenticated");
  const tampered = sealed.slice(0, -2) + (sealed.endsWith("A") ? "BB" : "AA");
  assert.equal(vault.open("n:c:a", tampered), undefined);
  const other = mkdtempSync(join(tmpdir(), "svc-vault-"));
  t.after(() => rmSync(other, { recursive: true, force: true }));
  assert.equal(new BrokerPasswordVault(other, log).open("n:c:a", sealed), undefined, "no key there");
  new BrokerPasswordVault(other, log).seal("n:c:a", "x");
  assert.equal(new BrokerPasswordVault(other, log).open("n:c:a", sealed), undefined, "another key");
  writeFileSync(join(other, KEY_FILE_NAME), "not a key\n");
  assert.throws(() => new BrokerPasswordVault(other, log).seal("n:c:a", "x"), /malformed|must hold/);
});

test("a snapshot copy carries no sealed broker password (scrubbed like the other secrets)", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-scrub-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "svc.db");
  const store = await Store.open(file, log);
  await store.db.insertInto("broker_credentials").values({ mqtt_username: "n:c:a", password_sealed: "v1.x.y.z", updated_at: 1 }).execute();
  await store.close();
  const copy = join(dir, "copy.db");
  copyFileSync(file, copy);
  scrubDatabaseCopy(copy);
  const scrubbed = await Store.open(copy, log);
  t.after(() => scrubbed.close());
  assert.deepEqual(await scrubbed.db.selectFrom("broker_credentials").selectAll().execute(), []);
});

test("key file lost: bound nodes are not provisioned, logged and left as the broker holds them; a rebind provisions again; reset drops the sealed copy (spec §1.8, §4 rules 11-12)", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const dataDir = tempDataDir();
  const first = await startService(t, mosquittoSettings(m, dataDir));
  await until("first reconciliation", () => (first.server.mqtt.sync?.state().reconciled ?? 0) > 0);
  const a = await dynamicNode(first, "edge-a");
  const b = await dynamicNode(first, "edge-b");
  const pa = await bindNode(first, a.configId, a.nodeId);
  const pb = await bindNode(first, b.configId, b.nodeId);
  assert.equal(await accepted(m, pa), true);
  await first.close();

  rmSync(join(dataDir, KEY_FILE_NAME));
  const second = await startService(t, mosquittoSettings(m, dataDir));
  const sync = second.server.mqtt.sync!;
  await until("reconciled without the key", () => sync.state().reconciled > 0);
  assert.equal(sync.state().unprovisionable, 2);
  await sync.idle();
  assert.deepEqual(sync.state().totals, { upserted: 0, removed: 0 }, "their accounts are neither rewritten nor removed");
  assert.equal(await accepted(m, pa), true, "A's broker account still works");

  const pa2 = await bindNode(second, a.configId, a.nodeId);
  assert.equal(await accepted(m, pa2), true, "the rebind provisioned A under the new key");
  assert.equal(await accepted(m, pa), false, "and rotated its old password away");
  const reset = await second.api("POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/reset-client`);
  assert.equal(reset.status, 200);
  await until("B's account removed", async () => !(await accepted(m, pb)));
  const rows = await second.server.store.db.selectFrom("broker_credentials").select("mqtt_username").execute();
  assert.deepEqual(rows.map((r) => r.mqtt_username), [pa2.mqtt.username], "only A's sealed password is kept");
  const before = sync.state().reconciled;
  sync.requestReconcile("test");
  await until("reconciled again", () => sync.state().reconciled > before);
  assert.equal(sync.state().unprovisionable, 0);
});

async function accepted(m: MosquittoBroker, p: Awaited<ReturnType<typeof bindNode>>): Promise<boolean> {
  const c = mqtt.connect(m.url, { protocolVersion: 4, clientId: p.mqtt.client_id, username: p.mqtt.username, password: p.mqtt.password, reconnectPeriod: 0, connectTimeout: 5000 });
  try {
    await new Promise<void>((resolve, reject) => {
      c.once("connect", () => resolve());
      c.once("error", reject);
    });
    return true;
  } catch {
    return false;
  } finally {
    c.end(true);
  }
}

/** An adapter that records what reached the broker, in order (the sync's decisions, not the broker's). */
function recordingAdmin(): BrokerAdmin & { calls: string[] } {
  const calls: string[] = [];
  return {
    kind: "mosquitto",
    calls,
    putNode: async (a: NodeBrokerAccount) => void calls.push(`put ${a.username} ${a.password.slice(0, 6)}`),
    removeNode: async (username: string) => void calls.push(`remove ${username}`),
    kick: async (clientId: string) => void calls.push(`kick ${clientId}`),
    reconcile: async () => ({ upserted: 0, removed: 0 }),
    close: async () => undefined,
  };
}

test("spec §4 rules 11-12, §3.1 dynamic → static: a put or removal reaching the queue after a later commit follows the store at its turn (a put the store no longer holds is skipped; a removal of a node bound again is left to the new put)", async (t) => {
  const s = await startSseServer(t);
  const admin = recordingAdmin();
  const sync = new BrokerSync({ admin, store: s.server.store, vault: new BrokerPasswordVault(tempDataDir(), log), backend: { username: "svc-backend", password: "x" }, log });
  t.after(() => sync.close());
  const { configId, nodeId } = await embeddedDynamicNode(s);
  const base = `/api/v1/configs/${configId}/nodes/${nodeId}`;
  const first = await bind(s, configId, nodeId);
  const account = (password: string): NodeBrokerAccount => ({ configId, nodeId, username: first.mqtt.username, clientId: first.mqtt.client_id, password });
  await sync.putNode(account(first.mqtt.password));
  assert.deepEqual(admin.calls, [`put ${first.mqtt.username} ${first.mqtt.password.slice(0, 6)}`], "the binding the store holds is put");

  assert.equal((await api(s, "PATCH", base, { mode: "static" })).status, 200);
  admin.calls.length = 0;
  await sync.putNode(account(first.mqtt.password));
  assert.deepEqual(admin.calls, [], "a bind's put queued after the node became static is skipped");
  await sync.removeNode(configId, nodeId);
  assert.deepEqual(admin.calls, [`remove ${first.mqtt.username}`]);

  assert.equal((await api(s, "PATCH", base, { mode: "dynamic" })).status, 200);
  const second = await bind(s, configId, nodeId);
  admin.calls.length = 0;
  await sync.removeNode(configId, nodeId);
  await sync.putNode(account(first.mqtt.password));
  assert.deepEqual(admin.calls, [], "an older removal and the older password's put change nothing once the node is bound again");
  await sync.putNode(account(second.mqtt.password));
  assert.deepEqual(admin.calls, [`put ${first.mqtt.username} ${second.mqtt.password.slice(0, 6)}`]);
});

test("broker settings (DESIGN §6, spec §1.9): external brokers need their admin credentials, in one line; defaults", async () => {
  const { loadSettings, SettingsError } = await import("../../src/config.js");
  const embedded = loadSettings({});
  assert.equal(embedded.mqttBroker, "embedded");
  assert.equal(embedded.mqttUrl, "mqtt://emqx-host:1883");
  assert.equal(embedded.mqttPublicPort, undefined, "the embedded broker's own port");
  const mosq = loadSettings({ SVC_MQTT_BROKER: "mosquitto", SVC_MQTT_URL: "mqtts://broker:8883", SVC_MOSQUITTO_ADMIN_PASSWORD: "admin-pw" });
  assert.deepEqual([mosq.mqttUrl, mosq.mqttPublicPort, mosq.mosquittoAdminUsername], ["mqtts://broker:8883", 1883, "svc-admin"]);
  const refused = (env: Record<string, string>, re: RegExp) =>
    assert.throws(() => loadSettings(env), (err: Error) => err instanceof SettingsError && re.test(err.message) && !err.message.includes("\n"));
  refused({ SVC_MQTT_BROKER: "emqx" }, /SVC_EMQX_API_URL: required when SVC_MQTT_BROKER=emqx/);
  refused({ SVC_MQTT_BROKER: "emqx", SVC_EMQX_API_URL: "http://emqx:18083", SVC_EMQX_API_KEY: "k" }, /SVC_EMQX_API_SECRET/);
  refused({ SVC_MQTT_BROKER: "mosquitto" }, /SVC_MOSQUITTO_ADMIN_PASSWORD: required/);
  refused({ SVC_MQTT_BROKER: "mosquitto", SVC_MOSQUITTO_ADMIN_PASSWORD: "x", SVC_MOSQUITTO_ADMIN_USERNAME: "svc-backend" }, /must differ/);
  refused({ SVC_MQTT_BROKER: "hivemq" }, /SVC_MQTT_BROKER: must be embedded, emqx or mosquitto/);
  refused({ SVC_MQTT_URL: "http://broker:1883" }, /SVC_MQTT_URL/);
  const emqx = loadSettings({ SVC_MQTT_BROKER: "emqx", SVC_EMQX_API_URL: "http://emqx:18083/", SVC_EMQX_API_KEY: "k", SVC_EMQX_API_SECRET: "s" });
  assert.equal(emqx.emqxApiUrl, "http://emqx:18083");
});
