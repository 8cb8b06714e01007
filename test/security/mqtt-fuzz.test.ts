import assert from "node:assert/strict";
import { connect as tcpConnect } from "node:net";
import { test } from "node:test";
import type { MqttClient } from "mqtt";
import { generate, parser, type Packet } from "mqtt-packet";
import { isoTime } from "../../src/lib/clock.js";
import { MAX_ENVELOPE_BYTES } from "../../src/protocol/envelope.schema.js";
import { api, bind, connectAgent, dynamicNode, envelope, eventually, nextMessage, status, type Profile } from "../control/agent-harness.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { mulberry32, seedFromEnv } from "./seed.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * MQTT fuzzing against the real embedded aedes broker and the backend behind
 * it. An authenticated agent (node A) and unauthenticated clients send generated packets and
 * payloads; raw packets are written with `mqtt-packet` where mqtt.js would refuse to send them.
 * Seeded (SVC_TEST_SEED); the seed and a table of packets per class are printed.
 *
 * What must hold (spec §5, §6.1-§6.4):
 * - the backend never crashes: it answers HTTP and a fresh agent connects and is seen online;
 * - no foreign topic is delivered: node B, subscribed to its own downstream topics, receives
 *   nothing while A fuzzes (spec §5 rules 1-2);
 * - no node other than the sender changes: B, C (another config) and a static node keep their
 *   rows byte for byte (nodes, node_client_state, control_logs, bind_tokens);
 * - the sender changes only as the spec allows: A's node row, credentials, client version,
 *   platform and hostname are unchanged (client version comes only from detect ACKs of real
 *   detects, spec §2.7); A's commands: the one A acknowledged stays `applied` however often it
 *   is replayed, the one still open stays open (only an ACK of the same kind and request_id
 *   closes it, spec §6.4 rule 2); new control logs of A are only its events (spec §6.4 rule 9);
 *   presence and runtime move only through the §3.1 / §6.4 rule 6 signals.
 */

const SEED = seedFromEnv();
const PACKETS = Number(process.env.SVC_MQTT_FUZZ_PACKETS ?? 10_000);

type Row = Record<string, unknown>;

/** Every row a node owns, as JSON, in a stable order. */
function fingerprint(s: SseServer, nodeId: string): string {
  const q = (sql: string) => sqliteOf(s.server.store).prepare(sql).all(nodeId) as Row[];
  return JSON.stringify({
    node: q("SELECT * FROM nodes WHERE node_id = ?"),
    state: q("SELECT * FROM node_client_state WHERE node_id = ?"),
    logs: q("SELECT * FROM control_logs WHERE node_id = ? ORDER BY rowid"),
    tokens: q("SELECT * FROM bind_tokens WHERE node_id = ? ORDER BY rowid"),
  });
}

/** The columns of the sender that no upstream message may change (spec §2.7, §4 rule 11). */
function senderFixed(s: SseServer, nodeId: string): string {
  const q = (sql: string) => sqliteOf(s.server.store).prepare(sql).all(nodeId) as Row[];
  return JSON.stringify({
    node: q("SELECT * FROM nodes WHERE node_id = ?"),
    state: q("SELECT client_initialized, client_version, platform, hostname, mqtt_username, mqtt_password_hash FROM node_client_state WHERE node_id = ?"),
    tokens: q("SELECT * FROM bind_tokens WHERE node_id = ? ORDER BY rowid"),
  });
}

interface RawResult {
  closed: boolean;
  /** The broker neither answered nor closed within 1.5 s (a partial packet it waits on); the client then left. */
  held: boolean;
  answers: Packet[];
}

/**
 * One raw TCP session: writes `chunks` (MQTT packets or garbage), then a PINGREQ, and waits until
 * the broker closes the socket or answers the PINGREQ. A broker that waits for the rest of a
 * partial packet is left by the client after 1.5 s (aedes's own connect timeout would close it
 * after 10 s). Bounded: fails after 5 s.
 */
function rawSession(port: number, chunks: Buffer[], what: string): Promise<RawResult> {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect({ host: "127.0.0.1", port });
    const answers: Packet[] = [];
    const p = parser({ protocolVersion: 4 });
    p.on("packet", (packet: Packet) => {
      answers.push(packet);
      if (packet.cmd === "pingresp") socket.end();
    });
    p.on("error", () => undefined);
    let done = false;
    let held = false;
    const leave = setTimeout(() => {
      held = true;
      socket.end();
    }, 1500);
    const timer = setTimeout(() => reject(new Error(`${what}: raw session neither closed nor answered within 5 s: ${answers.map((a) => a.cmd).join(",")}`)), 5000);
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(leave);
      socket.destroy();
      resolve({ closed, held, answers });
    };
    socket.on("data", (d) => p.parse(d));
    socket.on("error", () => undefined);
    socket.on("close", () => finish(!held && !answers.some((a) => a.cmd === "pingresp")));
    socket.on("connect", () => {
      for (const c of chunks) socket.write(c);
      socket.write(generate({ cmd: "pingreq" }));
    });
  });
}

const connectPacket = (o: { clientId: string; username?: string; password?: string; protocolVersion?: 4 | 5 }): Buffer =>
  generate({
    cmd: "connect",
    protocolId: "MQTT",
    protocolVersion: 4,
    clean: true,
    keepalive: 30,
    ...o,
    ...(o.password === undefined ? {} : { password: Buffer.from(o.password) }),
  } as Packet);

const publishPacket = (topic: string, payload: Buffer | string, o: { qos?: 0 | 1 | 2; retain?: boolean; messageId?: number } = {}): Buffer =>
  generate({ cmd: "publish", topic, payload: typeof payload === "string" ? Buffer.from(payload) : payload, qos: o.qos ?? 1, retain: o.retain ?? false, dup: false, messageId: o.messageId ?? 7 } as Packet);

/** A PUBLISH whose topic bytes are patched to invalid UTF-8 (mqtt-packet writes valid UTF-8 only). */
function badUtf8TopicPublish(topic: string): Buffer {
  const buf = publishPacket(topic, "{}");
  const at = buf.indexOf(Buffer.from(topic)) + topic.length - 1;
  buf[at] = 0xff;
  return buf;
}

interface World {
  s: SseServer;
  a: Profile;
  b: Profile;
  c: Profile;
  staticNodeId: string;
  agentA: MqttClient;
  agentB: MqttClient;
  /** A's acknowledged (applied) and still open commands; B's open commands. */
  aApplied: string;
  aOpen: string;
  bOpen: string[];
}

async function world(t: Parameters<typeof startSseServer>[0]): Promise<World> {
  const s = await startSseServer(t);
  const one = await dynamicNode(s);
  const a = await bind(s, one.configId, one.nodeId);
  const bNode = await api(s, "POST", `/api/v1/configs/${one.configId}/nodes`, { name: "b", mode: "dynamic", public_address: "192.0.2.8" });
  const b = await bind(s, one.configId, bNode.json.node_id);
  const st = await api(s, "POST", `/api/v1/configs/${one.configId}/nodes`, { name: "s", mode: "static", public_address: "192.0.2.9" });
  const two = await dynamicNode(s);
  const c = await bind(s, two.configId, two.nodeId);
  const agentA = await connectAgent(s, a);
  const agentB = await connectAgent(s, b);
  t.after(() => {
    agentA.end(true);
    agentB.end(true);
  });
  for (const [p, agent] of [[a, agentA], [b, agentB]] as const) {
    await agent.publishAsync(p.topics.heartbeat as string, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
    await eventually("online", async () => ((await status(s, p.profile.config_id, p.profile.node_id)).client_presence_state === "online" ? true : undefined));
  }
  const control = async (p: Profile, agent: MqttClient, action: string, topic: string) => {
    const got = nextMessage(agent, topic);
    const sent = await api(s, "POST", `/api/v1/configs/${p.profile.config_id}/nodes/${p.profile.node_id}/control`, { action });
    assert.equal(sent.status, 202, JSON.stringify(sent.json));
    await got;
    return sent.json.request_id as string;
  };
  const aApplied = await control(a, agentA, "stop", a.topics.control as string);
  await agentA.publishAsync(a.topics.control_ack as string, envelope(a, "ack", { status: "applied", message: "", action: "stop" }, aApplied), { qos: 1 });
  const logStatus = (id: string) => (sqliteOf(s.server.store).prepare("SELECT status FROM control_logs WHERE request_id = ?").get(id) as { status: string } | undefined)?.status;
  await eventually("applied", () => (logStatus(aApplied) === "applied" ? true : undefined));
  const aOpen = await control(a, agentA, "stop", a.topics.control as string);
  const bOpen = [await control(b, agentB, "stop", b.topics.control as string), await control(b, agentB, "wg_show", b.topics.info as string)];
  return { s, a, b, c, staticNodeId: st.json.node_id, agentA, agentB, aApplied, aOpen, bOpen };
}

/** Seeded generators of hostile payloads for A's own upstream topics. */
function payloads(rnd: () => number, w: World) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(rnd() * 256)));
  const env = (over: Record<string, unknown>, payload: unknown, type = "ack", requestId = "") => ({
    type,
    request_id: requestId,
    config_id: w.a.profile.config_id,
    node_id: w.a.profile.node_id,
    boot_id: "boot-f",
    session_id: "session-f",
    sent_at: isoTime(Date.now()),
    payload,
    ...over,
  });
  const ackTopics = [w.a.topics.control_ack, w.a.topics.info_ack, w.a.topics.detect_ack, w.a.topics.config_push_ack] as string[];
  return {
    bad_utf8: () => ({ topic: pick([...ackTopics, w.a.topics.event, w.a.topics.heartbeat] as string[]), payload: Buffer.concat([Buffer.from('{"type":"'), bytes(1 + Math.floor(rnd() * 40)), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')]) }),
    not_json: () => ({ topic: w.a.topics.heartbeat as string, payload: Buffer.from(pick(["", "{", "null", "[]", "1e309", '{"type":', "\u0000", "{}}", "NaN", "true"]) + bytes(Math.floor(rnd() * 8)).toString("latin1")) }),
    json_not_envelope: () => ({
      topic: pick([w.a.topics.heartbeat, w.a.topics.event, w.a.topics.control_ack] as string[]),
      payload: Buffer.from(
        pick([
          () => JSON.stringify({ __proto__: { polluted: true }, constructor: { prototype: { polluted: true } } }),
          () => `{"__proto__":{"polluted":true},"type":"heartbeat"}`,
          () => "[".repeat(5000) + "]".repeat(5000),
          () => JSON.stringify({ type: 1, request_id: null }),
          () => JSON.stringify(env({ sent_at: "yesterday" }, {})),
          () => JSON.stringify(env({ config_id: undefined }, {})),
          () => JSON.stringify(env({ request_id: "r".repeat(129) }, {})),
        ])(),
      ),
    }),
    envelope_mismatched_ids: () => {
      const other = pick([w.b, w.c]);
      const over = pick([{ config_id: other.profile.config_id }, { node_id: other.profile.node_id }, { config_id: other.profile.config_id, node_id: other.profile.node_id }]);
      return { topic: pick([w.a.topics.heartbeat, w.a.topics.event] as string[]), payload: Buffer.from(JSON.stringify(env(over, { client_online: true, wg_online: false, level: "info", event: "x", message: "m" }, "heartbeat"))) };
    },
    bad_payload: () => ({
      topic: pick(ackTopics),
      payload: Buffer.from(JSON.stringify(env({}, pick([{ status: "done" }, { status: "applied", message: 5 }, { client_online: "yes" }, null, [], { status: "applied", message: "x".repeat(70_000) }]), "ack", "req-x"))),
    }),
    replayed_request_id: () => ({
      topic: w.a.topics.control_ack as string,
      payload: Buffer.from(JSON.stringify(env({}, { status: pick(["applied", "failed", "accepted"]), message: "replay", action: "start" }, "ack", w.aApplied))),
    }),
    ack_for_other_node: () => {
      const rid = pick(w.bOpen);
      const asB = rnd() < 0.5 ? { config_id: w.b.profile.config_id, node_id: w.b.profile.node_id } : {};
      return { topic: pick([w.a.topics.control_ack, w.a.topics.info_ack] as string[]), payload: Buffer.from(JSON.stringify(env(asB, { status: "applied", message: "not mine", action: "start" }, "ack", rid))) };
    },
    ack_wrong_kind: () => ({
      topic: pick([w.a.topics.info_ack, w.a.topics.detect_ack, w.a.topics.config_push_ack] as string[]),
      payload: Buffer.from(JSON.stringify(env({}, { status: "applied", message: "wrong kind", action: "stop", client_online: true, wg_online: true, platform: "evil", client_version: "9.9.9" }, "ack", w.aOpen))),
    }),
    oversized: () => ({ topic: w.a.topics.event as string, payload: Buffer.alloc(MAX_ENVELOPE_BYTES + 1 + Math.floor(rnd() * 3000), 0x20) }),
    flood_valid: () => ({
      topic: pick([w.a.topics.heartbeat, w.a.topics.event] as string[]),
      payload: Buffer.from(
        JSON.stringify(
          pick([
            () => env({}, { client_online: true, wg_online: rnd() < 0.5 }, "heartbeat"),
            () => env({}, { level: "info", event: "fuzz", message: "flood" }, "event"),
            () => env({ boot_id: "", session_id: "" }, { level: "info", event: "offline", message: "lwt-like" }, "event"),
          ])(),
        ),
      ),
    }),
  };
}

test(`spec §5 rules 1-2, §6.1-§6.4: ${PACKETS} generated MQTT packets from an authenticated agent and unauthenticated clients: the backend never crashes, no foreign topic is delivered, no other node changes, the sender changes only as the spec allows`, async (t) => {
  const started = Date.now();
  const w = await world(t);
  const { s, a, b, c } = w;
  const port = s.server.mqtt.broker?.port;
  assert.ok(port !== undefined);
  const rnd = mulberry32(SEED);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const others = [b.profile.node_id, c.profile.node_id, w.staticNodeId];
  const before = new Map(others.map((id) => [id, fingerprint(s, id)]));
  const fixedA = senderFixed(s, a.profile.node_id);
  const logsBefore = new Set((sqliteOf(s.server.store).prepare("SELECT log_id AS id FROM control_logs").all() as Array<{ id: unknown }>).map((r) => String(r.id)));
  // B, subscribed to its own downstream topics (and refused '#'), must receive nothing.
  const seenByB: string[] = [];
  w.agentB.on("message", (topic) => seenByB.push(topic));
  const wildcard = await w.agentB.subscribeAsync(["#", "svc/#", `svc/${a.profile.config_id}/+/control`], { qos: 1 }).catch((e: { packet?: { granted?: number[] } }) => e.packet?.granted?.map((qos) => ({ qos })) ?? []);
  assert.ok(wildcard.every((g) => g.qos === 128), "wildcard subscriptions refused");

  const counts = new Map<string, number>();
  const count = (cls: string, n = 1) => counts.set(cls, (counts.get(cls) ?? 0) + n);
  const gen = payloads(rnd, w);
  type PayloadClass = keyof typeof gen;
  const classes = Object.keys(gen) as PayloadClass[];
  const marker = (cls: string, i: number) => `FUZZ-${cls}-${i}`;
  const markedEnvelope = (p: Profile, cls: string, i: number) => envelope(p, "event", { level: "info", event: "fuzz", message: marker(cls, i) });

  // Phase 1 (60 %): the authenticated agent's own topics, hostile payloads, mqtt.js at QoS 0/1.
  const phase1 = Math.floor(PACKETS * 0.6);
  let agentA = w.agentA;
  for (let i = 0; i < phase1; ) {
    const burst: Array<Promise<unknown>> = [];
    if (i % 2000 === 1000) {
      // A flood: 500 valid heartbeats at QoS 0 written at once.
      const n = Math.min(500, phase1 - i);
      const hb = envelope(a, "heartbeat", { client_online: true, wg_online: true });
      for (let k = 0; k < n; k++) burst.push(agentA.publishAsync(a.topics.heartbeat as string, hb, { qos: 0 }));
      count("flood_burst", n);
      i += n;
    }
    for (let j = 0; j < 50 && i < phase1; j++, i++) {
      // Oversized payloads (256 KiB each) every 23rd packet; the other classes at random.
      const cls: PayloadClass = i % 23 === 0 ? "oversized" : pick(classes.filter((k) => k !== "oversized"));
      const m = gen[cls]();
      count(cls);
      burst.push(agentA.publishAsync(m.topic, m.payload, { qos: cls === "flood_valid" ? 0 : 1 }).catch(() => undefined));
    }
    await Promise.all(burst);
    if (!agentA.connected) {
      // Never expected: the broker closed the agent's connection over a payload.
      assert.fail("the authenticated agent was disconnected by a payload on its own topic");
    }
  }
  // The last QoS 1 round trip: everything before it has reached the router.
  await agentA.publishAsync(a.topics.heartbeat as string, envelope(a, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  agentA.end(true);

  // Phase 2 (20 %): the authenticated agent, raw packets mqtt.js would not send or the policy denies.
  const credsA = { clientId: a.mqtt.client_id, username: a.mqtt.username, password: a.mqtt.password };
  const foreignTopics = [b.topics.event, b.topics.heartbeat, b.topics.control_ack, c.topics.event, a.topics.control, a.topics.config_push, b.topics.control, "$SYS/broker/x", "svc/x", `svc/${a.profile.config_id}/${b.profile.node_id}/event`] as string[];
  const phase2End = Math.floor(PACKETS * 0.8);
  let sent = phase1;
  let raws = 0;
  let held = 0;
  const rawClasses = ["foreign_topic_publish", "wildcard_topic_publish", "retained_publish", "qos2_publish", "qos3_publish", "bad_utf8_topic", "foreign_subscribe", "garbage_after_connect", "oversized_declared_length"] as const;
  while (sent < phase2End) {
    const batch: Array<Promise<void>> = [];
    for (let j = 0; j < 8 && sent < phase2End; j++) {
      const cls = pick(rawClasses);
      const i = sent;
      const own = a.topics.event as string;
      let chunks: Buffer[];
      let expectClose = true;
      switch (cls) {
        case "foreign_topic_publish": {
          const topic = pick(foreignTopics);
          const target = topic.includes(b.profile.node_id) ? b : topic.includes(c.profile.node_id) ? c : a;
          chunks = [publishPacket(topic, markedEnvelope(target, cls, i))];
          break;
        }
        case "wildcard_topic_publish":
          chunks = [publishPacket(pick(["svc/#", "svc/+/+/event", `svc/${a.profile.config_id}/+/event`, "#", `${own}/#`]), markedEnvelope(a, cls, i))];
          break;
        case "retained_publish":
          chunks = [publishPacket(own, markedEnvelope(a, cls, i), { retain: true })];
          break;
        case "qos2_publish":
          chunks = [publishPacket(own, markedEnvelope(a, cls, i), { qos: 2 })];
          break;
        case "qos3_publish": {
          const p = publishPacket(own, markedEnvelope(a, cls, i), { qos: 1 });
          p[0] = (p[0] ?? 0) | 0x06; // QoS bits 11: malformed
          chunks = [p];
          break;
        }
        case "bad_utf8_topic":
          chunks = [badUtf8TopicPublish(own)];
          break;
        case "foreign_subscribe":
          expectClose = false;
          chunks = [generate({ cmd: "subscribe", messageId: 3, subscriptions: [pick(["#", "svc/#", "svc/+/+/control", b.topics.control, c.topics.config_push, a.topics.heartbeat, "$SYS/#"] as string[])].map((topic) => ({ topic, qos: 1 })) } as Packet)];
          break;
        case "garbage_after_connect":
          chunks = [Buffer.from(Array.from({ length: 1 + Math.floor(rnd() * 64) }, () => Math.floor(rnd() * 256)))];
          expectClose = false; // garbage may parse as something harmless; only survival and no delivery matter
          break;
        case "oversized_declared_length":
          chunks = [Buffer.from([0x30, 0xff, 0xff, 0xff, 0x7f])];
          break;
      }
      count(cls, chunks.length + 2); // + CONNECT + PINGREQ
      sent += chunks.length + 2;
      raws += 1;
      // A SUBSCRIBE's SUBACK is asserted below, so that session runs alone: the sessions of a
      // batch share A's client id, and the next CONNECT takes the connection over (MQTT-3.1.4-2),
      // sometimes before the SUBACK is written (seen with the broker in its own thread).
      if (cls === "foreign_subscribe") await Promise.all(batch.splice(0));
      batch.push(
        rawSession(port, [connectPacket(credsA), ...chunks], cls).then((r) => {
          if (r.held) held += 1;
          const connack = r.answers.find((x) => x.cmd === "connack") as { returnCode?: number } | undefined;
          // A bad packet right behind the CONNECT may close the socket before the CONNACK is written.
          assert.ok(connack === undefined || connack.returnCode === 0, `${cls}: A's CONNECT accepted`);
          assert.ok(!r.answers.some((x) => x.cmd === "puback" || x.cmd === "pubrec"), `${cls}: no publish acknowledged`);
          if (cls === "foreign_subscribe") {
            const suback = r.answers.find((x) => x.cmd === "suback") as { granted?: number[] } | undefined;
            assert.deepEqual(suback?.granted, [128], `${cls}: SUBACK 128`);
          }
          if (expectClose) assert.ok(r.closed, `${cls}: the broker closed the connection`);
        }),
      );
      if (cls === "foreign_subscribe") await Promise.all(batch.splice(0));
    }
    await Promise.all(batch);
  }

  // Phase 3 (20 %): unauthenticated clients.
  const unauthClasses = ["publish_without_connect", "bad_credentials_then_publish", "wildcard_username", "anonymous_connect", "malformed_connect", "garbage"] as const;
  while (sent < PACKETS) {
    const batch: Array<Promise<void>> = [];
    for (let j = 0; j < 8 && sent < PACKETS; j++) {
      const cls = pick(unauthClasses);
      const i = sent;
      const evil = publishPacket(a.topics.event as string, markedEnvelope(a, cls, i));
      let chunks: Buffer[];
      switch (cls) {
        case "publish_without_connect":
          chunks = [evil];
          break;
        case "bad_credentials_then_publish":
          chunks = [connectPacket({ ...credsA, password: pick([`${a.mqtt.password}x`, "", b.mqtt.password]) }), evil];
          break;
        case "wildcard_username":
          chunks = [connectPacket({ clientId: pick(["svc-+-#", "#", a.mqtt.client_id]), username: pick(["#", "+", "n:+:+", `n:${a.profile.config_id}:#`]), password: a.mqtt.password }), evil];
          break;
        case "anonymous_connect":
          chunks = [connectPacket({ clientId: pick(["", "anon", a.mqtt.client_id]) }), evil];
          break;
        case "malformed_connect": {
          const p = connectPacket(credsA);
          p[8] = 9; // protocol level 9
          chunks = [pick([p, p.subarray(0, 6), Buffer.from([0x10, 0x00])]), evil];
          break;
        }
        case "garbage":
          chunks = [Buffer.from(Array.from({ length: 1 + Math.floor(rnd() * 128) }, () => Math.floor(rnd() * 256))), evil];
          break;
      }
      count(cls, chunks.length + 1);
      sent += chunks.length + 1;
      raws += 1;
      batch.push(
        rawSession(port, chunks, cls).then((r) => {
          if (r.held) held += 1;
          assert.ok(!r.answers.some((x) => x.cmd === "puback"), `${cls}: no publish acknowledged`);
          const connack = r.answers.find((x) => x.cmd === "connack") as { returnCode?: number } | undefined;
          assert.ok(connack === undefined || connack.returnCode !== 0, `${cls}: never CONNACK 0`);
        }),
      );
    }
    await Promise.all(batch);
  }

  // The backend is alive: HTTP answers, a fresh connection of A is accepted and seen online.
  assert.equal((await api(s, "GET", "/api/v1/health")).status, 200);
  agentA = await connectAgent(s, a);
  t.after(() => agentA.end(true));
  await agentA.publishAsync(a.topics.heartbeat as string, envelope(a, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });
  await eventually("A online again", async () => ((await status(s, a.profile.config_id, a.profile.node_id)).client_presence_state === "online" ? true : undefined));
  for (const id of others) assert.equal(fingerprint(s, id), before.get(id), `node ${id} unchanged`);
  // B received nothing while A fuzzed, and still gets its own downstream traffic.
  assert.deepEqual(seenByB, [], "B received nothing while A fuzzed");
  const own = nextMessage(w.agentB, b.topics.control as string);
  assert.equal((await api(s, "POST", `/api/v1/configs/${b.profile.config_id}/nodes/${b.profile.node_id}/control`, { action: "stop" })).status, 202);
  await own;

  // The sender: its fixed columns, its commands, and only event logs added.
  assert.equal(senderFixed(s, a.profile.node_id), fixedA, "A's node row, credentials, client version, platform, hostname unchanged");
  const logOf = (id: string) => sqliteOf(s.server.store).prepare("SELECT status FROM control_logs WHERE request_id = ? AND kind NOT IN ('event', 'output')").get(id) as { status: string } | undefined;
  assert.equal(logOf(w.aApplied)?.status, "applied", "a replayed ACK changes nothing (spec §6.4 rule 2)");
  assert.equal(logOf(w.aOpen)?.status, "pending", "an ACK of another kind does not close A's open control command");
  for (const rid of w.bOpen) assert.equal(logOf(rid)?.status, "pending", "A's ACKs for B's commands close nothing");
  const added = (sqliteOf(s.server.store).prepare("SELECT log_id AS id, node_id, kind, message FROM control_logs").all() as Array<{ id: unknown; node_id: string; kind: string; message: string | null }>).filter((r) => !logsBefore.has(String(r.id)));
  const addedBesidesBStop = added.filter((r) => !(r.node_id === b.profile.node_id && r.kind === "command"));
  assert.deepEqual([...new Set(addedBesidesBStop.map((r) => `${r.node_id === a.profile.node_id ? "A" : r.node_id}:${r.kind}`))].sort(), ["A:event"], "new control logs are A's events only");
  const leaked = added.filter((r) => r.message?.startsWith("FUZZ-"));
  assert.deepEqual(leaked, [], "no denied or unauthenticated publish reached the backend");
  assert.equal(({} as Record<string, unknown>).polluted, undefined, "no prototype pollution");

  const total = [...counts.values()].reduce((x, y) => x + y, 0);
  const table = [...counts].sort(([x], [y]) => x.localeCompare(y)).map(([k, v]) => `#   ${k.padEnd(28)} ${String(v).padStart(6)}`);
  console.log(`# mqtt fuzz (seed ${SEED}): ${total} packets, ${raws} raw sessions (${held} left by the client while the broker waited for the rest of a partial packet), router dropped ${JSON.stringify(Object.fromEntries(s.server.router.dropped))}, wall_ms=${Date.now() - started}\n${table.join("\n")}`);
  assert.ok(total >= PACKETS, `${total} packets sent`);
});
