import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { test, type TestContext } from "node:test";
import { Aedes } from "aedes";
import mqtt, { type MqttClient } from "mqtt";
import { aedesClients, onAedesError, rearmMqttReconnect } from "../../src/mqtt/lib-internals.js";

// The private internals of aedes and MQTT.js that src/mqtt/lib-internals.ts relies on, checked
// against the real libraries: an upgrade that renames or changes one fails here. Real sockets on
// port 0; every wait is for an event, bounded by the test timeout; nothing sleeps.

const LONG_PERIOD_MS = 60_000;

/** A TCP server that counts connections and hangs each up at once (no CONNACK). */
async function hangUpServer(t: TestContext): Promise<{ port: number; server: Server; connections: () => number }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.destroy();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return { port: (server.address() as AddressInfo).port, server, connections: () => connections };
}

/** Resolves on the client's next `event`. */
function next(client: MqttClient, event: "close" | "reconnect" | "connect"): Promise<void> {
  return new Promise((resolve) => client.once(event, () => resolve()));
}

/** A real aedes broker listening on a free port, closed after the test. */
async function aedesOnPort(t: TestContext): Promise<{ broker: Aedes; port: number }> {
  const broker = await Aedes.createBroker();
  const server = createServer(broker.handle);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  t.after(() => {
    server.close();
    broker.close();
  });
  return { broker, port: (server.address() as AddressInfo).port };
}

function clientOf(t: TestContext, port: number, reconnectPeriod: number): MqttClient {
  const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, { protocolVersion: 4, reconnectPeriod, connectTimeout: 30_000 });
  client.on("error", () => {});
  t.after(() => client.end(true));
  return client;
}

test("MQTT.js internals: after a failed attempt `reconnectTimer` is armed; rearmMqttReconnect replaces it with the shorter period, and the next attempt comes that soon", { timeout: 10_000 }, async (t) => {
  const hangUp = await hangUpServer(t);
  const client = clientOf(t, hangUp.port, LONG_PERIOD_MS);
  assert.equal(typeof (client as unknown as Record<string, unknown>)._setupReconnect, "function");
  assert.equal(typeof (client as unknown as Record<string, unknown>)._clearReconnect, "function");
  assert.ok("reconnectTimer" in client, "MQTT.js keeps the pending attempt in `reconnectTimer`");

  await next(client, "close");
  assert.equal(hangUp.connections(), 1);
  assert.ok((client as unknown as { reconnectTimer: unknown }).reconnectTimer, "a failed attempt arms the reconnect timer");

  // With the 60 s period nothing would come within the test timeout: the re-armed 20 ms one must.
  assert.equal(rearmMqttReconnect(client, 20), true);
  assert.equal(client.options.reconnectPeriod, 20);
  await next(client, "reconnect");
  await next(client, "close");
  assert.equal(hangUp.connections(), 2);
});

test("MQTT.js internals: with no attempt pending (connected), rearmMqttReconnect changes nothing", { timeout: 10_000 }, async (t) => {
  const { broker, port } = await aedesOnPort(t);
  const client = clientOf(t, port, LONG_PERIOD_MS);
  await next(client, "connect");
  assert.equal(rearmMqttReconnect(client, 20), false);
  assert.equal(client.options.reconnectPeriod, LONG_PERIOD_MS);
});

test("aedes internals: `clients` holds a live client by id from CONNACK until it disconnects; onAedesError hears the broker's own error event", { timeout: 10_000 }, async (t) => {
  const { broker, port } = await aedesOnPort(t);
  assert.deepEqual(Object.keys(aedesClients(broker)), []);

  const ready = once(broker, "clientReady");
  const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, { protocolVersion: 4, clientId: "svc-cfg-1-node-a", reconnectPeriod: 0 });
  t.after(() => client.end(true));
  await ready;
  const live = aedesClients(broker)["svc-cfg-1-node-a"];
  assert.ok(live !== undefined, "the connected client is found by its id");
  assert.equal(live.id, "svc-cfg-1-node-a");
  assert.equal(live.closed, false);

  const gone = once(broker, "clientDisconnect");
  client.end();
  await gone;
  assert.equal(aedesClients(broker)["svc-cfg-1-node-a"], undefined, "a disconnected client leaves the map");

  const heard: unknown[] = [];
  onAedesError(broker, (err) => heard.push(err));
  const boom = new Error("will housekeeping failed");
  broker.emit("error", boom);
  assert.deepEqual(heard, [boom]);
});
