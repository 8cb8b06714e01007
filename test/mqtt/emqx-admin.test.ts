import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { createLogger, type Logger } from "../../src/logger.js";
import { nodeClientId, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { BrokerUnavailableError, type BrokerAdmin, type NodeBrokerAccount } from "../../src/mqtt/broker-admin.js";
import { createEmqxBrokerAdmin, type EmqxBrokerAdminOptions } from "../../src/mqtt/emqx-admin.js";
import { startFakeEmqx, type FakeEmqx, type RecordedCall } from "../helpers/fake-emqx.js";

// The EMQX adapter against a real HTTP server that
// answers EMQX 5's documented management API shapes, every call recorded and checked.
// spec §1 item 3 (the database is the truth, the broker mirrors it), §4 rules 11-12 (bind
// creates/updates the broker user; reset deletes it and disconnects the client), §5 (agents are
// authorized per node: never superusers), §1.8 (reconcile after the broker is online).

const USERS = "/api/v5/authentication/password_based%3Abuilt_in_database/users";

function account(configId: string, nodeId: string, password = `pw-${configId}-${nodeId}-0123456789abcdef`): NodeBrokerAccount {
  return { configId, nodeId, username: nodeUsername(configId, nodeId), clientId: nodeClientId(configId, nodeId), password };
}

/** A debug-level logger whose lines are kept, to prove no secret is ever written. */
function capturingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger("debug", { write: (s: string) => void lines.push(s) }), lines };
}

function adapter(t: TestContext, fake: FakeEmqx, over: Partial<EmqxBrokerAdminOptions> = {}): { admin: BrokerAdmin; lines: string[] } {
  const { log, lines } = capturingLogger();
  const admin = createEmqxBrokerAdmin({ apiUrl: fake.url, apiKey: fake.apiKey, apiSecret: fake.apiSecret, log, ...over });
  t.after(() => admin.close());
  return { admin, lines };
}

function basic(fake: FakeEmqx): string {
  return `Basic ${Buffer.from(`${fake.apiKey}:${fake.apiSecret}`).toString("base64")}`;
}

/** Method, path and status of each call: the sequence the adapter made. */
function trail(calls: RecordedCall[]): string[] {
  return calls.map((c) => `${c.method} ${c.path} ${c.status ?? "-"}`);
}

function assertNoSecrets(lines: string[], secrets: string[]): void {
  const text = lines.join("");
  assert.ok(lines.length > 0, "the adapter logged something");
  for (const s of secrets) assert.equal(text.includes(s), false, `a log line carries a secret: ${s.slice(0, 6)}…`);
}

describe("EMQX adapter: bind-style putNode (spec §4 rule 11)", () => {
  test("a new user: POST with Basic auth and is_superuser false, then the client id is kicked", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    const a = account("cfg-1", "node-a");
    await admin.putNode(a);

    assert.deepEqual(trail(fake.calls), [
      `POST ${USERS} 201`,
      "DELETE /api/v5/clients/svc-cfg-1-node-a 404",
    ]);
    const [create, kick] = fake.calls as [RecordedCall, RecordedCall];
    assert.equal(create.authorization, basic(fake));
    assert.equal(kick.authorization, basic(fake));
    assert.equal(create.contentType, "application/json");
    assert.deepEqual(create.body, { user_id: "n:cfg-1:node-a", password: a.password, is_superuser: false });
    assert.equal(kick.body, undefined);
    assert.deepEqual(fake.users.get("n:cfg-1:node-a"), { password: a.password, is_superuser: false });
  });

  test("an existing user (rebind rotates the password): 409 ALREADY_EXISTS → PUT, and the live client is kicked", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    // A leftover created by hand as a superuser: the rewrite demotes it (agents never skip authz, §5).
    fake.users.set("n:cfg-1:node-a", { password: "old-password", is_superuser: true });
    fake.clients.add("svc-cfg-1-node-a");
    const a = account("cfg-1", "node-a", "new-password-after-rebind-0123456789");
    await admin.putNode(a);

    assert.deepEqual(trail(fake.calls), [
      `POST ${USERS} 409`,
      `PUT ${USERS}/n%3Acfg-1%3Anode-a 200`,
      "DELETE /api/v5/clients/svc-cfg-1-node-a 204",
    ]);
    assert.deepEqual(fake.calls[1]!.body, { password: a.password, is_superuser: false });
    assert.equal(fake.calls[1]!.authorization, basic(fake));
    assert.deepEqual(fake.users.get("n:cfg-1:node-a"), { password: a.password, is_superuser: false });
    assert.equal(fake.clients.has("svc-cfg-1-node-a"), false, "old credentials' session ended");
  });

  test("putNode is idempotent: a second call rewrites the same password", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    const a = account("cfg-1", "node-a");
    await admin.putNode(a);
    await admin.putNode(a);
    assert.equal(fake.users.size, 1);
    assert.equal(fake.users.get(a.username)?.password, a.password);
  });

  test("path parts are URL-encoded: a custom authenticator id and a client id with reserved characters", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake, { authenticatorId: "password_based:built_in_database", apiUrl: `${fake.url}/api/v5/` });
    await admin.kick("svc a/b?c#d");
    assert.equal(fake.calls[0]!.path, "/api/v5/clients/svc%20a%2Fb%3Fc%23d");
  });
});

describe("EMQX adapter: removeNode and kick (spec §4 rule 12)", () => {
  test("removeNode deletes the user, kicks the client and clears its authorization cache", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    const a = account("cfg-1", "node-a");
    fake.users.set(a.username, { password: a.password, is_superuser: false });
    fake.clients.add(a.clientId);
    fake.cachedClients.add(a.clientId);
    await admin.removeNode(a.username, a.clientId);

    assert.deepEqual(trail(fake.calls), [
      `DELETE ${USERS}/n%3Acfg-1%3Anode-a 204`,
      "DELETE /api/v5/clients/svc-cfg-1-node-a 204",
      // Already gone with the kicked session: 404 is fine.
      "DELETE /api/v5/clients/svc-cfg-1-node-a/authorization/cache 404",
    ]);
    for (const c of fake.calls) assert.equal(c.authorization, basic(fake));
    assert.equal(fake.users.has(a.username), false);
    assert.equal(fake.clients.has(a.clientId), false);
    assert.equal(fake.cachedClients.has(a.clientId), false);
  });

  test("removeNode of an absent user and client succeeds (404s are fine)", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    await admin.removeNode("n:cfg-1:gone", "svc-cfg-1-gone");
    assert.deepEqual(
      fake.calls.map((c) => c.status),
      [404, 404, 404],
    );
  });

  test("kick disconnects a live client; an absent one is fine", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    fake.clients.add("svc-cfg-1-node-a");
    await admin.kick("svc-cfg-1-node-a");
    await admin.kick("svc-cfg-1-node-a");
    assert.deepEqual(trail(fake.calls), ["DELETE /api/v5/clients/svc-cfg-1-node-a 204", "DELETE /api/v5/clients/svc-cfg-1-node-a 404"]);
  });
});

describe("EMQX adapter: reconcile (spec §1.8, §1 item 3)", () => {
  test("several pages: strays removed and kicked, operators' users kept, missing users created, caches cleared", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake, { pageSize: 3, concurrency: 3 });
    const keep = account("cfg-1", "node-a", "current-password-of-node-a-0123456");
    const create = account("cfg-2", "node-b");
    // Before: 9 users over 3 pages of 3.
    fake.users.set(keep.username, { password: "stale-password", is_superuser: false });
    fake.users.set("n:cfg-1:old-1", { password: "x", is_superuser: false });
    fake.users.set("n:cfg-1:old-2", { password: "x", is_superuser: false });
    fake.users.set("n:cfg-9:old-3", { password: "x", is_superuser: false });
    fake.users.set("n:not-a-node-name", { password: "x", is_superuser: false });
    fake.users.set("ops-admin", { password: "operator", is_superuser: true });
    fake.users.set("dashboard-reader", { password: "reader", is_superuser: false });
    fake.users.set("svc-backend", { password: "stale-backend", is_superuser: true });
    fake.users.set("zz-monitor", { password: "mon", is_superuser: false });
    for (const c of ["svc-cfg-1-old-1", "svc-cfg-9-old-3", keep.clientId, "ops-client"]) fake.clients.add(c);

    const report = await admin.reconcile({ backend: { username: "svc-backend", password: "backend-password-0123456789" }, nodes: [keep, create] });

    assert.deepEqual(report, { upserted: 2, removed: 4 });
    assert.deepEqual(
      [...fake.users.entries()].sort(([a], [b]) => a.localeCompare(b)),
      [
        ["dashboard-reader", { password: "reader", is_superuser: false }],
        [keep.username, { password: keep.password, is_superuser: false }],
        [create.username, { password: create.password, is_superuser: false }],
        ["ops-admin", { password: "operator", is_superuser: true }],
        ["svc-backend", { password: "backend-password-0123456789", is_superuser: false }],
        ["zz-monitor", { password: "mon", is_superuser: false }],
      ],
    );
    // Strays' sessions ended; the wanted node's live session and the operator's client stay.
    assert.deepEqual([...fake.clients].sort(), [keep.clientId, "ops-client"].sort());

    // The listing: pages 1..3 of limit 3, every one before any change.
    const gets = fake.calls.filter((c) => c.method === "GET");
    assert.deepEqual(
      gets.map((c) => [c.path, c.query]),
      [1, 2, 3].map((p) => [USERS, { page: String(p), limit: "3" }]),
    );
    const lastGet = fake.calls.lastIndexOf(gets.at(-1)!);
    assert.ok(fake.calls.slice(0, lastGet).every((c) => c.method === "GET"), "nothing changed before the listing ended");
    // The global authorization cache is cleared once, last.
    assert.equal(fake.globalCacheClears, 1);
    assert.equal(trail(fake.calls).at(-1), "DELETE /api/v5/authorization/cache 204");
    // Wanted users that exist are rewritten with PUT (no 409 round trip); missing ones POSTed.
    const writes = fake.calls.filter((c) => c.method === "POST" || c.method === "PUT").map((c) => `${c.method} ${c.path}`).sort();
    assert.deepEqual(writes, [`POST ${USERS}`, `PUT ${USERS}/n%3Acfg-1%3Anode-a`, `PUT ${USERS}/svc-backend`].sort());
    // Deleted: exactly the four node-shaped strays; kicked: the three with a derivable client id.
    const deletes = fake.calls.filter((c) => c.method === "DELETE" && c.path.startsWith(USERS)).map((c) => decodeURIComponent(c.path.slice(USERS.length + 1)));
    assert.deepEqual(deletes.sort(), ["n:cfg-1:old-1", "n:cfg-1:old-2", "n:cfg-9:old-3", "n:not-a-node-name"]);
    const kicks = fake.calls.filter((c) => c.method === "DELETE" && /^\/api\/v5\/clients\/[^/]+$/.test(c.path)).map((c) => c.path);
    assert.deepEqual(kicks.sort(), ["/api/v5/clients/svc-cfg-1-old-1", "/api/v5/clients/svc-cfg-1-old-2", "/api/v5/clients/svc-cfg-9-old-3"]);
    // Every call authenticated; no request ever asks for a superuser (§5: authz must run).
    for (const c of fake.calls) {
      assert.equal(c.authorization, basic(fake));
      assert.notEqual((c.body as { is_superuser?: boolean } | undefined)?.is_superuser, true, `${c.method} ${c.path}`);
    }
  });

  test("a second reconcile changes nothing but rewrites passwords (idempotent)", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake, { pageSize: 2 });
    const desired = { backend: { username: "svc-backend", password: "backend-password-0123456789" }, nodes: [account("c", "a"), account("c", "b"), account("c", "c")] };
    assert.deepEqual(await admin.reconcile(desired), { upserted: 3, removed: 0 });
    const before = structuredClone([...fake.users.entries()]);
    fake.calls.length = 0;
    assert.deepEqual(await admin.reconcile(desired), { upserted: 3, removed: 0 });
    assert.deepEqual([...fake.users.entries()], before);
    assert.equal(fake.calls.filter((c) => c.method === "POST").length, 0);
    assert.equal(fake.calls.filter((c) => c.method === "GET").length, 2, "4 users in pages of 2");
  });

  test("an empty broker: the backend and every node are created", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    const report = await admin.reconcile({ backend: { username: "svc-backend", password: "backend-password-0123456789" }, nodes: [account("c", "a")] });
    assert.deepEqual(report, { upserted: 1, removed: 0 });
    assert.deepEqual([...fake.users.keys()].sort(), ["n:c:a", "svc-backend"]);
  });

  test("keep: a bound node whose sealed password cannot be opened keeps its account untouched (neither rewritten nor removed)", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    const backend = { username: "svc-backend", password: "backend-password-0123456789" };
    await admin.reconcile({ backend, nodes: [account("c", "a"), account("c", "b")] });
    const heldB = structuredClone(fake.users.get("n:c:b"));
    fake.calls.length = 0;
    const report = await admin.reconcile({ backend, nodes: [account("c", "a")], keep: ["n:c:b"] });
    assert.deepEqual(report, { upserted: 1, removed: 0 });
    assert.deepEqual(fake.users.get("n:c:b"), heldB, "the kept account is as EMQX held it");
    assert.equal(fake.calls.some((c) => c.path.includes(encodeURIComponent("n:c:b"))), false, "no call touched it");
  });

  test("backendIsSuperuser: true makes only the backend a superuser", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake, { backendIsSuperuser: true });
    await admin.reconcile({ backend: { username: "svc-backend", password: "backend-password-0123456789" }, nodes: [account("c", "a")] });
    assert.equal(fake.users.get("svc-backend")?.is_superuser, true);
    assert.equal(fake.users.get("n:c:a")?.is_superuser, false);
  });
});

describe("EMQX adapter: failures reject with BrokerUnavailableError (spec §1.7 last bullet, §1.8)", () => {
  const backend = { username: "svc-backend", password: "backend-password-0123456789" };

  test("connection refused", async (t) => {
    const fake = await startFakeEmqx(t);
    const url = fake.url;
    await fake.close();
    const { log } = capturingLogger();
    const admin = createEmqxBrokerAdmin({ apiUrl: url, apiKey: "k", apiSecret: "s", log });
    await assert.rejects(admin.putNode(account("c", "a")), (err: unknown) => err instanceof BrokerUnavailableError && /ECONNREFUSED/.test(err.message));
    await assert.rejects(admin.reconcile({ backend, nodes: [] }), BrokerUnavailableError);
  });

  test("HTTP 500 and 503", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    fake.fault = () => ({ kind: "status", status: 500 });
    await assert.rejects(admin.putNode(account("c", "a")), (err: unknown) => err instanceof BrokerUnavailableError && /HTTP 500/.test(err.message));
    fake.fault = (c) => (c.method === "GET" ? { kind: "status", status: 503 } : undefined);
    await assert.rejects(admin.reconcile({ backend, nodes: [] }), (err: unknown) => err instanceof BrokerUnavailableError && /HTTP 503/.test(err.message));
    // A 500 on one write of a reconciliation fails the whole run (the caller retries) and the
    // caches are not reported cleared.
    fake.fault = (c) => (c.method === "POST" ? { kind: "status", status: 500 } : undefined);
    await assert.rejects(admin.reconcile({ backend, nodes: [account("c", "a")] }), BrokerUnavailableError);
    assert.equal(fake.globalCacheClears, 0);
  });

  test("a request that gets no answer times out", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake, { requestTimeoutMs: 150 });
    fake.fault = () => ({ kind: "hang" });
    await assert.rejects(admin.kick("svc-c-a"), (err: unknown) => err instanceof BrokerUnavailableError && /no answer within 150 ms/.test(err.message));
  });

  test("malformed or unexpected bodies", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    fake.fault = (c) => (c.method === "GET" ? { kind: "raw", status: 200, body: "<html>proxy error</html>" } : undefined);
    await assert.rejects(admin.reconcile({ backend, nodes: [] }), (err: unknown) => err instanceof BrokerUnavailableError && /not JSON/.test(err.message));
    fake.fault = (c) => (c.method === "GET" ? { kind: "raw", status: 200, body: JSON.stringify({ data: "nope", meta: {} }) } : undefined);
    await assert.rejects(admin.reconcile({ backend, nodes: [] }), (err: unknown) => err instanceof BrokerUnavailableError && /unexpected body/.test(err.message));
    fake.fault = (c) => (c.method === "POST" ? { kind: "raw", status: 201, body: JSON.stringify({ id: 7 }) } : undefined);
    await assert.rejects(admin.putNode(account("c", "a")), (err: unknown) => err instanceof BrokerUnavailableError && /unexpected body/.test(err.message));
  });

  test("refusals: wrong API secret (401) and an unknown authenticator (404)", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin: wrong } = adapter(t, fake, { apiSecret: "not-the-secret" });
    await assert.rejects(wrong.putNode(account("c", "a")), (err: unknown) => err instanceof BrokerUnavailableError && /HTTP 401 BAD_API_KEY_OR_SECRET/.test(err.message));
    const { admin } = adapter(t, fake, { authenticatorId: "password_based:no_such" });
    await assert.rejects(admin.putNode(account("c", "a")), (err: unknown) => err instanceof BrokerUnavailableError && /HTTP 404/.test(err.message));
    assert.equal(fake.users.size, 0);
  });

  test("after close() every call rejects without a request", async (t) => {
    const fake = await startFakeEmqx(t);
    const { admin } = adapter(t, fake);
    await admin.close();
    await assert.rejects(admin.kick("svc-c-a"), BrokerUnavailableError);
    assert.equal(fake.calls.length, 0);
  });

  test("invalid options throw at creation, naming the option and never the secret", () => {
    const { log } = capturingLogger();
    assert.throws(() => createEmqxBrokerAdmin({ apiUrl: "http://key:hunter2-secret@emqx:18083", apiKey: "k", apiSecret: "hunter2-secret", log }), (err: Error) => /apiUrl/.test(err.message) && !err.message.includes("hunter2"));
    assert.throws(() => createEmqxBrokerAdmin({ apiUrl: "ftp://emqx", apiKey: "k", apiSecret: "s", log }), /apiUrl/);
    assert.throws(() => createEmqxBrokerAdmin({ apiUrl: "http://emqx:18083", apiKey: "k", apiSecret: "", log }), /apiSecret/);
  });
});

test("secrets never reach the log: API secret, Basic header, node and backend passwords (STYLE: redaction)", async (t) => {
  const fake = await startFakeEmqx(t);
  const { admin, lines } = adapter(t, fake, { pageSize: 1 });
  const a = account("cfg-1", "node-a", "node-a-password-that-must-not-leak-1");
  const b = account("cfg-1", "node-b", "node-b-password-that-must-not-leak-2");
  const backendPassword = "backend-password-that-must-not-leak-3";
  fake.users.set("n:cfg-1:stray", { password: "stray-password-that-must-not-leak-4", is_superuser: false });
  await admin.putNode(a);
  await admin.putNode(a);
  await admin.reconcile({ backend: { username: "svc-backend", password: backendPassword }, nodes: [a, b] });
  await admin.removeNode(b.username, b.clientId);
  fake.fault = () => ({ kind: "status", status: 500, body: JSON.stringify({ code: "INTERNAL_ERROR", message: `echo ${a.password}` }) });
  await assert.rejects(admin.putNode(a), (err: unknown) => err instanceof BrokerUnavailableError && !err.message.includes(a.password));
  fake.fault = () => ({ kind: "hang" });
  const { admin: quick, lines: quickLines } = adapter(t, fake, { requestTimeoutMs: 100 });
  await assert.rejects(quick.putNode(b), BrokerUnavailableError);

  const secrets = [fake.apiSecret, basic(fake).slice("Basic ".length), a.password, b.password, backendPassword, "stray-password-that-must-not-leak-4"];
  assertNoSecrets(lines, secrets);
  assertNoSecrets(quickLines, secrets);
  // The log is still useful: it names the calls.
  assert.ok(lines.some((l) => l.includes("EMQX accounts reconciled")));
});
