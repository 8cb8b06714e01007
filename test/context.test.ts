import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import type { BrokerAdapterFactories } from "../src/mqtt/broker-connection.js";
import { ManualClock } from "../src/lib/clock.js";
import { loadSettings } from "../src/config.js";
import { createLogger } from "../src/logger.js";
import type { BrokerAdmin, NodeBrokerAccount } from "../src/mqtt/broker-admin.js";
import { createServer } from "../src/server.js";

/**
 * The composition root (docs/history/decisions-2026.md "composition root"): the broker adapter comes
 * from a factory keyed by SVC_MQTT_BROKER, and tests replace parts through `overrides`.
 */

function dataDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-context-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A broker admin that records what the service asks of it. */
function recordingAdmin(kind: BrokerAdmin["kind"]) {
  const reconciled: Array<{ backend: { username: string }; nodes: NodeBrokerAccount[] }> = [];
  let signal: () => void = () => undefined;
  const firstReconcile = new Promise<void>((resolve) => (signal = resolve));
  const admin: BrokerAdmin = {
    kind,
    putNode: async () => undefined,
    removeNode: async () => undefined,
    kick: async () => undefined,
    reconcile: async (desired) => {
      reconciled.push(desired);
      signal();
      return { upserted: 0, removed: 0 };
    },
    close: async () => undefined,
  };
  return { admin, reconciled, firstReconcile };
}

/** Factories that fail the test when any of them runs. */
function untouchable(calls: string[]): BrokerAdapterFactories {
  const refuse = (kind: string) => async () => {
    calls.push(kind);
    throw new Error(`the ${kind} factory ran`);
  };
  return { embedded: refuse("embedded"), emqx: refuse("emqx"), mosquitto: refuse("mosquitto") };
}

test("spec §1.8: SVC_MQTT_BROKER=emqx builds the broker admin through the emqx factory (replaced via overrides), and the first reconciliation goes to it", async (t) => {
  const settings = loadSettings({
    SVC_DATA_DIR: dataDir(t),
    SVC_ADMIN_PASSWORD: "correct horse battery staple",
    SVC_MQTT_BROKER: "emqx",
    // Nothing listens here: an external broker is never waited for (spec §1.7 last bullet).
    SVC_MQTT_URL: "mqtt://127.0.0.1:9",
    SVC_EMQX_API_URL: "http://127.0.0.1:9",
    SVC_EMQX_API_KEY: "k",
    SVC_EMQX_API_SECRET: "s",
  });
  const fake = recordingAdmin("emqx");
  const given: string[] = [];
  const calls: string[] = [];
  const server = await createServer(settings, createLogger("silent"), {
    clock: new ManualClock(),
    brokerAdapters: {
      ...untouchable(calls),
      emqx: async (deps) => {
        given.push(deps.settings.mqttBroker);
        return { broker: null, admin: fake.admin };
      },
    },
  });
  t.after(() => server.close());

  assert.deepEqual(given, ["emqx"], "the emqx factory ran once, with the settings");
  assert.deepEqual(calls, [], "no other broker kind was built");
  assert.equal(server.mqtt.broker, null, "an external broker has no embedded instance");
  assert.equal(server.mqtt.sync?.admin, fake.admin, "the account sync drives the factory's admin");
  await fake.firstReconcile;
  assert.equal(fake.reconciled[0]?.backend.username, settings.mqttBackendUsername);
  assert.deepEqual(fake.reconciled[0]?.nodes, [], "no node is bound yet");
});

test("spec §1.7: with MQTT services disabled no broker adapter factory runs and no broker connection exists", async (t) => {
  const settings = loadSettings({ SVC_DATA_DIR: dataDir(t), SVC_ADMIN_PASSWORD: "correct horse battery staple", SVC_ENABLE_MQTT_SERVICES: "false" });
  const calls: string[] = [];
  const server = await createServer(settings, createLogger("silent"), { clock: new ManualClock(), brokerAdapters: untouchable(calls) });
  t.after(() => server.close());

  assert.deepEqual(calls, []);
  assert.equal(server.mqtt.broker, null);
  assert.equal(server.mqtt.sync, null);
  assert.equal((await server.systemStatus()).services.mqtt.connected, false);
});

test("a broker adapter that fails at start-up fails createServer with its error, and the data directory opens again afterwards", async (t) => {
  const dir = dataDir(t);
  const settings = loadSettings({ SVC_DATA_DIR: dir, SVC_ADMIN_PASSWORD: "correct horse battery staple" });
  const calls: string[] = [];
  await assert.rejects(
    createServer(settings, createLogger("silent"), { clock: new ManualClock(), brokerAdapters: untouchable(calls) }),
    /the embedded factory ran/,
  );
  assert.deepEqual(calls, ["embedded"], "SVC_MQTT_BROKER defaults to embedded");
  // The parts started before it were closed on the way out; the data directory opens again, with the admin set above.
  const again = await createServer({ ...settings, mqttEnabled: false }, createLogger("silent"), { clock: new ManualClock() });
  t.after(() => again.close());
  assert.equal(again.generatedAdminPassword, null);
});

test("every app event has exactly the listeners that react to it (notifier, control, metrics; the broker link also the outage resync and the alert rules, mesh changes also the alert rules), once the server is built", async (t) => {
  const settings = loadSettings({ SVC_DATA_DIR: dataDir(t), SVC_ADMIN_PASSWORD: "correct horse battery staple", SVC_ENABLE_MQTT_SERVICES: "false" });
  const server = await createServer(settings, createLogger("silent"), { clock: new ManualClock() });
  t.after(() => server.close());
  const names = ["node.status_changed", "node.config_push_requested", "control.log", "command.finished", "mesh.changed", "broker.connection_changed"] as const;
  assert.deepEqual(
    names.map((name) => [name, server.events.listenerCount(name)]),
    // The broker link's changes: the notifier (system status), the outage resync (presence after an outage) and the alert rules.
    // Mesh changes: the notifier and the alert rules (mesh pairs turning broken).
    names.map((name) => [name, name === "broker.connection_changed" ? 3 : name === "mesh.changed" ? 2 : 1]),
  );
  // metrics counts a closed command from the event alone
  server.events.emit("command.finished", "start", "applied");
  assert.match(await server.metrics.render(), /svc_commands_total\{action="start",status="applied"\} 1/);
});
