import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test, type TestContext } from "node:test";
import mqtt, { type IClientOptions, type MqttClient } from "mqtt";
import { createLogger } from "../../src/logger.js";
import { nodeClientId, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { BrokerUnavailableError, type NodeBrokerAccount } from "../../src/mqtt/broker-admin.js";
import { BACKEND_ROLE, CONTROL_TOPIC, MosquittoAdmin, RESPONSE_TOPIC } from "../../src/mqtt/mosquitto-admin.js";
import { backendSubscriptions, nodeTopic } from "../../src/protocol/topics.js";
import { mosquitto, until, type MosquittoBroker } from "./mosquitto-harness.js";

// The Mosquitto adapter against a real Mosquitto 2.0 with dynamic security,
// started from deploy/mosquitto/mosquitto.conf; agents are MQTT.js 3.1.1 clients. The matrix is
// the one test/mqtt/embedded-broker.test.ts checks against aedes (spec §5 rules 1-3, §6.4 rule 5).

const WAIT_MS = 5000;
const pw = () => randomBytes(32).toString("base64url");
const account = (configId: string, nodeId: string, password = pw()): NodeBrokerAccount => ({
  configId,
  nodeId,
  username: nodeUsername(configId, nodeId),
  clientId: nodeClientId(configId, nodeId),
  password,
});

interface Msg {
  topic: string;
  payload: string;
  retain: boolean;
}

/** A connected MQTT.js client and everything it received. */
class Peer {
  readonly received: Msg[] = [];
  /** CONNACK's session present flag. */
  sessionPresent = false;
  readonly closed: Promise<void>;
  constructor(readonly client: MqttClient) {
    client.on("message", (topic, payload, packet) => this.received.push({ topic, payload: payload.toString(), retain: packet.retain }));
    this.closed = new Promise((resolve) => client.once("close", () => resolve()));
  }
  async subscribe(filters: string[]): Promise<number[]> {
    return new Promise((resolve, reject) =>
      this.client.subscribe(filters, { qos: 1 }, (err, _g, packet) => (packet?.granted ? resolve(packet.granted as number[]) : reject(err ?? new Error("no SUBACK")))),
    );
  }
  async waitFor(pred: (m: Msg) => boolean, what: string): Promise<Msg> {
    return until(what, () => this.received.find(pred), WAIT_MS);
  }
}

function connect(t: TestContext, m: MosquittoBroker, username: string | undefined, password: string | undefined, clientId: string, extra: IClientOptions = {}): Promise<Peer> {
  const client = mqtt.connect(m.url, {
    protocolVersion: 4,
    reconnectPeriod: 0,
    connectTimeout: WAIT_MS,
    clean: true,
    clientId,
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password }),
    ...extra,
  });
  t.after(() => new Promise<void>((resolve) => client.end(true, {}, () => resolve())));
  const peer = new Peer(client);
  return new Promise((resolve, reject) => {
    client.once("connect", (connack) => {
      peer.sessionPresent = connack.sessionPresent;
      resolve(peer);
    });
    client.once("error", reject);
    client.once("close", () => reject(new Error("closed before CONNACK")));
  });
}

async function refused(t: TestContext, m: MosquittoBroker, username: string | undefined, password: string | undefined, clientId: string): Promise<number> {
  const err = await connect(t, m, username, password, clientId).then(
    () => assert.fail(`${clientId} as ${username} was accepted`),
    (e: unknown) => e as { code?: number },
  );
  assert.equal(typeof err.code, "number", `a CONNACK refusal, got ${String(err)}`);
  return err.code as number;
}

test("the Mosquitto adapter provisions exactly the store's accounts, and Mosquitto enforces the policy (spec §5 rules 1-3, §6.4 rule 5)", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const admin = MosquittoAdmin.start({
    url: m.url,
    username: m.adminUser,
    password: m.adminPassword,
    log: createLogger("silent"),
    reconnectMinMs: 50,
    reconnectMaxMs: 400,
  });
  t.after(() => admin.close());
  await until("the admin connection", () => admin.connected);

  const A = account("cfg-1", "node-a");
  const B = account("cfg-1", "node-b");
  const backend = { username: "svc-backend", password: pw() };
  assert.deepEqual(await admin.reconcile({ backend, nodes: [A, B] }), { upserted: 3, removed: 0 });
  // Idempotent: an account that is already right is not touched (a modifyClient would kick it).
  assert.deepEqual(await admin.reconcile({ backend, nodes: [A, B] }), { upserted: 0, removed: 0 });

  const topicA = (k: Parameters<typeof nodeTopic>[2]) => nodeTopic("cfg-1", "node-a", k);
  const topicB = (k: Parameters<typeof nodeTopic>[2]) => nodeTopic("cfg-1", "node-b", k);
  const connectA = (tt: TestContext, password = A.password) => connect(tt, m, A.username, password, A.clientId);
  const connectB = (tt: TestContext) => connect(tt, m, B.username, B.password, B.clientId);
  const connectBackend = async (tt: TestContext) => {
    const p = await connect(tt, m, backend.username, backend.password, `svc-backend-${randomBytes(4).toString("hex")}`);
    // spec §5 rule 3: every upstream topic through exactly these filters.
    assert.deepEqual(await p.subscribe(backendSubscriptions()), backendSubscriptions().map(() => 1));
    return p;
  };
  /** B's marker reaches the backend: everything published before it has been routed. */
  const barrier = async (tt: TestContext, backendPeer: Peer) => {
    const b = await connectB(tt);
    const marker = `barrier-${randomBytes(4).toString("hex")}`;
    await b.client.publishAsync(topicB("heartbeat"), marker, { qos: 1 });
    await backendPeer.waitFor((x) => x.payload === marker, "the barrier");
    b.client.end(true);
  };

  await t.test("authentication: the node's own client id only; wrong passwords, unknown users and ids with + # / are refused (DESIGN §3)", async (tt) => {
    const a = await connectA(tt);
    assert.equal(a.client.connected, true);
    a.client.end(true);
    assert.ok((await refused(tt, m, A.username, B.password, A.clientId)) > 0, "B's password for A");
    assert.ok((await refused(tt, m, A.username, A.password, B.clientId)) > 0, "B's client id with A's account");
    assert.ok((await refused(tt, m, A.username, A.password, `${A.clientId}-2`)) > 0, "another client id");
    for (const clientId of ["svc-cfg-1-+", "svc-cfg-1-#", "svc-cfg-1-node-a/x", "svc-+-+"]) {
      assert.ok((await refused(tt, m, A.username, A.password, clientId)) > 0, clientId);
    }
    for (const username of ["n:cfg-1:+", "n:+:+", "n:cfg-1:#", "n:cfg-1:node-a/+", "n:cfg-1:node-z"]) {
      assert.ok((await refused(tt, m, username, A.password, A.clientId)) > 0, username);
    }
    assert.ok((await refused(tt, m, undefined, undefined, A.clientId)) > 0, "anonymous");
  });

  await t.test("subscriptions: A's own downstream topics only; foreign and wildcard filters get SUBACK 128 (spec §5 rules 1-2)", async (tt) => {
    const a = await connectA(tt);
    const filters = [topicA("control"), topicB("control"), "svc/#", "svc/+/+/control", "#", "+", topicA("config_push"), "$SYS/#", topicA("event"), "svc/cfg-1/+/control"];
    assert.deepEqual(await a.subscribe(filters), [1, 128, 128, 128, 128, 128, 1, 128, 128, 128]);
    assert.deepEqual(await a.subscribe([topicA("detect"), topicA("info")]), [1, 1]);
  });

  await t.test("the backend gets exactly its upstream filters, nothing broader (spec §5 rule 3)", async (tt) => {
    const b = await connectBackend(tt);
    assert.deepEqual(await b.subscribe(["#", "svc/#", "svc/+/+/control", topicA("control"), "$SYS/#", "$CONTROL/dynamic-security/#"]), [128, 128, 128, 128, 128, 128]);
  });

  await t.test("A's own upstream publish reaches the backend; A on B's upstream topic never does (3.1.1: a denied publish is silent)", async (tt) => {
    const backendPeer = await connectBackend(tt);
    const a = await connectA(tt);
    await a.client.publishAsync(topicA("heartbeat"), "hb-a", { qos: 1 });
    const got = await backendPeer.waitFor((x) => x.payload === "hb-a", "A's heartbeat");
    assert.equal(got.topic, topicA("heartbeat"));
    // 3.1.1 cannot refuse one publish: Mosquitto acknowledges and drops it (A stays connected).
    await a.client.publishAsync(topicB("event"), "forged-by-a", { qos: 1 });
    assert.equal(a.client.connected, true);
    for (const [topic, marker] of [
      ["svc/cfg-1/+/event", "wildcard-plus"],
      ["svc/cfg-1/node-a/#", "wildcard-hash"],
      ["$SYS/broker/x", "sys"],
      [topicA("control"), "own-downstream"],
      ["svc/cfg-1/node-a/event/extra", "extra-level"],
      [CONTROL_TOPIC, "control-api"],
    ] as const) {
      const p = await connectA(tt);
      p.client.publish(topic, marker, { qos: 0 });
      // Some of these end the connection (a wildcard in a PUBLISH is a protocol error); either way the packet was written.
      await p.client.endAsync(false);
    }
    await barrier(tt, backendPeer);
    const markers = new Set(["forged-by-a", "wildcard-plus", "wildcard-hash", "sys", "own-downstream", "extra-level", "control-api"]);
    assert.deepEqual(backendPeer.received.filter((x) => markers.has(x.payload)), []);
  });

  await t.test("a retained publish disconnects A, is not delivered and not stored; QoS 2 does not get through (spec §6.4 rule 5; retain_available false, max_qos 1)", async (tt) => {
    const backendPeer = await connectBackend(tt);
    const a = await connectA(tt);
    a.client.publish(topicA("event"), "retained-by-a", { qos: 1, retain: true });
    await a.closed;
    const q2 = await connectA(tt);
    q2.client.publish(topicA("event"), "qos2-by-a", { qos: 2 });
    await until("the QoS 2 publisher's disconnect", () => !q2.client.connected || undefined);
    await barrier(tt, backendPeer);
    assert.equal(backendPeer.received.some((x) => x.payload === "retained-by-a" || x.payload === "qos2-by-a"), false);
    const later = await connectBackend(tt);
    await barrier(tt, later);
    assert.equal(later.received.some((x) => x.retain || x.payload === "retained-by-a"), false);
  });

  await t.test("the backend's downstream publish reaches A and not B; it may not publish upstream nor retained", async (tt) => {
    const backendPeer = await connectBackend(tt);
    const a = await connectA(tt);
    const b = await connectB(tt);
    assert.deepEqual(await a.subscribe([topicA("control")]), [1]);
    assert.deepEqual(await b.subscribe([topicB("control")]), [1]);
    await backendPeer.client.publishAsync(topicA("control"), "cmd-for-a", { qos: 1 });
    await a.waitFor((x) => x.payload === "cmd-for-a", "A's command");
    // Impersonating A upstream: silently dropped.
    await backendPeer.client.publishAsync(topicA("event"), "backend-as-a", { qos: 1 });
    await backendPeer.client.publishAsync(topicB("control"), "cmd-for-b", { qos: 1 });
    await b.waitFor((x) => x.payload === "cmd-for-b", "B's command");
    assert.deepEqual(b.received.map((x) => x.payload), ["cmd-for-b"]);
    assert.deepEqual(a.received.map((x) => x.payload), ["cmd-for-a"]);
    // Retained (spec §6.4 rule 5): the backend is disconnected too and nothing is delivered.
    backendPeer.client.publish(topicA("control"), "retained-cmd", { qos: 1, retain: true });
    await backendPeer.closed;
    const watcher = await connectBackend(tt);
    await barrier(tt, watcher);
    assert.equal(watcher.received.some((x) => x.payload === "backend-as-a"), false);
    assert.equal(a.received.some((x) => x.payload === "retained-cmd"), false);
  });

  await t.test("putNode rotates the password: the live client is cut, the old password refused, the new one accepted (spec §4 rule 11)", async (tt) => {
    const a = await connectA(tt);
    const rotated = { ...A, password: pw() };
    await admin.putNode(rotated);
    await a.closed;
    assert.ok((await refused(tt, m, A.username, A.password, A.clientId)) > 0);
    (await connectA(tt, rotated.password)).client.end(true);
    // Again with the same password: nothing to change, the live client stays.
    const again = await connectA(tt, rotated.password);
    await admin.putNode(rotated);
    await again.client.publishAsync(topicA("heartbeat"), "still-here", { qos: 1 });
    assert.equal(again.client.connected, true);
    A.password = rotated.password;
  });

  await t.test("kick cuts the live client, which may come back; removeNode cuts it and its password stops working (spec §4 rule 12)", async (tt) => {
    const a = await connectA(tt);
    await admin.kick(A.clientId);
    await a.closed;
    const back = await connectA(tt);
    await admin.removeNode(A.username, A.clientId);
    await back.closed;
    assert.ok((await refused(tt, m, A.username, A.password, A.clientId)) > 0);
    await admin.removeNode(A.username, A.clientId); // absent is fine
    await admin.kick("svc-nobody-here");
  });

  await t.test("reconcile removes node accounts the store lacks, repairs drift, and leaves the admin and other users alone (spec §1.8)", async (tt) => {
    const C = account("cfg-2", "node-c");
    await admin.putNode(C);
    const run = (commands: unknown[]) => dynsec(tt, m, commands);
    // Drift made behind the backend's back: B holds another password (as after restoring an old
    // broker state file: another fingerprint), an extra ACL on B's role, the backend role lost a
    // filter; and an operator's own user.
    await run([
      { command: "modifyClient", username: B.username, password: "an-old-password", textdescription: "svc-pw:0123456789abcdef" },
      { command: "addRoleACL", rolename: B.username, acltype: "subscribePattern", topic: "svc/#", allow: true, priority: 5 },
      { command: "removeRoleACL", rolename: BACKEND_ROLE, acltype: "subscribeLiteral", topic: backendSubscriptions()[0] },
      { command: "createClient", username: "operator-tool", password: "operator-password" },
    ]);
    const report = await admin.reconcile({ backend, nodes: [B] });
    assert.deepEqual(report, { upserted: 2, removed: 1 }, "B and the backend repaired; C removed (A is gone already)");
    const listed = await run([{ command: "listClients" }, { command: "listRoles" }]);
    const clients = (listed[0]?.data.clients as string[]).sort();
    assert.deepEqual(clients, [m.adminUser, B.username, "operator-tool", backend.username].sort());
    const roles = (listed[1]?.data.roles as string[]).sort();
    assert.deepEqual(roles, ["admin", B.username, BACKEND_ROLE].sort());
    const b = await connectB(tt);
    assert.deepEqual(await b.subscribe(["svc/#"]), [128]);
    await connectBackend(tt);
  });

  await t.test("with the admin connection down every call rejects at once with BrokerUnavailableError", async () => {
    const down = MosquittoAdmin.start({ url: "mqtt://127.0.0.1:1", username: "x", password: "y", log: createLogger("silent"), reconnectMinMs: 1000 });
    t.after(() => down.close());
    await assert.rejects(down.putNode(B), BrokerUnavailableError);
    await assert.rejects(down.reconcile({ backend, nodes: [] }), BrokerUnavailableError);
  });
});

/** Sends dynamic-security commands as the admin with a plain MQTT.js client (the test's own view of the broker). */
async function dynsec(t: TestContext, m: MosquittoBroker, commands: unknown[]): Promise<Array<{ command: string; error?: string; data?: any }>> { // eslint-disable-line @typescript-eslint/no-explicit-any -- response data is checked field by field
  const c = await connect(t, m, m.adminUser, m.adminPassword, `test-admin-${randomBytes(4).toString("hex")}`);
  await c.subscribe([RESPONSE_TOPIC]);
  await c.client.publishAsync(CONTROL_TOPIC, JSON.stringify({ commands }), { qos: 1 });
  const msg = await c.waitFor((x) => x.topic === RESPONSE_TOPIC, "the dynsec response");
  c.client.end(true);
  return JSON.parse(msg.payload).responses;
}

test("reconcile reads the broker's accounts in pages: with 2 per page it still sees every one, touches nothing that is right, and removes a stray account on the last page (spec §1.8)", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const admin = MosquittoAdmin.start({ url: m.url, username: m.adminUser, password: m.adminPassword, log: createLogger("silent"), reconnectMinMs: 50, reconnectMaxMs: 400, listPageSize: 2 });
  t.after(() => admin.close());
  await until("the admin connection", () => admin.connected);
  const nodes = ["a", "b", "c", "d", "e"].map((n) => account("cfg-p", `node-${n}`));
  const stray = account("cfg-p", "node-stray");
  const backend = { username: "svc-backend", password: pw() };
  // 8 clients (admin, backend, 5 nodes, stray) and 7 roles: pages of 2, the last one short.
  assert.deepEqual(await admin.reconcile({ backend, nodes: [...nodes, stray] }), { upserted: 7, removed: 0 });
  assert.deepEqual(await admin.reconcile({ backend, nodes: [...nodes, stray] }), { upserted: 0, removed: 0 }, "every account was listed: none re-planned");
  assert.deepEqual(await admin.reconcile({ backend, nodes }), { upserted: 0, removed: 1 }, "the stray account, listed last, is found and removed");
  const listed = await dynsec(t, m, [{ command: "listClients" }, { command: "listRoles" }]);
  assert.deepEqual((listed[0]?.data.clients as string[]).sort(), [m.adminUser, backend.username, ...nodes.map((n) => n.username)].sort());
  assert.deepEqual((listed[1]?.data.roles as string[]).sort(), ["admin", BACKEND_ROLE, ...nodes.map((n) => n.username)].sort());
});

test("a removed node account leaves no durable session: after removeNode, and after a reconciliation that removes the account, its client id finds no session at its next clean-session-0 CONNECT (session present 0) and gets nothing published before it came back (spec §4 rule 12; CVE-2021-34434; docs/history/decisions-2026.md \"a deleted Mosquitto account's durable session\")", async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const admin = MosquittoAdmin.start({ url: m.url, username: m.adminUser, password: m.adminPassword, log: createLogger("silent"), reconnectMinMs: 50, reconnectMaxMs: 400 });
  t.after(() => admin.close());
  await until("the admin connection", () => admin.connected);
  const backend = { username: "svc-backend", password: pw() };
  await admin.reconcile({ backend, nodes: [] });
  const sender = await connect(t, m, backend.username, backend.password, "svc-backend-sender");
  /** The accounts the store would hold: the nodes rebound by the earlier rounds. */
  const bound: NodeBrokerAccount[] = [];
  for (const how of ["removeNode", "reconcile"] as const) {
    await t.test(how, async (tt) => {
      const X = account("cfg-d", `node-${how.toLowerCase()}`);
      await admin.putNode(X);
      const down = nodeTopic(X.configId, X.nodeId, "control");
      const durable = { clean: false };
      const first = await connect(tt, m, X.username, X.password, X.clientId, durable);
      assert.deepEqual(await first.subscribe([down]), [1]);
      await first.client.endAsync();
      // The control: while the account stands, the session is kept and delivers its queue.
      await sender.client.publishAsync(down, "queued-1", { qos: 1 });
      const back = await connect(tt, m, X.username, X.password, X.clientId, durable);
      assert.equal(back.sessionPresent, true, "a durable session was made");
      await back.waitFor((x) => x.payload === "queued-1", "the queued message, delivered while the account stands");
      await back.client.endAsync();
      await sender.client.publishAsync(down, "queued-for-the-revoked-session", { qos: 1 });

      if (how === "removeNode") await admin.removeNode(X.username, X.clientId);
      else assert.deepEqual(await admin.reconcile({ backend, nodes: bound }), { upserted: 0, removed: 1 });
      await sender.client.publishAsync(down, "published-while-revoked", { qos: 1 });
      const rebound = { ...X, password: pw() };
      await admin.putNode(rebound);
      bound.push(rebound);
      await sender.client.publishAsync(down, "published-before-reconnect", { qos: 1 });

      const again = await connect(tt, m, X.username, rebound.password, X.clientId, durable);
      assert.equal(again.sessionPresent, false, "the old session is gone");
      assert.deepEqual(await again.subscribe([down]), [1]);
      await sender.client.publishAsync(down, "sentinel", { qos: 1 });
      await again.waitFor((x) => x.payload === "sentinel", "the sentinel");
      assert.deepEqual(again.received.map((x) => x.payload), ["sentinel"]);
    });
  }
  const listed = await dynsec(t, m, [{ command: "listClients" }]);
  assert.deepEqual((listed[0]?.data.clients as string[]).sort(), [m.adminUser, backend.username, nodeUsername("cfg-d", "node-removenode"), nodeUsername("cfg-d", "node-reconcile")].sort(), "no account was left behind by ending the sessions");
});
