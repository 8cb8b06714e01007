import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { nodeGrants } from "../../src/mqtt/authz.policy.js";
import { backendSubscriptions } from "../../src/protocol/topics.js";
import { createConfig, createNode, startHarness, type Harness } from "../http/harness.js";

// POST /api/internal/emqx/authz answering EMQX's real request shape over
// real HTTP (spec §4 rule 13, §5 "Broker to backend authorization" and rules 1-3, §6.4 rule 5).
// EMQX's HTTP authorization source renders its body template with every placeholder as a
// string: {"clientid":"…","username":"…","peerhost":"…","action":"publish","topic":"…",
// "qos":"1","retain":"false"} (deploy/emqx: the template the compose file configures).

const KEY = "emqx-authz-shared-key-0123456789abcdef";
const PATH = "/api/internal/emqx/authz";

interface Bound {
  configId: string;
  nodeId: string;
  username: string;
  clientId: string;
}

interface Setup {
  h: Harness;
  baseUrl: string;
  a: Bound;
  b: Bound;
}

/** A real service on 127.0.0.1:0 with the shared key set and two bound dynamic nodes. */
async function setup(t: TestContext): Promise<Setup> {
  const h = await startHarness(t, { brokerAuthzSharedKey: KEY });
  const config = await createConfig(h);
  const a = await bindNode(h, config.config_id);
  const b = await bindNode(h, config.config_id);
  await h.server.app.listen({ host: "127.0.0.1", port: 0 });
  const address = h.server.app.server.address();
  assert.ok(address !== null && typeof address === "object");
  return { h, baseUrl: `http://127.0.0.1:${address.port}`, a, b };
}

async function bindNode(h: Harness, configId: string): Promise<Bound> {
  const node = await createNode(h, configId, { mode: "dynamic", public_address: "192.0.2.7" });
  const cmd = await h.req("POST", `/api/v1/configs/${configId}/nodes/${node.node_id}/bind-command`);
  assert.equal(cmd.status, 200, cmd.text);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  assert.ok(token, cmd.json.command);
  const res = await h.req(
    "POST",
    "/api/client/bind",
    { bind_token: token, server_url: "http://127.0.0.1:8080", client_version: "1.2.3", platform: "linux", hostname: "edge" },
    { auth: false },
  );
  assert.equal(res.status, 200, res.text);
  return { configId, nodeId: node.node_id, username: res.json.mqtt.username, clientId: res.json.mqtt.client_id };
}

/** EMQX's request body for `who` (every value a string), with overrides. */
function emqxBody(who: Bound, over: Record<string, string> = {}): Record<string, string> {
  return {
    clientid: who.clientId,
    username: who.username,
    peerhost: "172.18.0.5",
    action: "publish",
    topic: `svc/${who.configId}/${who.nodeId}/heartbeat`,
    qos: "1",
    retain: "false",
    ...over,
  };
}

async function ask(
  s: Setup,
  body: unknown,
  headers: Record<string, string> = { "x-svc-internal-key": KEY },
): Promise<{ status: number; json: { result?: string; error?: { code: string } } }> {
  const res = await fetch(`${s.baseUrl}${PATH}`, {
    method: "POST",
    // As EMQX sends it: the headers the deployment configures, JSON body.
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as { result?: string; error?: { code: string } } };
}

async function result(s: Setup, body: Record<string, string>): Promise<string | undefined> {
  const res = await ask(s, body);
  assert.equal(res.status, 200, JSON.stringify({ body, res }));
  return res.json.result;
}

describe("POST /api/internal/emqx/authz with EMQX's all-strings request over real HTTP (spec §4 rule 13)", () => {
  test("a node may publish its own upstream topics and subscribe to its own downstream topics (spec §5 rule 1)", async (t) => {
    const s = await setup(t);
    const grants = nodeGrants(s.a.configId, s.a.nodeId);
    for (const topic of grants.publish) {
      for (const qos of ["0", "1"]) assert.equal(await result(s, emqxBody(s.a, { topic, qos })), "allow", `publish ${topic} qos ${qos}`);
    }
    for (const topic of grants.subscribe) {
      // EMQX renders retain as "false" for a subscribe (or "" on versions without the field).
      assert.equal(await result(s, emqxBody(s.a, { action: "subscribe", topic })), "allow", `subscribe ${topic}`);
      assert.equal(await result(s, emqxBody(s.a, { action: "subscribe", topic, retain: "" })), "allow", `subscribe ${topic}`);
    }
  });

  test("foreign, wildcard, retained, QoS 2, reversed-direction and $-topics are denied (spec §5 rules 1-2, §6.4 rule 5)", async (t) => {
    const s = await setup(t);
    const own = (suffix: string) => `svc/${s.a.configId}/${s.a.nodeId}/${suffix}`;
    const foreign = (suffix: string) => `svc/${s.b.configId}/${s.b.nodeId}/${suffix}`;
    const denied: Array<Record<string, string>> = [
      { topic: foreign("heartbeat") },
      { topic: foreign("event") },
      { action: "subscribe", topic: foreign("control") },
      { action: "subscribe", topic: foreign("config/push") },
      { action: "subscribe", topic: "svc/#" },
      { action: "subscribe", topic: "svc/+" },
      { action: "subscribe", topic: "#" },
      { action: "subscribe", topic: `svc/${s.a.configId}/+/control` },
      { action: "subscribe", topic: `svc/${s.a.configId}/${s.a.nodeId}/#` },
      { topic: `svc/${s.a.configId}/+/heartbeat` },
      { retain: "true" },
      { qos: "2" },
      { topic: own("control") },
      { action: "subscribe", topic: own("heartbeat") },
      { topic: "$SYS/brokers" },
      { action: "subscribe", topic: "$share/g/svc/+/+/heartbeat" },
    ];
    for (const over of denied) assert.equal(await result(s, emqxBody(s.a, over)), "deny", JSON.stringify(over));
  });

  test("judged for the exact node: another client id, an unknown user or a reset node is denied (spec §4 rules 12-13)", async (t) => {
    const s = await setup(t);
    assert.equal(await result(s, emqxBody(s.a, { clientid: s.b.clientId })), "deny");
    assert.equal(await result(s, emqxBody(s.a, { clientid: "" })), "deny");
    assert.equal(await result(s, emqxBody(s.a, { username: `n:${s.a.configId}:no-such-node`, clientid: `svc-${s.a.configId}-no-such-node` })), "deny");
    assert.equal(await result(s, emqxBody(s.a, { username: "" })), "deny");
    // Reset: the node's credentials must stop working; EMQX asks again once its cache is cleared.
    assert.equal(await result(s, emqxBody(s.b)), "allow");
    const reset = await s.h.req("POST", `/api/v1/configs/${s.b.configId}/nodes/${s.b.nodeId}/reset-client`);
    assert.equal(reset.status, 200, reset.text);
    assert.equal(await result(s, emqxBody(s.b)), "deny");
    assert.equal(await result(s, emqxBody(s.b, { action: "subscribe", topic: `svc/${s.b.configId}/${s.b.nodeId}/control` })), "deny");
  });

  test("the backend user: exactly its upstream filters and concrete downstream publishes (spec §5 rule 3)", async (t) => {
    const s = await setup(t);
    const backend = { configId: "", nodeId: "", username: "svc-backend", clientId: "svc-backend-1" };
    for (const filter of backendSubscriptions()) {
      assert.equal(await result(s, emqxBody(backend, { action: "subscribe", topic: filter })), "allow", filter);
    }
    assert.equal(await result(s, emqxBody(backend, { topic: `svc/${s.a.configId}/${s.a.nodeId}/control` })), "allow");
    assert.equal(await result(s, emqxBody(backend, { action: "subscribe", topic: "svc/#" })), "deny");
    assert.equal(await result(s, emqxBody(backend, { topic: `svc/${s.a.configId}/${s.a.nodeId}/control`, retain: "true" })), "deny");
  });

  test("a missing or wrong x-svc-internal-key answers 401 and never a result, even for an allowed request", async (t) => {
    const s = await setup(t);
    const allowed = emqxBody(s.a);
    assert.equal(await result(s, allowed), "allow", "the request itself would be allowed");
    const cases: Array<Record<string, string>> = [
      {},
      { "x-svc-internal-key": "" },
      { "x-svc-internal-key": "wrong-key-0123456789abcdef" },
      { "x-svc-internal-key": `${KEY}x` },
      { "x-svc-internal-key": KEY.slice(0, -1) },
      { "x-svc-internal-key": KEY.toUpperCase() },
      { authorization: `Bearer ${KEY}` },
      { "x-svc-internal-keys": KEY },
    ];
    for (const headers of cases) {
      const res = await ask(s, allowed, headers);
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.equal(res.json.error?.code, "UNAUTHORIZED");
      assert.equal(res.json.result, undefined, "never a result without the key");
    }
    // A malformed body without the key is refused as unauthorized too.
    assert.equal((await ask(s, "{", {})).status, 401);
  });
});
