/**
 * Personal access tokens (README "Users, roles and tokens"): the secret is answered once with a
 * recognisable prefix and stored only as SHA-256; a token acts with the lower of its role and
 * its user's; it expires, is revoked at once, stops with its disabled user, and cannot mint
 * more tokens.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { sqliteOf } from "../../src/store/connection.js";
import { assertError, startHarness, type Harness } from "./harness.js";

const PASSWORD = "a long enough password";
const DAY = 24 * 3600 * 1000;

async function userSession(h: Harness, username: string, role: string): Promise<{ user_id: string; token: string }> {
  const created = await h.req("POST", "/api/v1/users", { username, password: PASSWORD, role });
  assert.equal(created.status, 201, created.text);
  const login = await h.req("POST", "/api/v1/auth/login", { username, password: PASSWORD }, { auth: false });
  return { user_id: created.json.user_id, token: login.json.access_token };
}

async function mint(h: Harness, session: string, body: Record<string, unknown>) {
  const res = await h.req("POST", "/api/v1/tokens", body, { auth: session });
  assert.equal(res.status, 201, res.text);
  return res.json as { token_id: string; token: string; role: string; expires_at: string; last_used_at: string | null };
}

test("a token's secret is answered once (svc_pat_ prefix, no-store), listed without it, stored only hashed; last use is recorded; GET /auth/me says via token", async (t) => {
  const h = await startHarness(t);
  const res = await h.req("POST", "/api/v1/tokens", { name: "ci deploy", role: "operator", expires_in_days: 30 });
  assert.equal(res.status, 201, res.text);
  assert.equal(res.headers["cache-control"], "no-store");
  const { token, token_id } = res.json;
  assert.match(token, /^svc_pat_[A-Za-z0-9_-]{43}$/);
  assert.equal(res.json.expires_at, new Date(h.clock.now() + 30 * DAY).toISOString());
  const listed = (await h.req("GET", "/api/v1/tokens")).json.tokens;
  assert.deepEqual(listed.map((x: { token_id: string; last_used_at: unknown }) => [x.token_id, x.last_used_at]), [[token_id, null]]);
  assert.ok(!JSON.stringify(listed).includes(token), "the list never shows the secret");
  const dump = JSON.stringify(sqliteOf(h.server.store).prepare("SELECT * FROM access_tokens").all());
  assert.ok(!dump.includes(token) && !dump.includes(token.slice("svc_pat_".length)), "stored only as a hash");

  h.clock.advance(5000);
  const me = await h.req("GET", "/api/v1/auth/me", undefined, { auth: token });
  assert.deepEqual(me.json, { user: { user_id: "usr-admin", username: "admin", role: "operator" }, via: "token", token: { token_id, name: "ci deploy" } });
  assert.equal((await h.req("GET", "/api/v1/tokens")).json.tokens[0].last_used_at, new Date(h.clock.now()).toISOString());
});

test("a token's role is at most its creator's; a token cannot create tokens; 1-365 days", async (t) => {
  const h = await startHarness(t, { authRateLimitMax: 1000 });
  const otto = await userSession(h, "otto", "operator");
  const above = await h.req("POST", "/api/v1/tokens", { name: "x", role: "admin", expires_in_days: 1 }, { auth: otto.token });
  assertError(above, "FORBIDDEN");
  const own = await mint(h, otto.token, { name: "x", role: "operator", expires_in_days: 1 });
  assertError(await h.req("POST", "/api/v1/tokens", { name: "y", role: "viewer", expires_in_days: 1 }, { auth: own.token }), "FORBIDDEN", "a token minting a token");
  for (const days of [0, 366, 1.5]) {
    assertError(await h.req("POST", "/api/v1/tokens", { name: "x", role: "viewer", expires_in_days: days }, { auth: otto.token }), "VALIDATION_FAILED", String(days));
  }
});

test("a token acts with the lower of its role and its user's: demoting the user lowers it at once, disabling the user stops it", async (t) => {
  const h = await startHarness(t, { authRateLimitMax: 1000 });
  const ada = await userSession(h, "ada", "admin");
  const { token } = await mint(h, ada.token, { name: "admin script", role: "admin", expires_in_days: 7 });
  const write = () => h.req("POST", "/api/v1/configs", { unexpected_field: 1 }, { auth: token });
  assertError(await write(), "VALIDATION_FAILED", "an admin token gets past the role check");
  assert.equal((await h.req("PATCH", `/api/v1/users/${ada.user_id}`, { role: "viewer" })).status, 200);
  assertError(await write(), "FORBIDDEN", "the user is a viewer now");
  assert.equal((await h.req("GET", "/api/v1/auth/me", undefined, { auth: token })).json.user.role, "viewer");
  assert.equal((await h.req("PATCH", `/api/v1/users/${ada.user_id}`, { disabled: true })).status, 200);
  assertError(await h.req("GET", "/api/v1/configs", undefined, { auth: token }), "UNAUTHORIZED", "a disabled user's token");
});

test("a token expires on the clock, and a revoked one answers 401 at once; only its user or an owner can revoke it", async (t) => {
  const h = await startHarness(t, { authRateLimitMax: 1000 });
  const vera = await userSession(h, "vera", "viewer");
  const otto = await userSession(h, "otto", "operator");
  const hers = await mint(h, vera.token, { name: "read", role: "viewer", expires_in_days: 1 });
  const read = (tok: string) => h.req("GET", "/api/v1/configs", undefined, { auth: tok });
  assert.equal((await read(hers.token)).status, 200);
  assertError(await h.req("DELETE", `/api/v1/tokens/${hers.token_id}`, undefined, { auth: otto.token }), "NOT_FOUND", "another user's token is not even named");
  assert.equal((await h.req("GET", "/api/v1/tokens", undefined, { auth: otto.token })).json.tokens.length, 0, "otto sees only his own");
  assert.equal((await h.req("GET", "/api/v1/tokens")).json.tokens.length, 1, "the owner sees everyone's");
  assert.equal((await h.req("DELETE", `/api/v1/tokens/${hers.token_id}`, undefined, { auth: vera.token })).status, 204);
  assertError(await read(hers.token), "UNAUTHORIZED", "revoked: refused on the very next request");

  const short = await mint(h, vera.token, { name: "short", role: "viewer", expires_in_days: 1 });
  h.clock.advance(DAY - 1);
  assert.equal((await read(short.token)).status, 200, "valid until the last millisecond");
  h.clock.advance(1);
  assertError(await read(short.token), "UNAUTHORIZED", "expired");
});
