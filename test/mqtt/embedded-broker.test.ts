import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import mqtt, { type IClientOptions, type MqttClient } from "mqtt";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import {
  nodeClientId,
  nodeIdentity,
  nodeUsername,
  type BrokerIdentity,
} from "../../src/mqtt/authz.policy.js";
import { brokerPasswordHash, type BrokerUser, type BrokerUserLookup } from "../../src/mqtt/broker-users.js";
import { EmbeddedBroker, PacketFramer } from "../../src/mqtt/embedded-broker.js";
import { MAX_ENVELOPE_BYTES } from "../../src/protocol/envelope.schema.js";
import { backendSubscriptions, nodeTopic } from "../../src/protocol/topics.js";

// A real aedes broker on port 0 and real MQTT.js clients speaking MQTT 3.1.1 (brokers.md: aedes
// 1.2 refuses v5). Every wait is bounded; nothing sleeps.

const WAIT_MS = 5000;
const CFG = "cfg-1";
const A = { configId: CFG, nodeId: "node-a" };
const B = { configId: CFG, nodeId: "node-b" };
const BACKEND_USER = "svc-backend";

const password = () => randomBytes(32).toString("base64url");
const PASS_A = password();
const PASS_B = password();
const PASS_BACKEND = password();
const PASS_FORGED = password();

const users = new Map<string, BrokerUser>([
  [nodeUsername(A.configId, A.nodeId), { identity: nodeIdentity(A.configId, A.nodeId), passwordHash: brokerPasswordHash(PASS_A) }],
  [nodeUsername(B.configId, B.nodeId), { identity: nodeIdentity(B.configId, B.nodeId), passwordHash: brokerPasswordHash(PASS_B) }],
  [BACKEND_USER, { identity: { kind: "backend" }, passwordHash: brokerPasswordHash(PASS_BACKEND) }],
  // A corrupted row whose node id holds `+`: the policy must still grant it nothing.
  [
    "n:cfg-1:+",
    {
      identity: { kind: "node", configId: CFG, nodeId: "+", clientId: "svc-cfg-1-+" } satisfies BrokerIdentity,
      passwordHash: brokerPasswordHash(PASS_FORGED),
    },
  ],
]);
const lookup: BrokerUserLookup = { find: (u) => users.get(u) };

const topicA = (kind: Parameters<typeof nodeTopic>[2]) => nodeTopic(A.configId, A.nodeId, kind);
const topicB = (kind: Parameters<typeof nodeTopic>[2]) => nodeTopic(B.configId, B.nodeId, kind);

function within<T>(p: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function offlineWill(node: { configId: string; nodeId: string }): NonNullable<IClientOptions["will"]> {
  // spec §6.3 LWT: a full envelope, type event, empty boot_id and session_id, payload offline.
  const envelope = {
    type: "event",
    request_id: "",
    config_id: node.configId,
    node_id: node.nodeId,
    boot_id: "",
    session_id: "",
    sent_at: new Date(0).toISOString(),
    payload: { level: "info", event: "offline", message: "agent connection lost" },
  };
  return { topic: nodeTopic(node.configId, node.nodeId, "event"), payload: Buffer.from(JSON.stringify(envelope)), qos: 1, retain: false };
}

interface Received {
  topic: string;
  payload: string;
  retain: boolean;
}

/** A connected MQTT.js client and everything it received. */
class Peer {
  readonly received: Received[] = [];
  private waiters: Array<{ pred: (m: Received) => boolean; resolve: (m: Received) => void }> = [];
  readonly closed: Promise<void>;

  constructor(readonly client: MqttClient) {
    client.on("message", (topic, payload, packet) => {
      const m = { topic, payload: payload.toString("utf8"), retain: packet.retain };
      this.received.push(m);
      this.waiters = this.waiters.filter((w) => {
        if (!w.pred(m)) return true;
        w.resolve(m);
        return false;
      });
    });
    this.closed = new Promise((resolve) => client.once("close", () => resolve()));
  }

  waitFor(pred: (m: Received) => boolean, what: string, ms = WAIT_MS): Promise<Received> {
    const found = this.received.find(pred);
    if (found) return Promise.resolve(found);
    return within(new Promise<Received>((resolve) => this.waiters.push({ pred, resolve })), what, ms);
  }

  /** The SUBACK return codes of one SUBSCRIBE (MQTT.js puts them in the third argument). */
  subscribe(filters: string[], qos: 0 | 1 | 2 = 1): Promise<number[]> {
    return within(
      new Promise<number[]>((resolve, reject) => {
        this.client.subscribe(filters, { qos }, (err, _granted, packet) => {
          if (packet?.granted) resolve(packet.granted as number[]);
          else reject(err ?? new Error("no SUBACK"));
        });
      }),
      `SUBACK for ${filters.join(", ")}`,
    );
  }

  publish(topic: string, payload: string | Buffer, opts: { qos?: 0 | 1; retain?: boolean } = {}): void {
    this.client.publish(topic, payload, { qos: opts.qos ?? 0, retain: opts.retain ?? false });
  }

  /** QoS 1 publish, resolved on PUBACK. */
  publishAcked(topic: string, payload: string): Promise<void> {
    return within(
      new Promise<void>((resolve, reject) => {
        this.client.publish(topic, payload, { qos: 1 }, (err) => (err ? reject(err) : resolve()));
      }),
      `PUBACK on ${topic}`,
    );
  }

  get connected(): boolean {
    return this.client.connected;
  }
}

let broker: EmbeddedBroker;

before(async () => {
  broker = await EmbeddedBroker.start({ host: "127.0.0.1", port: 0, users: lookup, log: createLogger("silent") });
});
after(async () => {
  await broker.close();
});

function options(username: string | undefined, pass: string | undefined, clientId: string, extra: IClientOptions = {}): IClientOptions {
  return {
    protocolVersion: 4,
    reconnectPeriod: 0,
    connectTimeout: WAIT_MS,
    clean: true,
    clientId,
    ...(username === undefined ? {} : { username }),
    ...(pass === undefined ? {} : { password: pass }),
    ...extra,
  };
}

/** Connects and resolves on CONNACK 0; rejects with the CONNACK error (its `code` is the return code). */
async function connectPeer(t: TestContext, username: string | undefined, pass: string | undefined, clientId: string, extra: IClientOptions = {}): Promise<Peer> {
  const client = mqtt.connect(`mqtt://127.0.0.1:${broker.port}`, options(username, pass, clientId, extra));
  t.after(() => new Promise<void>((resolve) => client.end(true, {}, () => resolve())));
  const peer = new Peer(client);
  await within(
    new Promise<void>((resolve, reject) => {
      client.once("connect", () => resolve());
      client.once("error", reject);
      client.once("close", () => reject(new Error("closed before CONNACK")));
    }),
    `CONNACK for ${clientId}`,
  );
  return peer;
}

/** The CONNACK return code of a refused connect. */
async function refusedCode(t: TestContext, username: string | undefined, pass: string | undefined, clientId: string, extra: IClientOptions = {}): Promise<number> {
  const err = await connectPeer(t, username, pass, clientId, extra).then(
    () => assert.fail(`${clientId} was accepted`),
    (e: unknown) => e as { code?: number },
  );
  assert.equal(typeof err.code, "number", `a CONNACK error, got ${String(err)}`);
  return err.code as number;
}

const connectA = (t: TestContext, extra: IClientOptions = {}) =>
  connectPeer(t, nodeUsername(A.configId, A.nodeId), PASS_A, nodeClientId(A.configId, A.nodeId), extra);
const connectB = (t: TestContext, extra: IClientOptions = {}) =>
  connectPeer(t, nodeUsername(B.configId, B.nodeId), PASS_B, nodeClientId(B.configId, B.nodeId), extra);

async function connectBackend(t: TestContext, clientId = `svc-backend-${randomBytes(4).toString("hex")}`): Promise<Peer> {
  const peer = await connectPeer(t, BACKEND_USER, PASS_BACKEND, clientId);
  // spec §5 rule 3: every upstream topic, through exactly these filters.
  assert.deepEqual(await peer.subscribe(backendSubscriptions()), backendSubscriptions().map(() => 1));
  return peer;
}

/** B publishes a marker on its own heartbeat topic and the backend receives it: everything sent before has been routed. */
async function barrier(t: TestContext, backend: Peer): Promise<void> {
  const b = await connectB(t);
  const marker = `barrier-${randomBytes(6).toString("hex")}`;
  await b.publishAcked(topicB("heartbeat"), marker);
  await backend.waitFor((m) => m.payload === marker, "the barrier message");
  b.client.end(true);
}

describe("embedded broker: authentication (DESIGN §3 Broker identity, spec §5)", () => {
  test("node A connects with its password and its own client id", async (t) => {
    const a = await connectA(t);
    assert.equal(a.connected, true);
    assert.equal(broker.isConnected(nodeClientId(A.configId, A.nodeId)), true);
    assert.ok(broker.connectedCount() >= 1);
  });

  test("a wrong password is refused with CONNACK 4 (bad username or password)", async (t) => {
    assert.equal(await refusedCode(t, nodeUsername(A.configId, A.nodeId), PASS_B, nodeClientId(A.configId, A.nodeId)), 4);
    assert.equal(await refusedCode(t, nodeUsername(A.configId, A.nodeId), `${PASS_A}x`, nodeClientId(A.configId, A.nodeId)), 4);
  });

  test("an unknown user, or no credentials at all, is refused with CONNACK 4", async (t) => {
    assert.equal(await refusedCode(t, "n:cfg-1:node-z", PASS_A, "svc-cfg-1-node-z"), 4);
    assert.equal(await refusedCode(t, undefined, undefined, "svc-cfg-1-node-a"), 4);
    assert.equal(await refusedCode(t, nodeUsername(A.configId, A.nodeId), undefined, nodeClientId(A.configId, A.nodeId)), 4);
  });

  test("the right password with another client id is refused with CONNACK 2 (identifier rejected)", async (t) => {
    assert.equal(await refusedCode(t, nodeUsername(A.configId, A.nodeId), PASS_A, nodeClientId(B.configId, B.nodeId)), 2);
    assert.equal(await refusedCode(t, nodeUsername(A.configId, A.nodeId), PASS_A, "svc-cfg-1-node-a-2"), 2);
    assert.equal(await refusedCode(t, nodeUsername(A.configId, A.nodeId), PASS_A, ""), 2);
  });

  test("a live client id cannot be taken over by another user (not even the backend)", async (t) => {
    const a = await connectA(t);
    assert.equal(await refusedCode(t, BACKEND_USER, PASS_BACKEND, nodeClientId(A.configId, A.nodeId)), 2);
    assert.equal(a.connected, true);
    assert.equal(broker.isConnected(nodeClientId(A.configId, A.nodeId)), true);
  });

  test("ids with + or # in a username never authenticate", async (t) => {
    // A's password is not theirs; "n:cfg-1:+" exists (a corrupted row) with another password.
    for (const username of ["n:cfg-1:+", "n:+:+", "n:cfg-1:#", "n:#", "n:cfg-1:node-a/+"]) {
      assert.equal(await refusedCode(t, username, PASS_A, `svc-${username}`), 4, username);
    }
  });

  test("a will that is not an allowed publish refuses the connect with CONNACK 5", async (t) => {
    // Will on B's event topic: A may not publish there (spec §5 rule 1).
    const foreign = { ...offlineWill(A), topic: topicB("event") };
    assert.equal(await refusedCode(t, nodeUsername(A.configId, A.nodeId), PASS_A, nodeClientId(A.configId, A.nodeId), { will: foreign }), 5);
    // Retained will (spec §6.4 rule 5).
    const retained = { ...offlineWill(A), retain: true };
    assert.equal(await refusedCode(t, nodeUsername(A.configId, A.nodeId), PASS_A, nodeClientId(A.configId, A.nodeId), { will: retained }), 5);
  });
});

describe("embedded broker: authorization through the broker (spec §5 rules 1-3, §6.4 rule 5)", () => {
  test("A's own downstream subscription is granted; foreign and wildcard filters get SUBACK 128 in the same SUBSCRIBE", async (t) => {
    const a = await connectA(t);
    const filters = [topicA("control"), topicB("control"), "svc/#", "svc/+/+/control", "#", "+", topicA("config_push"), "$SYS/#", topicA("event")];
    const codes = await a.subscribe(filters);
    assert.deepEqual(codes, [1, 128, 128, 128, 128, 128, 1, 128, 128]);
    assert.equal(a.connected, true, "a refused filter does not disconnect");
  });

  test("every downstream topic of A is granted at QoS 0 and 1; QoS 2 is refused", async (t) => {
    const a = await connectA(t);
    const own = [topicA("config_push"), topicA("control"), topicA("detect"), topicA("info")];
    assert.deepEqual(await a.subscribe(own, 1), [1, 1, 1, 1]);
    assert.deepEqual(await a.subscribe(own, 0), [0, 0, 0, 0]);
    assert.deepEqual(await a.subscribe([topicA("control")], 2), [128]);
  });

  test("the backend gets exactly its upstream filters, nothing broader", async (t) => {
    const backend = await connectBackend(t);
    assert.deepEqual(await backend.subscribe(["#", "svc/#", "svc/+/+/control", topicA("control"), "$SYS/#"]), [128, 128, 128, 128, 128]);
  });

  test("A's own upstream publish is delivered to the backend", async (t) => {
    const backend = await connectBackend(t);
    const a = await connectA(t);
    await a.publishAcked(topicA("heartbeat"), "hb-a");
    const m = await backend.waitFor((x) => x.payload === "hb-a", "A's heartbeat at the backend");
    assert.equal(m.topic, topicA("heartbeat"));
    assert.equal(m.retain, false);
  });

  test("A publishing on B's upstream topic is not delivered and A is disconnected", async (t) => {
    const backend = await connectBackend(t);
    const a = await connectA(t);
    a.publish(topicB("event"), "forged-by-a", { qos: 1 });
    await within(a.closed, "A's disconnect");
    await barrier(t, backend);
    assert.equal(backend.received.some((m) => m.payload === "forged-by-a"), false);
  });

  test("a retained publish on A's own topic is not delivered and A is disconnected (spec §6.4 rule 5)", async (t) => {
    const backend = await connectBackend(t);
    const a = await connectA(t);
    a.publish(topicA("event"), "retained-by-a", { qos: 1, retain: true });
    await within(a.closed, "A's disconnect");
    await barrier(t, backend);
    assert.equal(backend.received.some((m) => m.payload === "retained-by-a"), false);
    // Nothing was stored as retained either: a later subscriber is not handed it.
    const later = await connectBackend(t);
    await barrier(t, later);
    assert.equal(later.received.some((m) => m.retain || m.payload === "retained-by-a"), false);
  });

  test("publishes with wildcards, $SYS, downstream topics and QoS 2 never get through", async (t) => {
    const backend = await connectBackend(t);
    const cases: Array<[string, 0 | 1, string]> = [
      ["svc/cfg-1/+/event", 0, "wildcard-plus"],
      ["svc/cfg-1/node-a/#", 0, "wildcard-hash"],
      ["$SYS/broker/x", 0, "sys"],
      [topicA("control"), 0, "own-downstream"],
      ["svc/cfg-1/node-a/event/extra", 0, "extra-level"],
    ];
    for (const [topic, qos, marker] of cases) {
      const a = await connectA(t);
      a.publish(topic, marker, { qos });
      await within(a.closed, `A's disconnect after publishing on ${topic}`);
    }
    // QoS 2 on an own upstream topic.
    const a = await connectA(t);
    a.client.publish(topicA("event"), "qos2", { qos: 2 });
    await within(a.closed, "A's disconnect after a QoS 2 publish");
    await barrier(t, backend);
    const markers = new Set([...cases.map((c) => c[2]), "qos2"]);
    assert.deepEqual(backend.received.filter((m) => markers.has(m.payload)), []);
  });

  test("a user whose stored node id holds + gets no subscription and no publish", async (t) => {
    const backend = await connectBackend(t);
    const forged = await connectPeer(t, "n:cfg-1:+", PASS_FORGED, "svc-cfg-1-+");
    assert.deepEqual(await forged.subscribe(["svc/cfg-1/+/control", topicA("control"), "svc/cfg-1/+/event"]), [128, 128, 128]);
    forged.publish(topicA("event"), "from-forged", { qos: 1 });
    await within(forged.closed, "the forged client's disconnect");
    await barrier(t, backend);
    assert.equal(backend.received.some((m) => m.payload === "from-forged"), false);
  });

  test("the backend's downstream publish to A reaches A and not B", async (t) => {
    const backend = await connectBackend(t);
    const a = await connectA(t);
    const b = await connectB(t);
    assert.deepEqual(await a.subscribe([topicA("control")]), [1]);
    assert.deepEqual(await b.subscribe([topicB("control")]), [1]);
    await backend.publishAcked(topicA("control"), "cmd-for-a");
    await a.waitFor((m) => m.payload === "cmd-for-a", "A's command");
    // Barrier on B: B's own command arrives; A's never did.
    await backend.publishAcked(topicB("control"), "cmd-for-b");
    await b.waitFor((m) => m.payload === "cmd-for-b", "B's command");
    assert.deepEqual(b.received.map((m) => m.payload), ["cmd-for-b"]);
    assert.deepEqual(a.received.map((m) => m.payload), ["cmd-for-a"]);
  });

  test("the backend may not publish upstream (impersonating a node) nor retained", async (t) => {
    const watcher = await connectBackend(t);
    const backend = await connectBackend(t);
    backend.publish(topicA("event"), "backend-as-a", { qos: 1 });
    await within(backend.closed, "the backend's disconnect after an upstream publish");
    const backend2 = await connectBackend(t);
    const a = await connectA(t);
    assert.deepEqual(await a.subscribe([topicA("control")]), [1]);
    backend2.publish(topicA("control"), "retained-cmd", { qos: 1, retain: true });
    await within(backend2.closed, "the backend's disconnect after a retained publish");
    await barrier(t, watcher);
    assert.equal(watcher.received.some((m) => m.payload === "backend-as-a"), false);
    assert.equal(a.received.some((m) => m.payload === "retained-cmd"), false);
  });
});

describe("embedded broker: kick, will and size cap", () => {
  test("kick(A) disconnects A and the backend receives A's will on A's event topic (spec §6.3 LWT, §4 rule 12)", async (t) => {
    const backend = await connectBackend(t);
    const a = await connectA(t, { will: offlineWill(A) });
    const clientId = nodeClientId(A.configId, A.nodeId);
    assert.equal(broker.isConnected(clientId), true);
    assert.equal(broker.kick(clientId), true);
    await within(a.closed, "A's disconnect");
    const will = await backend.waitFor((m) => m.topic === topicA("event"), "A's will");
    const envelope = JSON.parse(will.payload) as { type: string; node_id: string; boot_id: string; payload: { event: string } };
    assert.equal(envelope.type, "event");
    assert.equal(envelope.node_id, A.nodeId);
    assert.equal(envelope.boot_id, "");
    assert.equal(envelope.payload.event, "offline");
    assert.equal(will.retain, false);
    assert.equal(broker.isConnected(clientId), false);
    assert.equal(broker.kick(clientId), false, "nothing left to kick");
  });

  test("kick of an unknown client id answers false", () => {
    assert.equal(broker.kick("svc-cfg-1-nobody"), false);
    assert.equal(broker.kick("__proto__"), false);
    assert.equal(broker.isConnected("constructor"), false);
  });

  test("an envelope of MAX_ENVELOPE_BYTES is delivered; a publish over the cap disconnects the client", async (t) => {
    const backend = await connectBackend(t);
    const a = await connectA(t);
    const big = `max-${"x".repeat(MAX_ENVELOPE_BYTES - 4)}`;
    await a.publishAcked(topicA("event"), big);
    await backend.waitFor((m) => m.payload.length === MAX_ENVELOPE_BYTES, "the largest envelope");

    const a2 = await connectA(t);
    const tooBig = `big-${"y".repeat(MAX_ENVELOPE_BYTES + 8192)}`;
    a2.publish(topicA("event"), tooBig, { qos: 1 });
    await within(a2.closed, "A's disconnect after an oversize publish");
    await barrier(t, backend);
    assert.equal(backend.received.some((m) => m.payload.startsWith("big-")), false);
  });

  test("a fixed header declaring an oversize packet closes the socket before the body is sent", async () => {
    // Unauthenticated: a CONNECT declaring 100 MB.
    const s1 = await rawSocket(broker.port);
    const closed1 = socketClosed(s1);
    s1.write(Buffer.concat([Buffer.from([0x10]), varint(100_000_000), Buffer.from("MQTT")]));
    await within(closed1, "the socket close after an oversize CONNECT header");

    // Authenticated: a PUBLISH declaring 100 MB after a good CONNECT.
    const s2 = await rawSocket(broker.port);
    const closed2 = socketClosed(s2);
    const connack = new Promise<Buffer>((resolve) => s2.once("data", resolve));
    s2.write(connectPacket(nodeClientId(B.configId, B.nodeId), nodeUsername(B.configId, B.nodeId), PASS_B));
    const ack = await within(connack, "CONNACK on the raw socket");
    assert.deepEqual([...ack.subarray(0, 4)], [0x20, 0x02, 0x00, 0x00], "CONNACK accepted");
    s2.write(Buffer.concat([Buffer.from([0x30]), varint(100_000_000), Buffer.from([0x00, 0x03]), Buffer.from("svc")]));
    await within(closed2, "the socket close after an oversize PUBLISH header");
  });
});

describe("PacketFramer", () => {
  test("follows packet boundaries across chunks of any size", () => {
    const packets = Buffer.concat([
      Buffer.from([0xc0, 0x00]), // PINGREQ
      Buffer.concat([Buffer.from([0x30]), varint(200), Buffer.alloc(200, 1)]),
      Buffer.concat([Buffer.from([0x30]), varint(20_000), Buffer.alloc(20_000, 2)]),
      Buffer.from([0xe0, 0x00]), // DISCONNECT
    ]);
    for (const size of [1, 2, 3, 7, 127, 4096, packets.length]) {
      const f = new PacketFramer(20_000 + 4);
      for (let i = 0; i < packets.length; i += size) assert.equal(f.feed(packets.subarray(i, i + size)), null, `chunk ${size}`);
    }
  });

  test("reports the first packet over the cap, and a malformed length", () => {
    const f = new PacketFramer(100);
    assert.equal(f.feed(Buffer.concat([Buffer.from([0x30]), varint(96), Buffer.alloc(96)])), null);
    assert.equal(f.feed(Buffer.concat([Buffer.from([0x30]), varint(99)])), 101);
    const g = new PacketFramer(100);
    assert.equal(g.feed(Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x01])), Number.POSITIVE_INFINITY);
  });
});

describe("embedded broker lifecycle", () => {
  test("close() disconnects clients, stops listening and is idempotent", async (t) => {
    const own = await EmbeddedBroker.start({ host: "127.0.0.1", port: 0, users: lookup, log: createLogger("silent"), drainTimeoutMs: 1000 });
    const client = mqtt.connect(`mqtt://127.0.0.1:${own.port}`, options(nodeUsername(A.configId, A.nodeId), PASS_A, nodeClientId(A.configId, A.nodeId)));
    t.after(() => new Promise<void>((resolve) => client.end(true, {}, () => resolve())));
    const peer = new Peer(client);
    await within(new Promise<void>((resolve, reject) => { client.once("connect", () => resolve()); client.once("error", reject); }), "CONNACK");
    const idle = await rawSocket(own.port); // never sends CONNECT
    const idleClosed = socketClosed(idle);
    assert.equal(own.connectedCount(), 1);
    await within(Promise.all([own.close(), own.close()]), "broker close");
    await within(peer.closed, "client disconnect on close");
    await within(idleClosed, "idle socket close");
    await assert.rejects(rawSocket(own.port));
  });

  test("a subscriber that never reads is dropped after drainTimeout and delivery to others goes on", async (t) => {
    const own = await EmbeddedBroker.start({ host: "127.0.0.1", port: 0, users: lookup, log: createLogger("silent"), drainTimeoutMs: 300 });
    t.after(() => own.close());
    const connectOwn = async (username: string, pass: string, clientId: string): Promise<Peer> => {
      const client = mqtt.connect(`mqtt://127.0.0.1:${own.port}`, options(username, pass, clientId));
      t.after(() => new Promise<void>((resolve) => client.end(true, {}, () => resolve())));
      const peer = new Peer(client);
      await within(new Promise<void>((resolve, reject) => { client.once("connect", () => resolve()); client.once("error", reject); }), `CONNACK for ${clientId}`);
      return peer;
    };
    const backend = await connectOwn(BACKEND_USER, PASS_BACKEND, "svc-backend-drain");
    assert.deepEqual(await backend.subscribe(backendSubscriptions()), backendSubscriptions().map(() => 1));
    const a = await connectOwn(nodeUsername(A.configId, A.nodeId), PASS_A, nodeClientId(A.configId, A.nodeId));
    assert.deepEqual(await a.subscribe([topicA("control")]), [1]);

    // B on a raw socket: connects with its will, subscribes to its control topic, then stops reading.
    const b = await rawSocket(own.port);
    t.after(() => { b.destroy(); });
    const will = offlineWill(B);
    const replies = new Promise<void>((resolve) => {
      let got = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        got = Buffer.concat([got, chunk]);
        // CONNACK (4 bytes) then SUBACK (5 bytes) with return code 0.
        if (got.length >= 9) {
          b.off("data", onData);
          b.pause();
          resolve();
        }
      };
      b.on("data", onData);
    });
    b.write(connectPacket(nodeClientId(B.configId, B.nodeId), nodeUsername(B.configId, B.nodeId), PASS_B, { topic: will.topic, payload: will.payload as Buffer }));
    b.write(subscribePacket(1, topicB("control"), 0));
    await within(replies, "CONNACK and SUBACK on the raw socket");

    // Flood B until its socket buffers fill; aedes then waits for 'drain', which never comes.
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    for (let i = 0; i < 400; i++) backend.publish(topicB("control"), chunk, { qos: 0 });
    const willAtBackend = await backend.waitFor((m) => m.topic === topicB("event"), "B's will after the drain timeout", 15_000);
    assert.equal((JSON.parse(willAtBackend.payload) as { payload: { event: string } }).payload.event, "offline");
    assert.equal(own.isConnected(nodeClientId(B.configId, B.nodeId)), false);

    // Delivery to A is not stalled.
    await backend.publishAcked(topicA("control"), "after-drain");
    await a.waitFor((m) => m.payload === "after-drain", "A's command after B was dropped");
  });

  test("start() rejects when the port is taken", async () => {
    await assert.rejects(EmbeddedBroker.start({ host: "127.0.0.1", port: broker.port, users: lookup, log: createLogger("silent") }), /EADDRINUSE/);
  });
});

// ---- raw MQTT bytes --------------------------------------------------------------------------

function varint(n: number): Buffer {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return Buffer.from(out);
}

function str(s: string): Buffer {
  const b = Buffer.from(s, "utf8");
  return Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
}

function connectPacket(clientId: string, username: string, pass: string, will?: { topic: string; payload: Buffer }): Buffer {
  // Flags: username, password, clean session; with a will: will flag and will QoS 1 (not retained).
  const flags = 0x80 | 0x40 | 0x02 | (will ? 0x04 | 0x08 : 0);
  const variable = Buffer.concat([str("MQTT"), Buffer.from([4, flags, 0x00, 0x3c])]);
  const willPart = will
    ? Buffer.concat([str(will.topic), Buffer.from([will.payload.length >> 8, will.payload.length & 0xff]), will.payload])
    : Buffer.alloc(0);
  const payload = Buffer.concat([str(clientId), willPart, str(username), str(pass)]);
  const body = Buffer.concat([variable, payload]);
  return Buffer.concat([Buffer.from([0x10]), varint(body.length), body]);
}

function subscribePacket(messageId: number, filter: string, qos: number): Buffer {
  const body = Buffer.concat([Buffer.from([messageId >> 8, messageId & 0xff]), str(filter), Buffer.from([qos])]);
  return Buffer.concat([Buffer.from([0x82]), varint(body.length), body]);
}

function rawSocket(port: number): Promise<Socket> {
  return within(
    new Promise<Socket>((resolve, reject) => {
      const s = netConnect(port, "127.0.0.1", () => {
        s.off("error", reject);
        s.on("error", () => undefined);
        resolve(s);
      });
      s.once("error", reject);
    }),
    "raw TCP connect",
  );
}

function socketClosed(s: Socket): Promise<void> {
  return new Promise((resolve) => {
    s.resume(); // read and discard whatever the broker sends
    s.once("close", () => resolve());
  });
}

/** Connects once over the network; resolves 0 on CONNACK accepted, else the refusal's return code. */
async function connackCode(t: TestContext, port: number, username: string, pass: string, clientId: string): Promise<{ code: number; client: MqttClient }> {
  const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, options(username, pass, clientId));
  t.after(() => new Promise<void>((resolve) => client.end(true, {}, () => resolve())));
  const code = await within(
    new Promise<number>((resolve, reject) => {
      client.once("connect", () => resolve(0));
      client.once("error", (err: Error & { code?: number }) => (typeof err.code === "number" ? resolve(err.code) : reject(err)));
      client.once("close", () => reject(new Error("closed before CONNACK")));
    }),
    `CONNACK for ${clientId}`,
  );
  return { code, client };
}

describe("embedded broker: the backend account while the backend is linked in-process (DESIGN §3 Broker identity)", () => {
  test("network CONNECTs as the backend get CONNACK 5 while the link is open (right or wrong password), a network backend already connected is cut off, nodes are unaffected, and the account works again once the link closes", async (t) => {
    const own = await EmbeddedBroker.start({ host: "127.0.0.1", port: 0, users: lookup, log: createLogger("silent") });
    t.after(() => own.close());

    // Before any link: the backend account logs in over the network (external-broker mode uses it).
    const early = await connackCode(t, own.port, BACKEND_USER, PASS_BACKEND, "svc-backend-early");
    assert.equal(early.code, 0, "no link yet: accepted");
    const earlyClosed = new Promise<void>((resolve) => early.client.once("close", () => resolve()));

    const received: string[] = [];
    const link = await own.attachBackend(backendSubscriptions(), (topic) => received.push(topic));
    await within(earlyClosed, "the network backend client is disconnected when the in-process link attaches");

    assert.equal((await connackCode(t, own.port, BACKEND_USER, PASS_BACKEND, "svc-backend-net")).code, 5, "right password: not authorized");
    assert.equal((await connackCode(t, own.port, BACKEND_USER, password(), "svc-backend-net2")).code, 5, "wrong password: same answer, no oracle");
    assert.equal(own.isConnected("svc-backend-net"), false);

    // A node still connects and reaches the in-process backend.
    const a = await connackCode(t, own.port, nodeUsername(A.configId, A.nodeId), PASS_A, nodeClientId(A.configId, A.nodeId));
    assert.equal(a.code, 0);
    await a.client.publishAsync(topicA("heartbeat"), "{}", { qos: 1 });
    await within(
      (async () => {
        while (!received.includes(topicA("heartbeat"))) await new Promise((r) => setImmediate(r));
      })(),
      "the node's heartbeat on the link",
    );

    await link.close();
    assert.equal((await connackCode(t, own.port, BACKEND_USER, PASS_BACKEND, "svc-backend-after")).code, 0, "link closed: the account is usable again");
  });
});

test("the service with its embedded broker refuses a network login with the backend's own username and password (CONNACK 5)", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-broker-backend-"));
  const backendPassword = password();
  const server = await createServer(
    testSettings({ dataDir, adminPassword: "correct horse battery staple", mqttBackendPassword: backendPassword }),
    createLogger("silent"),
    { clock: new ManualClock() },
  );
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const port = server.mqtt.broker!.port;
  const settingsUser = testSettings().mqttBackendUsername;
  assert.equal((await connackCode(t, port, settingsUser, backendPassword, "svc-backend-intruder")).code, 5);
  assert.equal((await connackCode(t, port, settingsUser, password(), "svc-backend-intruder2")).code, 5);
});
