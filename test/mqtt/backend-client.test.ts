import assert from "node:assert/strict";
import { createServer, type AddressInfo } from "node:net";
import { test } from "node:test";
import { Aedes, type Client, type Subscription } from "aedes";
import { createLogger } from "../../src/logger.js";
import { backendClientId, BackendMqttClient } from "../../src/mqtt/backend-client.js";
import { backendSubscriptions } from "../../src/protocol/topics.js";
import { until } from "./mosquitto-harness.js";

/**
 * The backend's MQTT client to an external broker (src/mqtt/backend-client.ts, spec §6.4 rule
 * 10), against a real aedes broker on loopback whose subscription hook the test holds: the
 * service counts as connected once its subscriptions are granted (SUBACK), not at CONNACK — in
 * between, an agent's message would reach no subscriber — and it keeps one persistent session
 * under a fixed client id, so a broker that keeps sessions queues what it misses.
 */

interface HeldBroker {
  url: string;
  /** Subscriptions waiting for the test to grant them. */
  held: Array<() => void>;
  clients: Client[];
}

async function heldBroker(t: { after(fn: () => Promise<void> | void): void }): Promise<HeldBroker> {
  const held: Array<() => void> = [];
  const clients: Client[] = [];
  const broker = await Aedes.createBroker({
    authorizeSubscribe: (_client: Client | null, sub: Subscription, cb: (err: Error | null, sub: Subscription | null) => void) => {
      held.push(() => cb(null, sub));
    },
  });
  broker.on("client", (client) => clients.push(client));
  const server = createServer(broker.handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(async () => {
    await new Promise<void>((resolve) => broker.close(() => resolve()));
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `mqtt://127.0.0.1:${(server.address() as AddressInfo).port}`, held, clients };
}

test("spec §1.8, §6.4 rule 10: the backend reports connected only after the SUBACK granting its subscriptions, not at CONNACK; publishes are refused until then", async (t) => {
  const b = await heldBroker(t);
  let connects = 0;
  const client = BackendMqttClient.start({
    url: b.url,
    username: "svc-backend",
    password: "a backend password",
    log: createLogger("silent"),
    onMessage: () => {},
    onConnect: () => void connects++,
    reconnectMinMs: 50,
  });
  t.after(() => client.close());
  // The SUBSCRIBE arrived: the CONNACK was sent before it.
  await until("the backend's subscriptions at the broker", () => b.held.length === backendSubscriptions().length);
  assert.equal(client.connected, false, "CONNACK alone is not connected");
  assert.equal(connects, 0, "onConnect waits for the SUBACK");
  await assert.rejects(
    client.publish("svc/c/n/detect", { type: "detect", request_id: "r", config_id: "c", node_id: "n", boot_id: "", session_id: "", sent_at: "2026-01-01T00:00:00.000Z", payload: {} }),
    /not connected/,
  );

  for (const grant of b.held) grant();
  await until("connected after the SUBACK", () => client.connected);
  assert.equal(connects, 1);
});

test("the backend keeps one persistent session: a fixed client id derived from its user (never a node's client id) and clean session off", async (t) => {
  const b = await heldBroker(t);
  const client = BackendMqttClient.start({ url: b.url, username: "svc-backend", password: "a backend password", log: createLogger("silent"), onMessage: () => {} });
  t.after(() => client.close());
  await until("the backend's CONNECT", () => b.clients.length > 0);
  const seen = b.clients[0];
  assert.ok(seen);
  assert.equal(seen.id, backendClientId("svc-backend"));
  assert.equal(seen.id, "svc:backend:svc-backend");
  assert.equal(seen.clean, false);
});
