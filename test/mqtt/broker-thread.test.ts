import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { test, type TestContext } from "node:test";
import mqtt, { type MqttClient } from "mqtt";
import { createLogger } from "../../src/logger.js";
import { nodeClientId, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { ThreadedBroker } from "../../src/mqtt/broker-thread.js";
import { brokerPasswordHash } from "../../src/mqtt/broker-users.js";
import type { Envelope } from "../../src/protocol/envelope.schema.js";
import { backendSubscriptions, nodeTopic } from "../../src/protocol/topics.js";
import { CONFIG, openStores, seedNodes, tempDbFile } from "../actors/harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The embedded broker in a worker thread (src/mqtt/broker-thread.ts): real
 * aedes in the worker, accounts read from a real SQLite file by the worker's own connection,
 * real MQTT.js clients. What in-process gave, the thread must give too (DESIGN §3 Broker
 * identity, spec §5, §6.4 rule 10); the broker's policy itself is proven on the in-process
 * broker by embedded-broker.test.ts.
 */

const WAIT_MS = 5000;
const NODE = "node-a";
const BACKEND_USER = "svc-backend";

function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${WAIT_MS} ms waiting for ${what}`)), WAIT_MS);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Waits for `check` to hold, re-checking on each turn for at most WAIT_MS (no fixed sleep). */
async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

interface Setup {
  broker: ThreadedBroker;
  password: string;
  /** Log records the main thread's logger wrote. */
  records: Array<Record<string, unknown>>;
  /** Sets the node's stored password hash (a rotation), or removes the account with null. */
  setAccount(password: string | null): void;
}

async function setup(t: TestContext, opts: { maxRestarts?: number } = {}): Promise<Setup> {
  const file = tempDbFile(t);
  const { store, close } = await openStores(file);
  await seedNodes(store, [NODE]);
  const setAccount = (password: string | null) =>
    sqliteOf(store)
      .prepare("UPDATE node_client_state SET mqtt_username = ?, mqtt_password_hash = ?, client_initialized = ? WHERE node_id = ?")
      .run(nodeUsername(CONFIG, NODE), password === null ? null : brokerPasswordHash(password), password === null ? 0 : 1, NODE);
  const password = randomBytes(32).toString("base64url");
  setAccount(password);
  const records: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      records.push(JSON.parse(chunk.toString("utf8")) as Record<string, unknown>);
      done();
    },
  });
  const log = createLogger("info", sink);
  const broker = await ThreadedBroker.start({
    host: "127.0.0.1",
    port: 0,
    log,
    dbFile: file,
    backendUsername: BACKEND_USER,
    backendPasswordHash: brokerPasswordHash(randomBytes(32).toString("base64url")),
    ...opts,
  });
  t.after(async () => {
    await broker.close();
    await close();
  });
  return { broker, password, records, setAccount };
}

function connectNode(s: Setup, password: string): Promise<MqttClient> {
  const client = mqtt.connect(`mqtt://127.0.0.1:${s.broker.port}`, {
    protocolVersion: 4,
    clientId: nodeClientId(CONFIG, NODE),
    username: nodeUsername(CONFIG, NODE),
    password,
    reconnectPeriod: 0,
    connectTimeout: WAIT_MS,
  });
  return within(
    new Promise<MqttClient>((resolve, reject) => {
      client.once("connect", () => resolve(client));
      client.once("error", (err) => {
        client.end(true);
        reject(err);
      });
    }),
    "CONNACK",
  );
}

function heartbeat(n: number): Envelope {
  return {
    type: "heartbeat",
    request_id: "",
    config_id: CONFIG,
    node_id: NODE,
    boot_id: "b",
    session_id: "s",
    sent_at: new Date(n).toISOString(),
    payload: { client_online: true, wg_online: n % 2 === 0 },
  };
}

test("DESIGN §3 broker identity: the broker thread authenticates against the store file at every CONNECT (a rotated password is refused at once) and its refusal is logged through the main thread's logger", async (t) => {
  const s = await setup(t);
  const client = await connectNode(s, s.password);
  await until("the mirror of registered clients", () => s.broker.isConnected(nodeClientId(CONFIG, NODE)));
  client.end(true);

  const rotated = randomBytes(32).toString("base64url");
  s.setAccount(rotated);
  await assert.rejects(connectNode(s, s.password), /Bad username or password/i);
  await until("the refusal's log record", () => s.records.some((r) => r["msg"] === "mqtt connect refused: bad username or password"));
  const refused = s.records.find((r) => r["msg"] === "mqtt connect refused: bad username or password");
  assert.equal(refused?.["level"], 40, "re-logged at warn");
  assert.equal(refused?.["name"], "broker");
  assert.equal(JSON.stringify(s.records).includes(s.password), false, "no password in any record");
  (await connectNode(s, rotated)).end(true);

  s.setAccount(null);
  await assert.rejects(connectNode(s, rotated), /Bad username or password/i);
});

test("spec §6.4 rule 10: upstream messages reach the backend link in order with their bytes; a downstream publish reaches the node; kick cuts it and the mirror follows", async (t) => {
  const s = await setup(t);
  const got: Array<{ topic: string; payload: string }> = [];
  const link = await s.broker.attachBackend(backendSubscriptions(), (topic, payload) => got.push({ topic, payload: payload.toString("utf8") }));
  const client = await connectNode(s, s.password);
  const clientId = nodeClientId(CONFIG, NODE);
  await within(new Promise((resolve) => client.subscribe(nodeTopic(CONFIG, NODE, "control"), { qos: 1 }, resolve)), "SUBACK");
  const denied = await within(new Promise<unknown>((resolve) => client.subscribe("#", { qos: 1 }, (err, granted) => resolve(err ?? granted))), "SUBACK of #");
  // spec §5: a node subscribing to `#` gets SUBACK 128 for it (MQTT.js reports that as an error carrying the packet).
  assert.match(JSON.stringify(denied), /"granted":\[128\]/);

  const sent = Array.from({ length: 50 }, (_, i) => JSON.stringify(heartbeat(i)));
  for (const payload of sent) client.publish(nodeTopic(CONFIG, NODE, "heartbeat"), payload, { qos: 1 });
  await until("50 upstream messages", () => got.length >= 50);
  assert.deepEqual(got.map((g) => g.payload), sent, "every payload, byte for byte, in order");
  assert.ok(got.every((g) => g.topic === nodeTopic(CONFIG, NODE, "heartbeat")));

  const downstream = new Promise<string>((resolve) => client.once("message", (_topic, payload) => resolve(payload.toString("utf8"))));
  const command: Envelope = { ...heartbeat(1), type: "control", request_id: "r-1", payload: { action: "start" } };
  await link.publish(nodeTopic(CONFIG, NODE, "control"), command);
  assert.deepEqual(JSON.parse(await within(downstream, "the downstream message")), command);

  assert.equal(s.broker.isConnected(clientId), true);
  const closed = new Promise<void>((resolve) => client.once("close", () => resolve()));
  assert.equal(s.broker.kick(clientId), true);
  await within(closed, "the kicked connection closing");
  await until("the mirror dropping the client", () => !s.broker.isConnected(clientId));
  assert.equal(s.broker.kick(clientId), false, "nothing left to kick");

  await link.close();
  await assert.rejects(link.publish(nodeTopic(CONFIG, NODE, "control"), command), /closed/);
});

test("the broker thread runs a burst of backend publishes in slices of a turn: a node's message sent as the burst starts reaches the backend before most of the burst is published, and the burst reaches the node in order", async (t) => {
  const s = await setup(t);
  // What the main thread saw, in the order the broker thread posted it: "up" for the node's
  // message, "pub" for each publish of the burst the broker thread completed.
  const order: string[] = [];
  const link = await s.broker.attachBackend(backendSubscriptions(), () => void order.push("up"));
  const client = await connectNode(s, s.password);
  await within(new Promise((resolve) => client.subscribe(nodeTopic(CONFIG, NODE, "control"), { qos: 1 }, resolve)), "SUBACK");
  const received: string[] = [];
  client.on("message", (_topic, payload) => void received.push((JSON.parse(payload.toString("utf8")) as Envelope).request_id));

  // A protocol switch's pushes are ~100 KB each; 300 of 64 KB here.
  const burst = 300;
  const pad = "x".repeat(64 * 1024);
  const ids = Array.from({ length: burst }, (_, i) => `r-${i}`);
  const published = ids.map((id) =>
    link.publish(nodeTopic(CONFIG, NODE, "control"), { ...heartbeat(1), type: "control", request_id: id, payload: { action: "start", pad } } as unknown as Envelope).then(() => void order.push("pub")),
  );
  client.publish(nodeTopic(CONFIG, NODE, "heartbeat"), JSON.stringify(heartbeat(2)), { qos: 1 });
  await within(Promise.all(published), "the burst published");
  await until("the node's message", () => order.includes("up"));
  const before = order.indexOf("up");
  assert.ok(before < burst / 2, `the node's message came after ${before} of ${burst} publishes (one burst in one turn would put it after all of them)`);
  await until("the whole burst at the node", () => received.length === burst);
  assert.deepEqual(received, ids, "in order");
});

test("a port already taken fails the start with the worker's reason; close stops listening and later publishes reject", async (t) => {
  const s = await setup(t);
  const file = tempDbFile(t);
  const { close } = await openStores(file);
  t.after(close);
  await assert.rejects(
    ThreadedBroker.start({ host: "127.0.0.1", port: s.broker.port, log: createLogger("silent"), dbFile: file, backendUsername: BACKEND_USER, backendPasswordHash: "0".repeat(64) }),
    /EADDRINUSE/,
  );
  const link = await s.broker.attachBackend(backendSubscriptions(), () => undefined);
  await s.broker.close();
  await assert.rejects(connectNode(s, s.password), /ECONNREFUSED/);
  await assert.rejects(link.publish(nodeTopic(CONFIG, NODE, "control"), heartbeat(0)), /closed/);
});

test("broker supervision: a broker thread that dies is started again on the same port; the backend link shows disconnected meanwhile, is attached again and gets the node's messages; the mirror starts empty", async (t) => {
  const s = await setup(t);
  const received: string[] = [];
  const link = await s.broker.attachBackend(backendSubscriptions(), (topic) => received.push(topic));
  const before = await connectNode(s, s.password);
  await until("the node in the mirror", () => s.broker.isConnected(nodeClientId(CONFIG, NODE)));
  const port = s.broker.port;

  await s.broker.terminateWorker();
  assert.equal(link.connected, false, "the link is down while the thread is");
  assert.equal(s.broker.isConnected(nodeClientId(CONFIG, NODE)), false, "no client is registered with a dead broker");
  await assert.rejects(link.publish(nodeTopic(CONFIG, NODE, "control"), heartbeat(0)), /closed/);
  before.end(true);
  await until("the restart's log record", () => s.records.some((r) => r["msg"] === "embedded broker thread restarted"));
  assert.equal(s.records.find((r) => r["msg"] === "embedded broker thread exited")?.["level"], 50, "the death is logged at error");
  assert.equal(s.broker.port, port);
  assert.equal(link.connected, true);

  const after = await connectNode(s, s.password);
  t.after(() => after.end(true));
  const topic = nodeTopic(CONFIG, NODE, "heartbeat");
  // Published once, at once: the restarted worker subscribed the link before it listened.
  await after.publishAsync(topic, JSON.stringify(heartbeat(1)), { qos: 1 });
  await until("a heartbeat through the restarted broker", () => received.includes(topic));
});

test("broker supervision: past maxRestarts in the window the broker stays down, logged at fatal", async (t) => {
  const s = await setup(t, { maxRestarts: 1 });
  const link = await s.broker.attachBackend(backendSubscriptions(), () => undefined);
  await s.broker.terminateWorker();
  await until("the first restart", () => s.records.some((r) => r["msg"] === "embedded broker thread restarted"));
  await s.broker.terminateWorker();
  await until("the fatal record", () => s.records.some((r) => r["level"] === 60));
  assert.match(String(s.records.find((r) => r["level"] === 60)?.["msg"]), /stays down/);
  assert.equal(link.connected, false);
  await assert.rejects(connectNode(s, s.password));
});
