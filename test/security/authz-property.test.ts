import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import type { Aedes, Client, PublishPacket } from "aedes";
import fc from "fast-check";
import mqtt, { type MqttClient } from "mqtt";
import { authorize, nodeClientId, nodeUsername, type BrokerIdentity } from "../../src/mqtt/authz.policy.js";
import { api, dynamicNode } from "../control/agent-harness.js";
import { startSseServer, type SseServer } from "../events/sse-harness.js";
import { repoRoot } from "../helpers/service.js";
import { bindNode, dynamicNode as mosquittoNode, mosquitto, mosquittoSettings, startService, tempDataDir, until, type MosquittoBroker, type Service } from "../mqtt/mosquitto-harness.js";
import { seedFromEnv } from "./seed.js";

/**
 * Authorization as a property. Generated (identity, action, topic, QoS, retain)
 * cases, seeded with fast-check, are judged by every layer that decides MQTT authorization:
 *
 * 1. the pure policy (`authorize`, src/mqtt/authz.policy.ts);
 * 2. the embedded broker's aedes hooks (authenticate, then authorizePublish / authorizeSubscribe),
 *    called as aedes calls them, on the real broker of a running service;
 * 3. `POST /api/internal/emqx/authz` over real HTTP, as EMQX asks it; a non-200 answer is
 *    EMQX's `nomatch`, decided by `no_match` of deploy/emqx/emqx-svc.hocon.example;
 * 4. a real Mosquitto 2.0 with the dynamic-security roles the adapter writes, observed with
 *    real MQTT 5 clients (CONNACK, PUBACK reason code 0x87, SUBACK reason codes, disconnects);
 *
 * and each answer must equal {@link reference}, written here from the spec. Figures printed for
 * docs/reliability.md.
 */

const SEED = seedFromEnv();
const CASES = Number(process.env.SVC_AUTHZ_CASES ?? 10_000);
const MOSQUITTO_CASES = Number(process.env.SVC_AUTHZ_MOSQUITTO_CASES ?? CASES);
const KEY = "authz-property-shared-key-0123456789";
const BACKEND_USER = "svc-backend";
const BACKEND_PASSWORD = "authz-property-backend-password";

// ---------------------------------------------------------------------------------------------
// The reference model, from the spec alone (not from src/).

/** spec §6.1: the topic suffixes, by direction. */
const DOWN = ["config/push", "control", "detect", "info"];
const UP = ["config/push/ack", "control/ack", "detect/ack", "info/ack", "event", "heartbeat"];
/** DESIGN §3 "Identifiers": the shape of a config_id / node_id. */
const ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;

type ModelIdentity = { kind: "node"; c: string; n: string } | { kind: "backend" } | null;

/**
 * The answer the spec asks for.
 * - spec §5 rule 1: a node publishes only to its own upstream topics and subscribes only to its
 *   own downstream topics (spec §6.1, each named exactly);
 * - spec §5 rule 2: no wildcard grant: a node's filter or topic with `+`/`#` is never its own;
 * - spec §5 rule 3: the backend subscribes to every upstream topic (`svc/+/+/{up}`) and
 *   publishes to downstream topics of well-formed nodes (DESIGN §3 ids);
 * - spec §6.4 rule 5: nothing is retained: a retained publish is denied;
 * - spec §6.4 / DESIGN §3: the protocol uses QoS 0 and 1 only: QoS 2 is denied;
 * - an unknown or unauthenticated identity is denied everything (spec §5 "Agent to broker").
 */
function reference(id: ModelIdentity, action: "publish" | "subscribe", topic: string, qos: number, retain: boolean): "allow" | "deny" {
  if (id === null) return "deny";
  if (qos > 1) return "deny";
  if (action === "publish" && retain) return "deny";
  if (id.kind === "node") {
    const own = (action === "publish" ? UP : DOWN).map((s) => `svc/${id.c}/${id.n}/${s}`);
    return own.includes(topic) ? "allow" : "deny";
  }
  if (action === "subscribe") return UP.map((s) => `svc/+/+/${s}`).includes(topic) ? "allow" : "deny";
  const m = /^svc\/([^/]*)\/([^/]*)\/(.*)$/.exec(topic);
  return m !== null && ID.test(m[1] ?? "") && ID.test(m[2] ?? "") && DOWN.includes(m[3] ?? "") ? "allow" : "deny";
}

// ---------------------------------------------------------------------------------------------
// Worlds: the same abstract cases instantiated against each service's own bound nodes.

interface BoundNode {
  c: string;
  n: string;
  password: string;
}

/** The nodes of one service: A and B in one config, C in another, U dynamic but never bound. */
interface World {
  A: BoundNode;
  B: BoundNode;
  C: BoundNode;
  U: { c: string; n: string };
}

/** Who connects or is asked about, by name; see {@link who}. */
const WHO = ["A", "B", "C", "A_stale_password", "A_with_B_client_id", "A_wildcard_client_id", "U_never_bound", "user_hash", "user_plus", "user_cfg_plus", "user_slash_hash", "backend"] as const;
type WhoName = (typeof WHO)[number];

interface Who {
  username: string;
  password: string;
  clientId: string;
  /** The identity once the password is checked (hooks, Mosquitto). */
  authenticated: ModelIdentity;
  /** The identity the HTTP endpoint judges (EMQX authenticated the password before asking). */
  asked: ModelIdentity;
}

/** CVE-2017-7650: `+`/`#` in client ids and usernames are among the identities. */
function who(w: World, name: WhoName): Who {
  const node = (x: BoundNode): Who => {
    const id = { kind: "node" as const, c: x.c, n: x.n };
    return { username: nodeUsername(x.c, x.n), password: x.password, clientId: nodeClientId(x.c, x.n), authenticated: id, asked: id };
  };
  const stranger = (username: string, clientId: string): Who => ({ username, password: "guess", clientId, authenticated: null, asked: null });
  switch (name) {
    case "A":
    case "B":
    case "C":
      return node(w[name]);
    case "A_stale_password":
      return { ...node(w.A), password: `${w.A.password}-old`, authenticated: null };
    case "A_with_B_client_id":
      return { ...node(w.A), clientId: nodeClientId(w.B.c, w.B.n), authenticated: null, asked: null };
    case "A_wildcard_client_id":
      return { ...node(w.A), clientId: "svc-+-#", authenticated: null, asked: null };
    case "U_never_bound":
      return stranger(nodeUsername(w.U.c, w.U.n), nodeClientId(w.U.c, w.U.n));
    case "user_hash":
      return stranger("#", "svc-#");
    case "user_plus":
      return stranger("n:+:+", "svc-+-+");
    case "user_cfg_plus":
      return stranger(`n:${w.A.c}:+`, `svc-${w.A.c}-+`);
    case "user_slash_hash":
      return stranger("svc/#", "svc/#");
    case "backend":
      return { username: BACKEND_USER, password: BACKEND_PASSWORD, clientId: "svc-authz-backend-probe", authenticated: { kind: "backend" }, asked: { kind: "backend" } };
  }
}

/** A topic template: `{S.c}`/`{S.n}` are the asking node's ids (A's for non-nodes), `{O.c}`/`{O.n}` another node's. */
function instantiate(w: World, name: WhoName, template: string): string {
  const self = name === "B" ? w.B : name === "C" ? w.C : w.A;
  const other = name === "C" ? w.A : name === "B" ? w.C : w.B;
  return template.replaceAll("{S.c}", self.c).replaceAll("{S.n}", self.n).replaceAll("{O.c}", other.c).replaceAll("{O.n}", other.n).replaceAll("{U.n}", w.U.n);
}

interface Case {
  who: WhoName;
  action: "publish" | "subscribe";
  template: string;
  qos: 0 | 1 | 2;
  retain: boolean;
}

const noBraces = (s: string) => !s.includes("{") && !s.includes("}");
const SUFFIX = fc.constantFrom(...DOWN, ...UP, "#", "+", "", "event/x", "heartbeat/#", "control/+", "CONTROL", "event\u0000", "info/");
const TEMPLATE = fc.oneof(
  { weight: 14, arbitrary: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...DOWN, ...UP) }, { weight: 1, arbitrary: SUFFIX }).map((s) => `svc/{S.c}/{S.n}/${s}`) },
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.constantFrom("svc", "svc", "SVC", "$SYS", "$share/g/svc", "$CONTROL/dynamic-security/v1", "", "+", "#", " svc"),
        fc.constantFrom("{S.c}", "{O.c}", "+", "#", "", "cfg-x", "{S.c}+", "{S.c}/{S.n}", "X", "a".repeat(70)),
        fc.constantFrom("{S.n}", "{O.n}", "{U.n}", "+", "#", "", "node-z", "{S.n}#", "Node"),
        SUFFIX,
      )
      .map((p) => p.join("/")),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 40, unit: "binary" }).filter(noBraces) },
  { weight: 1, arbitrary: fc.constantFrom("svc/{S.c}/{S.n}/" + "x".repeat(300), "svc/#", "svc/+", "#", "+", "svc/{S.c}/#", "svc/+/{S.n}/control", "svc/{S.c}/{S.n}/+") },
);
const CASE: fc.Arbitrary<Case> = fc.record({
  who: fc.oneof({ weight: 3, arbitrary: fc.constantFrom<WhoName>("A", "B", "C", "backend") }, { weight: 2, arbitrary: fc.constantFrom(...WHO) }),
  action: fc.constantFrom("publish" as const, "subscribe" as const),
  template: TEMPLATE,
  qos: fc.constantFrom(0 as const, 1 as const, 1 as const, 2 as const),
  retain: fc.constantFrom(false, false, false, true),
});

// ---------------------------------------------------------------------------------------------
// The services.

async function bindEmbedded(s: SseServer, configId: string, nodeId: string): Promise<BoundNode> {
  const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  const res = await api(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1", platform: "linux", hostname: "h" }, false);
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return { c: configId, n: nodeId, password: res.json.mqtt.password };
}

/** The embedded service: three bound nodes (A, B in one config, C in another) and one never bound. */
async function embeddedWorld(t: TestContext): Promise<{ s: SseServer; w: World }> {
  // The broker on the main thread: layer 2 calls its aedes hooks directly (the broker thread runs
  // the same EmbeddedBroker; test/mqtt/broker-thread.test.ts covers what the thread adds).
  const s = await startSseServer(t, {}, { settings: { brokerAuthzSharedKey: KEY, mqttBackendPassword: BACKEND_PASSWORD, embeddedBrokerThread: false } });
  const a = await dynamicNode(s);
  const b = await api(s, "POST", `/api/v1/configs/${a.configId}/nodes`, { name: "b", mode: "dynamic", public_address: "192.0.2.8" });
  const u = await api(s, "POST", `/api/v1/configs/${a.configId}/nodes`, { name: "u", mode: "dynamic", public_address: "192.0.2.9" });
  const c = await dynamicNode(s);
  const w: World = {
    A: await bindEmbedded(s, a.configId, a.nodeId),
    B: await bindEmbedded(s, a.configId, b.json.node_id),
    C: await bindEmbedded(s, c.configId, c.nodeId),
    U: { c: a.configId, n: u.json.node_id },
  };
  return { s, w };
}

/** The embedded broker's aedes instance (its hooks are what aedes calls for every packet). */
function aedesOf(s: SseServer): Aedes {
  const broker = s.server.mqtt.broker as unknown as { broker: Aedes } | null;
  assert.ok(broker !== null);
  return broker.broker;
}

type Verdict = "allow" | "deny";

/** Layer 2: the aedes hooks. CONNECT is judged once per identity, then every case. */
function hookLayer(aedes: Aedes) {
  const connected = new Map<string, Client | null>();
  const connect = (x: Who): Promise<Client | null> => {
    const key = `${x.username}\u0000${x.password}\u0000${x.clientId}`;
    const known = connected.get(key);
    if (known !== undefined) return Promise.resolve(known);
    const client = { id: x.clientId } as unknown as Client;
    return new Promise((resolve) => {
      aedes.authenticate(client, x.username, Buffer.from(x.password), (err, ok) => {
        const c = err || !ok ? null : client;
        connected.set(key, c);
        resolve(c);
      });
    });
  };
  return async (x: Who, c: Case, topic: string): Promise<Verdict> => {
    const client = await connect(x);
    if (client === null) return "deny";
    if (c.action === "publish") {
      const packet = { cmd: "publish", topic, payload: Buffer.from("{}"), qos: c.qos, retain: c.retain, dup: false } as PublishPacket;
      return new Promise((resolve) => aedes.authorizePublish?.(client, packet, (err) => resolve(err ? "deny" : "allow")));
    }
    return new Promise((resolve) => aedes.authorizeSubscribe?.(client, { topic, qos: c.qos }, (err, sub) => resolve(err || !sub ? "deny" : "allow")));
  };
}

/** What EMQX decides when the source does not answer 200 with a result: the deployed `no_match`. */
function emqxNoMatch(): Verdict {
  const hocon = readFileSync(join(repoRoot, "deploy", "emqx", "emqx-svc.hocon.example"), "utf8");
  const v = /^\s*no_match\s*=\s*(allow|deny)\s*$/m.exec(hocon)?.[1];
  assert.ok(v === "allow" || v === "deny", "the EMQX settings name no_match");
  return v;
}

/** Layer 3: POST /api/internal/emqx/authz as EMQX asks it (every value a string). */
async function httpAsk(baseUrl: string, x: Who, c: Case, topic: string, key = KEY): Promise<{ status: number; verdict: Verdict }> {
  const res = await fetch(`${baseUrl}/api/internal/emqx/authz`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-svc-internal-key": key },
    body: JSON.stringify({ clientid: x.clientId, username: x.username, peerhost: "127.0.0.1", action: c.action, topic, qos: String(c.qos), retain: String(c.retain) }),
  });
  const body = (await res.json()) as { result?: string };
  const verdict = res.status === 200 && (body.result === "allow" || body.result === "deny") ? body.result : emqxNoMatch();
  return { status: res.status, verdict };
}

/**
 * The identity the broker resolves a username to before asking the pure policy: the backend, a
 * bound node (with the client id presented, which the policy checks), or nothing.
 */
function brokerIdentity(w: World, x: Who): BrokerIdentity | null {
  if (x.username === BACKEND_USER) return { kind: "backend" };
  for (const node of [w.A, w.B, w.C]) {
    if (x.username === nodeUsername(node.c, node.n)) return { kind: "node", configId: node.c, nodeId: node.n, clientId: x.clientId };
  }
  return null;
}

interface Tally {
  cases: number;
  allow: number;
  deny: number;
  mismatches: string[];
}
const tally = (): Tally => ({ cases: 0, allow: 0, deny: 0, mismatches: [] });
function record(t: Tally, want: Verdict, got: Verdict, what: () => string): void {
  t.cases += 1;
  t[got] += 1;
  if (got !== want && t.mismatches.length < 20) t.mismatches.push(`${what()}: want ${want}, got ${got}`);
}

test(`spec §5 rules 1-3, §4 rule 13, §6.4 rule 5: ${CASES} generated (identity, action, topic, QoS, retain) cases: the pure policy, the embedded broker's hooks and POST /api/internal/emqx/authz each equal the reference model (0 mismatches)`, async (t) => {
  const started = Date.now();
  const { s, w } = await embeddedWorld(t);
  const cases = fc.sample(CASE, { seed: SEED, numRuns: CASES });
  const hooks = hookLayer(aedesOf(s));
  const layers = { pure: tally(), hooks: tally(), http: tally() };
  let hookSkipped = 0;
  const describe = (c: Case, topic: string) => `${c.who} ${c.action} ${JSON.stringify(topic)} qos=${c.qos} retain=${c.retain}`;
  for (let i = 0; i < cases.length; i += 64) {
    await Promise.all(
      cases.slice(i, i + 64).map(async (c) => {
        const x = who(w, c.who);
        const topic = instantiate(w, c.who, c.template);
        const what = () => describe(c, topic);
        // Layer 1: the identity the broker resolved, then the policy.
        const pure = authorize(brokerIdentity(w, x), c.action, topic, { qos: c.qos, retain: c.retain });
        record(layers.pure, reference(x.asked, c.action, topic, c.qos, c.retain), pure, what);
        // Layer 2: the backend is linked in-process; its account is refused over the network
        // (docs/history/decisions-2026.md "Embedded broker, backend account"), asserted below.
        if (c.who === "backend") hookSkipped += 1;
        else record(layers.hooks, reference(x.authenticated, c.action, topic, c.qos, c.retain), await hooks(x, c, topic), what);
        // Layer 3: over HTTP as EMQX asks (after EMQX authenticated the password).
        const http = await httpAsk(s.baseUrl, x, c, topic);
        record(layers.http, reference(x.asked, c.action, topic, c.qos, c.retain), http.verdict, what);
      }),
    );
  }
  // The backend account over the network, while the backend is linked in-process: refused.
  assert.equal(await hooks(who(w, "backend"), { who: "backend", action: "subscribe", template: "svc/+/+/heartbeat", qos: 1, retain: false }, "svc/+/+/heartbeat"), "deny");
  const allowed = layers.http.allow;
  console.log(`# authz property (seed ${SEED}): ${JSON.stringify(Object.fromEntries(Object.entries(layers).map(([k, v]) => [k, { cases: v.cases, allow: v.allow, deny: v.deny, mismatches: v.mismatches.length }])))} backend_cases_not_on_hooks=${hookSkipped} wall_ms=${Date.now() - started}`);
  for (const [name, v] of Object.entries(layers)) assert.deepEqual(v.mismatches, [], `${name} disagrees with the reference model`);
  assert.ok(allowed > CASES / 20, `enough allowed cases to mean something (${allowed})`);
});

// ---------------------------------------------------------------------------------------------
// Layer 4: a real Mosquitto with the roles the adapter writes, observed with MQTT 5 clients.

/** The Mosquitto-backed service: the same world shape, accounts written by src/mqtt/mosquitto-admin.ts. */
async function mosquittoWorld(t: TestContext, m: MosquittoBroker): Promise<{ s: Service; w: World }> {
  const s = await startService(t, mosquittoSettings(m, tempDataDir(), { mqttBackendPassword: BACKEND_PASSWORD }));
  await until("the backend reconciled with mosquitto", () => (s.server.mqtt.sync?.state().reconciled ?? 0) > 0);
  const a = await mosquittoNode(s, "a");
  const c = await mosquittoNode(s, "c");
  const add = async (name: string) => (await s.api("POST", `/api/v1/configs/${a.configId}/nodes`, { name, mode: "dynamic", public_address: "192.0.2.8" })).json.node_id as string;
  const b = await add("b");
  const u = await add("u");
  const bound = async (configId: string, nodeId: string): Promise<BoundNode> => ({ c: configId, n: nodeId, password: (await bindNode(s, configId, nodeId)).mqtt.password });
  const w: World = { A: await bound(a.configId, a.nodeId), B: await bound(a.configId, b), C: await bound(c.configId, c.nodeId), U: { c: a.configId, n: u } };
  await s.server.mqtt.sync?.idle();
  return { s, w };
}

type Observed = Verdict | "refused_by_mqtt_js";

/** One identity's MQTT 5 connection to Mosquitto, reopened after the broker closes it. */
class MosquittoProbe {
  #client: MqttClient | null = null;
  #refused = false;
  reconnects = 0;
  constructor(
    private readonly url: string,
    private readonly x: Who,
  ) {}

  async #connection(): Promise<MqttClient | null> {
    if (this.#refused) return null;
    if (this.#client?.connected) return this.#client;
    this.#client?.end(true);
    this.reconnects += 1;
    const c = mqtt.connect(this.url, { protocolVersion: 5, clientId: this.x.clientId, username: this.x.username, password: this.x.password, reconnectPeriod: 0, clean: true, connectTimeout: 5000 });
    c.on("error", () => undefined);
    const ok = await new Promise<boolean>((resolve) => {
      c.once("connect", () => resolve(true));
      c.once("close", () => resolve(false));
    });
    if (!ok) {
      // CONNACK refused (bad credentials, client id not the account's): nothing is allowed.
      this.#refused = true;
      c.end(true);
      return null;
    }
    this.#client = c;
    return c;
  }

  /** QoS 0 publishes go out at QoS 1: a QoS 0 publish has no answer to observe. */
  async publish(topic: string, qos: number, retain: boolean): Promise<Observed> {
    // An empty topic is no topic (MQTT-4.7.3-1); mqtt.js sends it as if a topic alias followed.
    if (topic === "") return "refused_by_mqtt_js";
    const c = await this.#connection();
    if (c === null) return "deny";
    let onClose = (): void => undefined;
    const closed = new Promise<Observed>((resolve) => {
      onClose = () => resolve("deny");
      c.once("close", onClose);
    });
    const stuck = new Promise<Observed>((_, reject) => setTimeout(() => reject(new Error(`no answer to publish ${JSON.stringify(topic)} qos=${qos} retain=${retain} as ${this.x.username}`)), 3000).unref());
    try {
      return await Promise.race([
        stuck,
        c.publishAsync(topic, "{}", { qos: (qos === 0 ? 1 : qos) as 1 | 2, retain }).then(
          () => "allow" as const,
          (err: Error & { code?: number }) => {
            if (err.code === 0x87) return "deny" as const;
            if (!c.connected) return "deny" as const;
            throw err;
          },
        ),
        closed,
      ]);
    } catch (err) {
      if (/invalid|topic/i.test((err as Error).message)) return "refused_by_mqtt_js";
      throw err;
    } finally {
      c.off("close", onClose);
    }
  }

  /** SUBACK reason code: below 0x80 granted, else refused (0x87 not authorized). */
  async subscribe(filter: string, qos: number): Promise<{ verdict: Observed; granted?: number }> {
    const c = await this.#connection();
    if (c === null) return { verdict: "deny" };
    let onClose = (): void => undefined;
    const closed = new Promise<{ verdict: Observed }>((resolve) => {
      onClose = () => resolve({ verdict: "deny" });
      c.once("close", onClose);
    });
    try {
      return await Promise.race([
        c.subscribeAsync(filter, { qos: qos as 0 | 1 | 2 }).then((granted) => {
          const code = granted[0]?.qos ?? 0x80;
          return { verdict: code >= 0x80 ? ("deny" as const) : ("allow" as const), granted: code };
        }),
        closed,
      ]);
    } catch (err) {
      // mqtt.js rejects a SUBACK with a refusal code, the packet attached.
      const granted = (err as { packet?: { granted?: number[] } }).packet?.granted?.[0];
      if (granted !== undefined && granted >= 0x80) return { verdict: "deny", granted };
      if (/invalid topic/i.test((err as Error).message)) return { verdict: "refused_by_mqtt_js" };
      throw err;
    } finally {
      c.off("close", onClose);
    }
  }

  close(): void {
    this.#client?.end(true);
  }
}

test(`spec §5 rules 1-3, §6.4 rule 5 on a real Mosquitto: ${MOSQUITTO_CASES} generated cases against the dynamic-security roles the adapter writes equal the reference model (0 mismatches)`, async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const started = Date.now();
  const { w } = await mosquittoWorld(t, m);
  const cases = fc.sample(CASE, { seed: SEED, numRuns: MOSQUITTO_CASES });
  const probes = new Map<WhoName, MosquittoProbe>(WHO.map((name) => [name, new MosquittoProbe(m.url, who(w, name))]));
  t.after(() => {
    for (const p of probes.values()) p.close();
  });
  const compared = tally();
  const excluded = { backend_pattern_grant: 0, refused_by_mqtt_js: 0, subscribe_qos2_downgraded: 0 };
  const byWho = new Map<WhoName, Case[]>();
  for (const c of cases) byWho.set(c.who, [...(byWho.get(c.who) ?? []), c]);
  await Promise.all(
    [...byWho].map(async ([name, list]) => {
      const x = who(w, name);
      const probe = probes.get(name);
      assert.ok(probe);
      for (const c of list) {
        const topic = instantiate(w, name, c.template);
        const want = reference(x.authenticated, c.action, topic, c.qos, c.retain);
        const what = () => `${name} ${c.action} ${JSON.stringify(topic)} qos=${c.qos} retain=${c.retain}`;
        if (c.action === "publish") {
          const got = await probe.publish(topic, c.qos, c.retain);
          // The backend role grants `svc/+/+/{down}` (a pattern cannot check id shapes): only
          // well-formed ids are compared; the backend itself publishes to nodeTopic() only.
          const pattern = /^svc\/[^/+#]*\/[^/+#]*\/(config\/push|control|detect|info)$/.test(topic);
          if (name === "backend" && pattern && want === "deny" && !c.retain && c.qos < 2) {
            excluded.backend_pattern_grant += 1;
            continue;
          }
          if (got === "refused_by_mqtt_js") {
            assert.equal(want, "deny", what());
            excluded.refused_by_mqtt_js += 1;
            continue;
          }
          record(compared, want, got, what);
        } else {
          const got = await probe.subscribe(topic, c.qos);
          if (got.verdict === "refused_by_mqtt_js") {
            assert.equal(want, "deny", what());
            excluded.refused_by_mqtt_js += 1;
            continue;
          }
          if (c.qos === 2) {
            // `max_qos 1`: Mosquitto grants a QoS 2 subscription at QoS 1 instead of refusing it.
            const atOne = reference(x.authenticated, c.action, topic, 1, c.retain);
            assert.equal(got.verdict, atOne, what());
            if (got.verdict === "allow") assert.ok((got.granted ?? 2) <= 1, `${what()}: granted at most QoS 1`);
            excluded.subscribe_qos2_downgraded += 1;
            continue;
          }
          record(compared, want, got.verdict, what);
        }
      }
    }),
  );
  const reconnects = [...probes.values()].reduce((n, p) => n + p.reconnects, 0);
  console.log(`# authz property on mosquitto (seed ${SEED}): sampled=${cases.length} compared=${compared.cases} allow=${compared.allow} deny=${compared.deny} mismatches=${compared.mismatches.length} ${JSON.stringify(excluded)} connections=${reconnects} wall_ms=${Date.now() - started}`);
  assert.deepEqual(compared.mismatches, [], "Mosquitto disagrees with the reference model");
  assert.ok(compared.allow > MOSQUITTO_CASES / 20, `enough allowed cases (${compared.allow})`);
});

// ---------------------------------------------------------------------------------------------
// Regression cases named by the issue (Mosquitto CVEs, EMQX's authz suite).

type Inbox = Array<{ topic: string; retain: boolean; payload: string }>;

/**
 * Connects over the wire; resolves the client, or the refusal. `got`, when given, collects every
 * message from the CONNACK on: a resumed session's queued messages follow the CONNACK at once,
 * often before the caller's next line runs.
 */
async function connectWire(url: string, opts: mqtt.IClientOptions, got?: Inbox): Promise<MqttClient | Error> {
  const c = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 5000, ...opts });
  if (got !== undefined) inbox(c, got);
  return new Promise((resolve) => {
    c.once("connect", () => resolve(c));
    c.once("error", (err) => {
      c.end(true);
      resolve(err);
    });
    c.once("close", () => resolve(new Error("closed before CONNACK")));
  });
}

/** Every message `c` receives, with its retain flag, from now on (into `got`). */
function inbox(c: MqttClient, got: Inbox = []): Inbox {
  c.on("message", (topic, payload, packet) => got.push({ topic, retain: packet.retain, payload: payload.toString() }));
  return got;
}

test("CVE-2017-7650: `+`/`#` in usernames and client ids grant nothing: every such CONNECT is refused by the embedded broker (MQTT 3.1.1) and by Mosquitto (MQTT 5), also with a bound node's real password", async (t) => {
  const { s, w } = await embeddedWorld(t);
  const m = await mosquitto(t);
  const brokers: Array<{ url: string; w: World; protocolVersion: 4 | 5 }> = [{ url: `mqtt://127.0.0.1:${s.server.mqtt.broker?.port}`, w, protocolVersion: 4 }];
  if (m !== undefined) brokers.push({ url: m.url, w: (await mosquittoWorld(t, m)).w, protocolVersion: 5 });
  let refused = 0;
  for (const b of brokers) {
    const a = b.w.A;
    const attempts = [
      { username: "#", clientId: "svc-#", password: a.password },
      { username: "+", clientId: "+", password: a.password },
      { username: "n:+:+", clientId: nodeClientId(a.c, a.n), password: a.password },
      { username: `n:${a.c}:+`, clientId: `svc-${a.c}-+`, password: a.password },
      { username: `n:${a.c}:#`, clientId: `svc-${a.c}-#`, password: a.password },
      { username: nodeUsername(a.c, a.n), clientId: "svc-+-#", password: a.password },
      { username: nodeUsername(a.c, a.n), clientId: "#", password: a.password },
      { username: nodeUsername(a.c, a.n), clientId: nodeClientId(b.w.B.c, b.w.B.n), password: a.password },
    ];
    for (const attempt of attempts) {
      const res = await connectWire(b.url, { protocolVersion: b.protocolVersion, clean: true, ...attempt });
      if (!(res instanceof Error)) res.end(true);
      assert.ok(res instanceof Error, `${b.url}: ${JSON.stringify({ ...attempt, password: "…" })} connected`);
      refused += 1;
    }
  }
  console.log(`# CVE-2017-7650 regression: ${refused} CONNECTs refused over ${brokers.length} brokers`);
});

test("CVE-2018-12546: nothing is retained, so nothing outlives a revocation: retained publishes are refused by both brokers and a fresh subscriber after reset and rebind receives no message from before (spec §6.4 rule 5, §4 rule 12)", async (t) => {
  const { s, w } = await embeddedWorld(t);
  const url = `mqtt://127.0.0.1:${s.server.mqtt.broker?.port}`;
  const a = who(w, "A");
  const agent = await connectWire(url, { protocolVersion: 4, clientId: a.clientId, username: a.username, password: a.password, clean: true });
  assert.ok(!(agent instanceof Error), String(agent));
  const closed = new Promise<void>((resolve) => agent.once("close", () => resolve()));
  agent.publish(`svc/${w.A.c}/${w.A.n}/event`, "{}", { qos: 1, retain: true });
  await closed; // MQTT 3.1.1 cannot refuse one publish: the connection is closed
  const aedes = aedesOf(s);
  const retained = await new Promise<number>((resolve) => {
    let n = 0;
    const persistence = (aedes as unknown as { persistence: { createRetainedStream(pattern: string): NodeJS.ReadableStream } }).persistence;
    const stream = persistence.createRetainedStream("#");
    stream.on("data", () => (n += 1));
    stream.on("end", () => resolve(n));
  });
  assert.equal(retained, 0, "the embedded broker stores no retained message");

  const m = await mosquitto(t);
  if (m === undefined) return;
  const { s: ms, w: mw } = await mosquittoWorld(t, m);
  const ma = who(mw, "A");
  const first = await connectWire(m.url, { protocolVersion: 5, clientId: ma.clientId, username: ma.username, password: ma.password, clean: true });
  assert.ok(!(first instanceof Error), String(first));
  const gone = new Promise<void>((resolve) => first.once("close", () => resolve()));
  first.publish(`svc/${mw.A.c}/${mw.A.n}/event`, "retained-before-revocation", { qos: 1, retain: true });
  await gone; // retain_available false: Mosquitto disconnects a retained publish
  // Revoke (reset-client): the old credentials stop working; then rebind.
  assert.equal((await ms.api("POST", `/api/v1/configs/${mw.A.c}/nodes/${mw.A.n}/reset-client`)).status, 200);
  await ms.server.mqtt.sync?.idle();
  assert.ok((await connectWire(m.url, { protocolVersion: 5, clientId: ma.clientId, username: ma.username, password: ma.password, clean: true })) instanceof Error, "old credentials refused after reset");
  const rebound = await bindNode(ms, mw.A.c, mw.A.n);
  await ms.server.mqtt.sync?.idle();
  const backend = await connectWire(m.url, { protocolVersion: 5, clientId: "svc-cve-backend", username: BACKEND_USER, password: BACKEND_PASSWORD, clean: true });
  assert.ok(!(backend instanceof Error), String(backend));
  t.after(() => backend.end(true));
  const got = inbox(backend);
  await backend.subscribeAsync(`svc/+/+/event`, { qos: 1 });
  const second = await connectWire(m.url, { protocolVersion: 5, clientId: ma.clientId, username: ma.username, password: rebound.mqtt.password, clean: true });
  assert.ok(!(second instanceof Error), String(second));
  t.after(() => second.end(true));
  await second.publishAsync(`svc/${mw.A.c}/${mw.A.n}/event`, "sentinel", { qos: 1 });
  await until("the sentinel reached the backend", () => got.some((g) => g.payload === "sentinel"));
  assert.deepEqual(got.map((g) => g.payload), ["sentinel"], "no retained message was delivered before the sentinel");
});

test("CVE-2021-34434: a durable session does not outlive a revocation: a node that subscribed with a persistent session, was reset and rebound receives nothing the backend published to it before it came back: queued before the reset, while revoked, or after the rebind (spec §4 rule 12), on the embedded broker and on Mosquitto", async (t) => {
  const { s, w } = await embeddedWorld(t);
  const m = await mosquitto(t);
  const control = (x: World) => `svc/${x.A.c}/${x.A.n}/control`;
  const runs: Array<{ name: string; url: string; v: 4 | 5; w: World; reset: () => Promise<void>; rebind: () => Promise<string>; publish: (topic: string, payload: string) => Promise<void> }> = [
    {
      name: "embedded",
      url: `mqtt://127.0.0.1:${s.server.mqtt.broker?.port}`,
      v: 4,
      w,
      reset: async () => {
        assert.equal((await api(s, "POST", `/api/v1/configs/${w.A.c}/nodes/${w.A.n}/reset-client`)).status, 200);
      },
      rebind: async () => (await bindEmbedded(s, w.A.c, w.A.n)).password,
      // The backend's in-process path: straight into aedes.
      publish: (topic, payload) =>
        new Promise((resolve, reject) => aedesOf(s).publish({ cmd: "publish", topic, payload: Buffer.from(payload), qos: 1, retain: false, dup: false } as PublishPacket, (err) => (err ? reject(err) : resolve()))),
    },
  ];
  if (m !== undefined) {
    const { s: ms, w: mw } = await mosquittoWorld(t, m);
    const backend = await connectWire(m.url, { protocolVersion: 5, clientId: "svc-cve-backend-2", username: BACKEND_USER, password: BACKEND_PASSWORD, clean: true });
    assert.ok(!(backend instanceof Error), String(backend));
    t.after(() => backend.end(true));
    runs.push({
      name: "mosquitto",
      url: m.url,
      v: 5,
      w: mw,
      reset: async () => {
        assert.equal((await ms.api("POST", `/api/v1/configs/${mw.A.c}/nodes/${mw.A.n}/reset-client`)).status, 200);
        await ms.server.mqtt.sync?.idle();
      },
      rebind: async () => {
        const pw = (await bindNode(ms, mw.A.c, mw.A.n)).mqtt.password;
        await ms.server.mqtt.sync?.idle();
        return pw;
      },
      publish: async (topic, payload) => {
        await backend.publishAsync(topic, payload, { qos: 1 });
      },
    });
  }
  for (const r of runs) {
    const a = who(r.w, "A");
    const durable = { protocolVersion: r.v, clientId: a.clientId, username: a.username, clean: false, ...(r.v === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {}) };
    const first = await connectWire(r.url, { ...durable, password: a.password });
    assert.ok(!(first instanceof Error), `${r.name}: ${String(first)}`);
    await first.subscribeAsync(control(r.w), { qos: 1 });
    await first.endAsync();
    await r.publish(control(r.w), "queued-before-reset");
    await r.reset();
    await r.publish(control(r.w), "published-while-revoked");
    const password = await r.rebind();
    await r.publish(control(r.w), "published-before-reconnect");
    // Collected from the CONNACK on: a resumed session delivers its queue right behind it.
    const got: Inbox = [];
    const again = await connectWire(r.url, { ...durable, password }, got);
    assert.ok(!(again instanceof Error), `${r.name}: ${String(again)}`);
    t.after(() => again.end(true));
    await again.subscribeAsync(control(r.w), { qos: 1 });
    await r.publish(control(r.w), "sentinel");
    await until(`${r.name}: the sentinel arrived`, () => got.some((g) => g.payload === "sentinel"));
    assert.deepEqual(got.map((g) => g.payload), ["sentinel"], `${r.name}: nothing published before the node came back was delivered`);
  }
});

test("EMQX authz suite: deny on authz-endpoint failure and no_match = deny: a wrong or missing key, a malformed body and an endpoint that is down are each a non-200 (EMQX's nomatch), and the deployed no_match denies them", async (t) => {
  const { s, w } = await embeddedWorld(t);
  const a = who(w, "A");
  const allowed: Case = { who: "A", action: "publish", template: "svc/{S.c}/{S.n}/heartbeat", qos: 1, retain: false };
  const topic = instantiate(w, "A", allowed.template);
  assert.deepEqual(await httpAsk(s.baseUrl, a, allowed, topic), { status: 200, verdict: "allow" }, "the control case is allowed");
  assert.equal(emqxNoMatch(), "deny");
  const wrongKey = await httpAsk(s.baseUrl, a, allowed, topic, "not-the-key");
  assert.deepEqual(wrongKey, { status: 401, verdict: "deny" });
  const malformed = await fetch(`${s.baseUrl}/api/internal/emqx/authz`, { method: "POST", headers: { "content-type": "application/json", "x-svc-internal-key": KEY }, body: JSON.stringify({ username: a.username, action: "publish" }) });
  assert.equal(malformed.status, 400);
  await s.close();
  // The endpoint is down: EMQX gets no answer, which is nomatch too.
  await assert.rejects(fetch(`${s.baseUrl}/api/internal/emqx/authz`, { method: "POST", body: "{}" }));
});
