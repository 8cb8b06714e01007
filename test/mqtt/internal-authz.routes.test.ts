import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";
import Fastify, { type FastifyError } from "fastify";
import {
  hasZodFastifySchemaValidationErrors,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from "fastify-type-provider-zod";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { AppError } from "../../src/errors.js";
import type { App } from "../../src/http/app.js";
import { internalAuthzRoutes } from "../../src/http/routes/internal-authz.routes.js";
import { createLogger } from "../../src/logger.js";
import { BACKEND_USERNAME_DEFAULT, nodeClientId, nodeIdentity, nodeUsername, parseNodeUsername, type BrokerIdentity } from "../../src/mqtt/authz.policy.js";
import { createServer } from "../../src/server.js";

// spec §4 rule 13 and §5: EMQX's HTTP authorization source asks POST /api/internal/emqx/authz
// with header x-svc-internal-key; the answer is {"result": "allow" | "deny"} from the one policy.

const KEY = "k".repeat(16) + "-shared-authz-key";
const URL = "/api/internal/emqx/authz";

const known = new Set([nodeUsername("cfg-1", "node-a"), nodeUsername("cfg-1", "node-b")]);
function resolve(username: string): BrokerIdentity | undefined {
  if (username === BACKEND_USERNAME_DEFAULT) return { kind: "backend" };
  if (!known.has(username)) return undefined;
  const ids = parseNodeUsername(username);
  return ids === null ? undefined : nodeIdentity(ids.configId, ids.nodeId);
}

interface Res {
  status: number;
  json: { result?: string; error?: { code: string; message: string } };
}

type Call = (body: unknown, headers?: Record<string, string>) => Promise<Res>;

function caller(app: { inject: App["inject"] }): Call {
  return async (body, headers = { "x-svc-internal-key": KEY }) => {
    const res = await app.inject({
      method: "POST",
      url: URL,
      headers: { "content-type": "application/json", ...headers },
      payload: typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: res.statusCode, json: JSON.parse(res.body) as Res["json"] };
  };
}

/**
 * The route alone on a minimal Fastify app with buildApp's zod compilers and the same error
 * mapping (AppError → its status and body; schema failures and bad JSON → VALIDATION_FAILED).
 */
async function setup(t: TestContext, sharedKey: () => string = () => KEY): Promise<Call> {
  const app = Fastify({ loggerInstance: createLogger("silent") }).withTypeProvider<ZodTypeProvider>() as unknown as App;
  t.after(() => app.close());
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler((err: FastifyError, _req, reply) => {
    const e =
      err instanceof AppError
        ? err
        : hasZodFastifySchemaValidationErrors(err) || err.statusCode === 400
          ? new AppError("VALIDATION_FAILED", err.message)
          : new AppError("INTERNAL", "internal error");
    void reply.status(e.status).send(e.toBody());
  });
  await app.register(internalAuthzRoutes, { sharedKey, resolve });
  await app.ready();
  return caller(app);
}

/** An EMQX request as the documented template renders it: every value a string. */
function emqx(over: Record<string, string> = {}): Record<string, string> {
  return {
    clientid: nodeClientId("cfg-1", "node-a"),
    username: nodeUsername("cfg-1", "node-a"),
    peerhost: "10.0.0.7",
    action: "publish",
    topic: "svc/cfg-1/node-a/heartbeat",
    qos: "1",
    retain: "false",
    ...over,
  };
}

describe("POST /api/internal/emqx/authz (spec §4 rule 13, §5)", () => {
  test("allows a node's own upstream publish and own downstream subscribe", async (t) => {
    const call = await setup(t);
    for (const body of [
      emqx(),
      emqx({ topic: "svc/cfg-1/node-a/event", qos: "0" }),
      emqx({ action: "subscribe", topic: "svc/cfg-1/node-a/control" }),
      emqx({ action: "subscribe", topic: "svc/cfg-1/node-a/config/push", retain: "" }),
    ]) {
      const res = await call(body);
      assert.equal(res.status, 200, JSON.stringify(res.json));
      assert.deepEqual(res.json, { result: "allow" }, JSON.stringify(body));
    }
  });

  test("denies foreign topics, wildcards, retained and QoS 2 (spec §5 rules 1-2, §6.4 rule 5)", async (t) => {
    const call = await setup(t);
    for (const body of [
      emqx({ topic: "svc/cfg-1/node-b/heartbeat" }),
      emqx({ action: "subscribe", topic: "svc/cfg-1/node-b/control" }),
      emqx({ action: "subscribe", topic: "svc/#" }),
      emqx({ action: "subscribe", topic: "svc/+/+/control" }),
      emqx({ action: "subscribe", topic: "#" }),
      emqx({ topic: "svc/cfg-1/node-a/control" }),
      emqx({ retain: "true" }),
      emqx({ qos: "2" }),
      emqx({ topic: "$SYS/brokers" }),
      emqx({ topic: "svc/cfg-1/node-a/heartbeat\u0000" }),
    ]) {
      const res = await call(body);
      assert.equal(res.status, 200);
      assert.deepEqual(res.json, { result: "deny" }, JSON.stringify(body));
    }
  });

  test("the backend: upstream filters allowed, downstream publish allowed, anything broader denied (spec §5 rule 3)", async (t) => {
    const call = await setup(t);
    const backend = (over: Record<string, string>) => emqx({ clientid: "svc-backend-1", username: BACKEND_USERNAME_DEFAULT, ...over });
    assert.deepEqual((await call(backend({ action: "subscribe", topic: "svc/+/+/heartbeat" }))).json, { result: "allow" });
    assert.deepEqual((await call(backend({ topic: "svc/cfg-1/node-a/control" }))).json, { result: "allow" });
    assert.deepEqual((await call(backend({ action: "subscribe", topic: "svc/#" }))).json, { result: "deny" });
    assert.deepEqual((await call(backend({ topic: "svc/cfg-1/node-a/heartbeat" }))).json, { result: "deny" });
  });

  test("unknown users and a client id that is not the node's are denied", async (t) => {
    const call = await setup(t);
    assert.deepEqual((await call(emqx({ username: "n:cfg-1:node-z", clientid: "svc-cfg-1-node-z", topic: "svc/cfg-1/node-z/event" }))).json, { result: "deny" });
    assert.deepEqual((await call(emqx({ username: "" }))).json, { result: "deny" });
    assert.deepEqual((await call(emqx({ username: "n:cfg-1:+", clientid: "svc-cfg-1-+" }))).json, { result: "deny" });
    // The node's own topic, but under another client id: judged for the exact node (spec §4 rule 13).
    assert.deepEqual((await call(emqx({ clientid: nodeClientId("cfg-1", "node-b") }))).json, { result: "deny" });
    assert.deepEqual((await call(emqx({ clientid: "" }))).json, { result: "deny" });
  });

  test("a publish whose qos or retain is unknown is denied; a subscribe does not need retain", async (t) => {
    const call = await setup(t);
    const { retain: _r, ...noRetain } = emqx();
    const { qos: _q, ...noQos } = emqx();
    assert.deepEqual((await call(noRetain)).json, { result: "deny" });
    assert.deepEqual((await call(noQos)).json, { result: "deny" });
    assert.deepEqual((await call(emqx({ retain: "" }))).json, { result: "deny" });
    const { retain: _s, ...subscribe } = emqx({ action: "subscribe", topic: "svc/cfg-1/node-a/detect" });
    assert.deepEqual((await call(subscribe)).json, { result: "allow" });
  });

  test("a missing or wrong key answers 401 UNAUTHORIZED, never a result", async (t) => {
    const call = await setup(t);
    const cases: Array<Record<string, string>> = [{}, { "x-svc-internal-key": "" }, { "x-svc-internal-key": `${KEY}x` }, { "x-svc-internal-key": KEY.slice(1) }, { authorization: `Bearer ${KEY}` }];
    for (const headers of cases) {
      const res = await call(emqx(), headers);
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.equal(res.json.error?.code, "UNAUTHORIZED");
      assert.equal(res.json.result, undefined);
    }
    // Even a malformed body is answered 401 first when the key is wrong.
    const res = await call("{", {});
    assert.equal(res.status, 401);
  });

  test("no configured key: every request is 401", async (t) => {
    const call = await setup(t, () => "");
    const res = await call(emqx(), { "x-svc-internal-key": "" });
    assert.equal(res.status, 401);
    assert.equal(res.json.error?.code, "UNAUTHORIZED");
  });

  test("the key is read per request (rotation takes effect at once)", async (t) => {
    let key = KEY;
    const call = await setup(t, () => key);
    assert.equal((await call(emqx())).status, 200);
    key = `${KEY}-rotated`;
    assert.equal((await call(emqx())).status, 401);
    assert.equal((await call(emqx(), { "x-svc-internal-key": key })).status, 200);
  });

  test("a malformed body answers 400 VALIDATION_FAILED (EMQX then applies no_match = deny)", async (t) => {
    const call = await setup(t);
    for (const body of [
      "{",
      {},
      emqx({ action: "all" }),
      emqx({ qos: "one" }),
      emqx({ retain: "maybe" }),
      { ...emqx(), topic: 7 },
      { ...emqx(), clientid: null },
    ]) {
      const res = await call(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json.error?.code, "VALIDATION_FAILED");
    }
  });

  test("numbers and booleans for qos and retain are accepted too", async (t) => {
    const call = await setup(t);
    assert.deepEqual((await call({ ...emqx(), qos: 1, retain: false })).json, { result: "allow" });
    assert.deepEqual((await call({ ...emqx(), qos: 1, retain: true })).json, { result: "deny" });
  });
});

describe("POST /api/internal/emqx/authz as the service wires it", () => {
  test("registered by createServer: key from settings, 401 without it, unknown users denied, documented", async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), "svc-authz-"));
    const settings = testSettings({
      dataDir,
      adminPassword: "correct horse battery staple",
      brokerAuthzSharedKey: KEY,
      mqttEnabled: false,
      embeddedBrokerPort: 0,
      httpPort: 0,
    });
    const server = await createServer(settings, createLogger("silent"), { clock: new ManualClock() });
    t.after(async () => {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    });
    const call = caller(server.app);
    const missing = await call(emqx(), {});
    assert.equal(missing.status, 401);
    assert.equal(missing.json.error?.code, "UNAUTHORIZED");
    assert.deepEqual((await call(emqx({ username: "n:cfg-1:nobody", clientid: "svc-cfg-1-nobody" }))).json, { result: "deny" });
    const doc = server.app.swagger() as { paths: Record<string, { post?: { tags?: string[]; security?: unknown[] } }> };
    assert.deepEqual(doc.paths[URL]?.post?.tags, ["internal"]);
    assert.deepEqual(doc.paths[URL]?.post?.security, []);
  });
});
