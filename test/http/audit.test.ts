/**
 * The audit log (README "Audit log"; DESIGN §3 "an append-only, hash-chained audit log records
 * every change, command, login and refusal, never a secret"): what each request records, the
 * hash chain and its verification, retention that keeps the chain verifiable, the list, its
 * filters and cursor, and the NDJSON export.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { canonicalAuditContent, auditRowHash, GENESIS_HASH } from "../../src/services/audit-chain.js";
import { AUDIT_RULES, auditEntryOf } from "../../src/http/audit.hook.js";
import { sqliteOf } from "../../src/store/connection.js";
import { loadSettings } from "../../src/config.js";
import { assertError, createConfig, createNode, startHarness, type Harness } from "./harness.js";

/** Every entry, oldest first, through the API (which writes what is queued first). */
async function entries(h: Harness, query = ""): Promise<Array<Record<string, any>>> {
  await settle(h);
  const out: Array<Record<string, any>> = [];
  let cursor: string | null = null;
  do {
    const res = await h.req("GET", `/api/v1/audit?limit=500${query}${cursor === null ? "" : `&cursor=${cursor}`}`);
    assert.equal(res.status, 200, res.text);
    out.push(...res.json.items);
    cursor = res.json.next_cursor;
  } while (cursor !== null);
  return out.reverse();
}

/** Lets the last answers' onResponse hooks run, then waits for their entries' commit. */
async function settle(h: Harness): Promise<void> {
  await new Promise((r) => setImmediate(r));
  await h.server.audit.flushed();
}

async function verify(h: Harness): Promise<{ ok: boolean; rows_checked: number; first_broken_audit_id: number | null; pruned_through_audit_id: number | null }> {
  await settle(h);
  const res = await h.req("GET", "/api/v1/audit/verify");
  assert.equal(res.status, 200, res.text);
  return res.json;
}

test("every state-changing route of the OpenAPI document has a named audit action; the audit routes need admin", async (t) => {
  const h = await startHarness(t);
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  const unnamed: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { operationId: string; "x-min-role"?: string }>>)) {
    for (const [method, op] of Object.entries(ops)) {
      if (method !== "get" && method !== "head" && AUDIT_RULES[op.operationId] === undefined) unnamed.push(`${method.toUpperCase()} ${path} (${op.operationId})`);
      if (path.startsWith("/api/v1/audit")) assert.equal(op["x-min-role"], "admin", `${path}: who did what is for admins`);
    }
  }
  assert.deepEqual(unnamed, []);
});

test("writes, sign-ins and refusals are recorded: actor, action, target (a create's new id), outcome, source address, request id, changes by field name", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { name: "audited" });
  const node = await createNode(h, config.config_id, { name: "n1", public_address: "192.0.2.1" });
  assert.equal((await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}`, { name: "n1-renamed" })).status, 200);
  const vera = await h.req("POST", "/api/v1/users", { username: "vera", password: "a long enough password", role: "viewer" });
  assert.equal(vera.status, 201);
  assertError(await h.req("POST", "/api/v1/auth/login", { username: "vera", password: "not her password" }, { auth: false }), "UNAUTHORIZED");
  const login = await h.req("POST", "/api/v1/auth/login", { username: "vera", password: "a long enough password" }, { auth: false });
  assert.equal(login.status, 200);
  // Refusals: a viewer's write and owner-only read (403), a write without a credential (401).
  assertError(await h.req("DELETE", `/api/v1/configs/${config.config_id}`, undefined, { auth: login.json.access_token }), "FORBIDDEN");
  assertError(await h.req("GET", "/api/v1/users", undefined, { auth: login.json.access_token }), "FORBIDDEN");
  assertError(await h.req("POST", "/api/v1/configs", { name: "x" }, { auth: false }), "UNAUTHORIZED");
  // Reads that pass are not recorded.
  assert.equal((await h.req("GET", "/api/v1/configs")).status, 200);

  const all = await entries(h);
  const summary = all.map((e) => `${e.action} ${e.outcome} ${e.actor.kind}:${e.actor.name ?? "-"} ${e.target.type ?? "-"}:${e.target.id ?? "-"}`);
  assert.deepEqual(summary, [
    "auth.login ok user:admin -:-",
    `config.create ok user:admin config:${config.config_id}`,
    `node.create ok user:admin node:${node.node_id}`,
    `node.update ok user:admin node:${node.node_id}`,
    `user.create ok user:admin user:${vera.json.user_id}`,
    "auth.login denied user:vera -:-",
    "auth.login ok user:vera -:-",
    `config.delete denied user:vera config:${config.config_id}`,
    "api.list_users denied user:vera -:-",
    "config.create denied anonymous:- config:-",
  ]);
  const [first, , nodeCreate, nodeUpdate, userCreate, failedLogin, vLogin] = all;
  assert.equal(first?.actor.id, "usr-admin");
  assert.equal(vLogin?.actor.id, vera.json.user_id);
  assert.equal(failedLogin?.actor.id, null, "the username tried, not an account");
  assert.equal(nodeCreate?.target.config_id, config.config_id);
  assert.deepEqual(nodeUpdate?.changes, { fields: ["name"], values: { name: "n1-renamed" } });
  assert.deepEqual(userCreate?.changes, { fields: ["password", "role", "username"], values: { role: "viewer", username: "vera" } });
  assert.deepEqual(failedLogin?.changes, { fields: ["password", "username"], values: { username: "vera" } });
  for (const e of all) {
    assert.equal(e.source_ip, "127.0.0.1");
    assert.match(e.request_id, /^[0-9a-f-]{36}$/);
  }
  assert.deepEqual(all.map((e) => e.audit_id), all.map((_, i) => i + 1), "consecutive ids");
});

test("tamper evidence: editing any column of one stored row makes verify name exactly that row; a deleted row names its successor; the table refuses UPDATE", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  for (let i = 0; i < 6; i++) await createNode(h, config.config_id, { name: `n${i}` });
  const before = await verify(h);
  assert.deepEqual(before, { ok: true, rows_checked: 8, first_broken_audit_id: null, pruned_through_audit_id: null });
  const sqlite = sqliteOf(h.server.store);
  // The store's own path refuses to change a row.
  assert.throws(() => sqlite.prepare("UPDATE audit_log SET outcome = 'failed' WHERE audit_id = 4").run(), /append-only/);
  // Someone with the file drops the trigger and edits row 4: one column, the hash left as it was.
  sqlite.exec("DROP TRIGGER audit_log_append_only");
  for (const [column, value] of [["actor_name", "mallory"], ["at", 1], ["changes", null], ["outcome", "denied"]] as const) {
    const saved = sqlite.prepare(`SELECT ${column} AS v FROM audit_log WHERE audit_id = 4`).get() as { v: unknown };
    sqlite.prepare(`UPDATE audit_log SET ${column} = ? WHERE audit_id = 4`).run(value);
    const broken = await verify(h);
    assert.equal(broken.ok, false, column);
    assert.equal(broken.first_broken_audit_id, 4, `${column}: the edited row is named`);
    sqlite.prepare(`UPDATE audit_log SET ${column} = ? WHERE audit_id = 4`).run(saved.v);
  }
  assert.equal((await verify(h)).ok, true, "put back, the chain holds again");
  // Recomputing the edited row's hash moves the break to the next row (its link).
  const row4 = sqlite.prepare("SELECT * FROM audit_log WHERE audit_id = 4").get() as Record<string, any>;
  const prev = (sqlite.prepare("SELECT hash FROM audit_log WHERE audit_id = 3").get() as { hash: string }).hash;
  sqlite.prepare("UPDATE audit_log SET actor_name = 'mallory', hash = ? WHERE audit_id = 4").run(auditRowHash(prev, { ...row4, actor_name: "mallory" } as never));
  assert.equal((await verify(h)).first_broken_audit_id, 5);
  sqlite.prepare("UPDATE audit_log SET actor_name = ?, hash = ? WHERE audit_id = 4").run(row4.actor_name, row4.hash);
  sqlite.prepare("DELETE FROM audit_log WHERE audit_id = 6").run();
  assert.equal((await verify(h)).first_broken_audit_id, 7, "a removed row breaks its successor's link");
  // Removing the newest rows is seen too while the service knows its head.
  sqlite.prepare("DELETE FROM audit_log WHERE audit_id >= 6").run();
  assert.equal((await verify(h)).first_broken_audit_id, 6);
});

test("retention (SVC_AUDIT_RETENTION_DAYS) removes old entries from the oldest end on the clock's timer, records the boundary and the prune, and verify stays ok", async (t) => {
  const day = 86_400_000;
  const h = await startHarness(t, { auditRetentionDays: 30, adminSessionTtlMs: 100 * day });
  const config = await createConfig(h);
  await createNode(h, config.config_id, { name: "old" });
  h.clock.advance(20 * day);
  await createNode(h, config.config_id, { name: "newer" });
  // 30 days less an hour after the first three entries: none is past the retention yet.
  h.clock.advance(10 * day - 3_600_000);
  assert.deepEqual((await entries(h)).map((e) => e.audit_id), [1, 2, 3, 4]);
  // The hourly timer, two hours later: the three entries older than 30 days go.
  h.clock.advance(2 * 3_600_000);
  let all: Array<Record<string, any>> = [];
  for (let i = 0; i < 100 && !all.some((e) => e.action === "audit.prune"); i++) {
    await new Promise((r) => setImmediate(r));
    all = await entries(h);
  }
  assert.deepEqual(all.map((e) => `${e.audit_id} ${e.action}`), ["4 node.create", "5 audit.prune"]);
  assert.deepEqual(all[1]?.actor, { kind: "system", id: null, name: "service" });
  assert.deepEqual(all[1]?.changes, { removed: 3, retention_days: 30 });
  assert.deepEqual(await verify(h), { ok: true, rows_checked: 2, first_broken_audit_id: null, pruned_through_audit_id: 3 });
  // The boundary is what the kept chain is checked from: removing the oldest kept row is seen.
  sqliteOf(h.server.store).prepare("DELETE FROM audit_log WHERE audit_id = 4").run();
  assert.equal((await verify(h)).first_broken_audit_id, 5);
});

test("the list: newest first, filters by actor, action or area, target, outcome and time, a cursor; the export: NDJSON in chain order whose hashes anyone can recompute", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const nodes = [];
  for (let i = 0; i < 5; i++) {
    nodes.push(await createNode(h, config.config_id, { name: `n${i}` }));
    h.clock.advance(1000);
  }
  const sinceIso = new Date(h.clock.now() - 2500).toISOString();
  assertError(await h.req("POST", "/api/v1/configs", { name: "x" }, { auth: false }), "UNAUTHORIZED");
  await settle(h);
  const page1 = await h.req("GET", "/api/v1/audit?limit=3");
  assert.deepEqual(page1.json.items.map((e: { audit_id: number }) => e.audit_id), [8, 7, 6]);
  const page2 = await h.req("GET", `/api/v1/audit?limit=3&cursor=${page1.json.next_cursor}`);
  assert.deepEqual(page2.json.items.map((e: { audit_id: number }) => e.audit_id), [5, 4, 3]);
  const page3 = await h.req("GET", `/api/v1/audit?limit=3&cursor=${page2.json.next_cursor}`);
  assert.deepEqual(page3.json.items.map((e: { audit_id: number }) => e.audit_id), [2, 1]);
  assert.equal(page3.json.next_cursor, null);
  assertError(await h.req("GET", "/api/v1/audit?cursor=bm90LWEtY3Vyc29y"), "INVALID_CURSOR");
  const ids = async (q: string) => (await entries(h, q)).map((e) => e.audit_id);
  assert.deepEqual(await ids("&action=node.create"), [3, 4, 5, 6, 7]);
  assert.deepEqual(await ids("&action=node."), [3, 4, 5, 6, 7]);
  assert.deepEqual(await ids("&action=config."), [2, 8]);
  assert.deepEqual(await ids(`&target_id=${nodes[2]?.node_id}`), [5]);
  assert.deepEqual(await ids("&actor=admin"), [1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(await ids("&actor=usr-admin"), [1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(await ids("&outcome=denied"), [8]);
  assert.deepEqual(await ids(`&since=${encodeURIComponent(sinceIso)}&action=node.`), [6, 7]);
  assert.deepEqual(await ids(`&until=${encodeURIComponent(sinceIso)}&action=node.`), [3, 4, 5]);

  const exported = await h.req("GET", "/api/v1/audit/export?action=node.");
  assert.equal(exported.status, 200);
  assert.match(String(exported.headers["content-type"]), /^application\/x-ndjson/);
  assert.deepEqual(exported.text.trimEnd().split("\n").map((l) => JSON.parse(l).audit_id), [3, 4, 5, 6, 7]);
  // An outside verifier: the whole export, the chain recomputed from the entries alone.
  const lines = (await h.req("GET", "/api/v1/audit/export")).text.trimEnd().split("\n").map((l) => JSON.parse(l));
  let prev = GENESIS_HASH;
  for (const e of lines) {
    const row = {
      audit_id: e.audit_id, at: Date.parse(e.at), actor_kind: e.actor.kind, actor_id: e.actor.id, actor_name: e.actor.name, action: e.action,
      target_type: e.target.type, target_id: e.target.id, target_config_id: e.target.config_id, outcome: e.outcome, source_ip: e.source_ip,
      request_id: e.request_id, changes: e.changes === null ? null : JSON.stringify(e.changes),
    };
    assert.ok(canonicalAuditContent(row).length > 0);
    assert.equal(auditRowHash(prev, row), e.hash, `entry ${e.audit_id}`);
    prev = e.hash;
  }
  assert.equal(lines.length, 8);
  // A viewer, an operator: no access.
  const op = await h.req("POST", "/api/v1/users", { username: "otto", password: "a long enough password", role: "operator" });
  assert.equal(op.status, 201);
  const otto = (await h.req("POST", "/api/v1/auth/login", { username: "otto", password: "a long enough password" }, { auth: false })).json.access_token;
  for (const path of ["/api/v1/audit", "/api/v1/audit/verify", "/api/v1/audit/export"]) assertError(await h.req("GET", path, undefined, { auth: otto }), "FORBIDDEN");
});

test("the actor: a password session is user, a single sign-on session oidc, an access token token (its id, its user's name), no credential anonymous", () => {
  const request = (principal: unknown, operationId = "createConfig", body: unknown = { name: "x" }) =>
    ({ routeOptions: { schema: { operationId }, config: {} }, method: "POST", principal, params: {}, body, ip: "192.0.2.1", id: "req-1" }) as unknown as Parameters<typeof auditEntryOf>[0];
  const who = (principal: unknown, operationId?: string, body?: unknown) => {
    const e = auditEntryOf(request(principal, operationId, body), 201);
    return e === null ? null : [e.actor_kind, e.actor_id, e.actor_name];
  };
  const user = { user_id: "usr-a", username: "ada", role: "admin" };
  assert.deepEqual(who({ ...user, via: "session", login: "password" }), ["user", "usr-a", "ada"]);
  assert.deepEqual(who({ ...user, via: "session" }), ["user", "usr-a", "ada"]);
  assert.deepEqual(who({ ...user, via: "session", login: "oidc" }), ["oidc", "usr-a", "ada"]);
  assert.deepEqual(who({ ...user, via: "token", token: { token_id: "tok-1", name: "ci" } }), ["token", "tok-1", "ada"]);
  assert.deepEqual(who(undefined), ["anonymous", null, null]);
  assert.deepEqual(who(undefined, "login", { username: "mallory", password: "x" }), ["user", null, "mallory"]);
  assert.equal(auditEntryOf(request(undefined, "authorizeEmqxClient"), 200), null, "the broker's authorization queries are never recorded");
  // A public GET that signs someone in (a single sign-on callback) is recorded as its sign-in.
  const callback = { routeOptions: { schema: { operationId: "anyCallback" }, config: { auth: "public" } }, method: "GET", principal: { ...user, via: "session", login: "oidc" }, params: {}, ip: "192.0.2.1", id: "r" };
  assert.deepEqual(auditEntryOf(callback as never, 302)?.actor_kind, "oidc");
});

test("a control command's entry carries the command's request_id (the control log's), so the two can be joined", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { name: "edge", mode: "dynamic", public_address: "192.0.2.7" });
  const cmd = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/bind-command`);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  const bound = await h.req("POST", "/api/client/bind", { bind_token: token, server_url: "http://127.0.0.1", client_version: "1.0.0", platform: "linux", hostname: "h" }, { auth: false });
  assert.equal(bound.status, 200, bound.text);
  const sent = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/control`, { action: "push_config" });
  assert.equal(sent.status, 202, sent.text);
  const all = await entries(h);
  const control = all.find((e) => e.action === "control.push_config");
  assert.equal(control?.request_id, sent.json.request_id);
  assert.deepEqual(control?.target, { type: "node", id: node.node_id, config_id: config.config_id });
  const bind = all.find((e) => e.action === "node.bind");
  assert.deepEqual([bind?.actor.kind, bind?.target.id, bind?.target.config_id], ["anonymous", node.node_id, config.config_id]);
  assert.deepEqual(bind?.changes.fields, ["bind_token", "client_version", "hostname", "platform", "server_url"]);
});

test("SVC_AUDIT_RETENTION_DAYS: default 365, whole days 1..36500, anything else refused in one line", () => {
  assert.equal(loadSettings({}).auditRetentionDays, 365);
  assert.equal(loadSettings({ SVC_AUDIT_RETENTION_DAYS: "30" }).auditRetentionDays, 30);
  for (const bad of ["0", "36501", "1.5", "a year"]) {
    assert.throws(() => loadSettings({ SVC_AUDIT_RETENTION_DAYS: bad }), /^SettingsError: invalid setting SVC_AUDIT_RETENTION_DAYS: /, bad);
  }
});
