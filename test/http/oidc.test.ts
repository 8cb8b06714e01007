/**
 * Single sign-on through a real OpenID provider on loopback (README "Single sign-on (OIDC)"):
 * the authorization code flow with PKCE, the role from the provider's groups at every sign-in,
 * and every failure landing on the sign-in page with its reason and no session.
 */
import assert from "node:assert/strict";
import test, { type TestContext } from "node:test";
import { loadSettings, SettingsError, type OidcSettings } from "../../src/config.js";
import { isAppError } from "../../src/errors.js";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { OidcService } from "../../src/services/oidc.service.js";
import { startHarness, type Harness } from "./harness.js";
import { ID_TOKEN_TTL_S, signInAtProvider, startProvider, type TestProvider } from "./oidc-provider.js";

const PUBLIC_URL = "http://svc.test";
const CALLBACK = `${PUBLIC_URL}/api/v1/auth/oidc/callback`;
const ROLE_MAP = new Map([["net-owners", "owner"], ["net-admins", "admin"], ["net-ops", "operator"]] as const);

function oidcSettings(p: TestProvider, unknownUsers: "create" | "refuse"): OidcSettings {
  return { issuer: p.issuer, clientId: p.clientId, clientSecret: p.clientSecret, groupsClaim: "groups", roleMap: ROLE_MAP, unknownUsers, label: "Example ID", scopes: "openid profile" };
}

/** A service whose clock is the wall clock's now (the provider signs with real time). */
async function service(t: TestContext, p: TestProvider, unknownUsers: "create" | "refuse"): Promise<Harness> {
  return startHarness(t, { publicUrl: PUBLIC_URL, mqttEnabled: false, oidc: oidcSettings(p, unknownUsers) }, { clock: new ManualClock(Date.now()) });
}

/** One browser's start: the provider URL and the state cookie the service set. */
async function start(h: Harness): Promise<{ authorizationUrl: string; cookie: string }> {
  const res = await h.req("GET", "/api/v1/auth/oidc/start", undefined, { auth: false });
  assert.equal(res.status, 302, res.text);
  const setCookie = String(res.headers["set-cookie"]);
  assert.match(setCookie, /HttpOnly/);
  assert.match(setCookie, /SameSite=Lax/);
  const location = String(res.headers.location);
  const url = new URL(location);
  assert.equal(url.searchParams.get("code_challenge_method"), "S256");
  assert.ok(url.searchParams.get("nonce"));
  assert.equal(url.searchParams.get("redirect_uri"), CALLBACK);
  return { authorizationUrl: location, cookie: setCookie.split(";")[0] ?? "" };
}

/** Sends the provider's redirect to the service; returns where the service sent the browser. */
async function callback(h: Harness, callbackUrl: string, cookie: string): Promise<{ code?: string; error?: string }> {
  const res = await h.req("GET", callbackUrl.slice(PUBLIC_URL.length), undefined, { auth: false, headers: { cookie } });
  assert.equal(res.status, 302, res.text);
  const location = String(res.headers.location);
  assert.match(location, /^\/login#sso_(code|error)=/);
  const fragment = new URLSearchParams(location.slice(location.indexOf("#") + 1));
  return { ...(fragment.get("sso_code") ? { code: fragment.get("sso_code") ?? "" } : {}), ...(fragment.get("sso_error") ? { error: fragment.get("sso_error") ?? "" } : {}) };
}

/** The whole flow for `login`; returns the console's landing. */
async function signIn(h: Harness, login: string): Promise<{ code?: string; error?: string }> {
  const { authorizationUrl, cookie } = await start(h);
  return callback(h, await signInAtProvider(authorizationUrl, login, CALLBACK), cookie);
}

async function exchange(h: Harness, code: string): Promise<string> {
  const res = await h.req("POST", "/api/v1/auth/oidc/exchange", { code }, { auth: false });
  assert.equal(res.status, 200, res.text);
  return res.json.access_token;
}

test("single sign-on against a real OpenID provider", async (t) => {
  const p = await startProvider(t, [CALLBACK]);
  p.accounts.set("sub-alice", { preferred_username: "alice", groups: ["staff", "net-ops", "net-admins"] });
  p.accounts.set("sub-bob", { preferred_username: "bob", groups: ["contractors"] });
  p.accounts.set("sub-carol", { preferred_username: "carol", groups: ["net-ops"] });
  p.accounts.set("sub-dave", { preferred_username: "dave", groups: ["net-ops"] });
  p.accounts.set("sub-olga", { preferred_username: "olga", groups: ["net-owners"] });
  const h = await service(t, p, "refuse");

  await t.test("the sign-in methods name the provider", async () => {
    const res = await h.req("GET", "/api/v1/auth/methods", undefined, { auth: false });
    assert.deepEqual(res.json, { password: true, sso: { enabled: true, label: "Example ID" } });
  });

  await t.test("success: a session opened by SSO, with the role of the mapped group, re-derived at every sign-in", async () => {
    const landing = await signIn(h, "sub-alice");
    assert.equal(landing.error, undefined);
    const token = await exchange(h, landing.code ?? "");
    const me = await h.req("GET", "/api/v1/auth/me", undefined, { auth: token });
    assert.equal(me.status, 200, me.text);
    assert.deepEqual(me.json.user.role, "admin");
    assert.equal(me.json.user.username, "alice");
    assert.equal(me.json.via, "session");
    assert.equal(me.json.login, "oidc");
    // The one-time code opens one session only.
    const again = await h.req("POST", "/api/v1/auth/oidc/exchange", { code: landing.code }, { auth: false });
    assert.equal(again.status, 401);
    // The provider moves alice to net-ops: her next SSO sign-in acts as operator, as the same user.
    p.accounts.set("sub-alice", { preferred_username: "alice", groups: ["net-ops"] });
    const second = await exchange(h, (await signIn(h, "sub-alice")).code ?? "");
    const me2 = await h.req("GET", "/api/v1/auth/me", undefined, { auth: second });
    assert.equal(me2.json.user.role, "operator");
    assert.equal(me2.json.user.user_id, me.json.user.user_id);
    // A user made by SSO has no password: password sign-in stays closed.
    const pw = await h.req("POST", "/api/v1/auth/login", { username: "alice", password: "anything-at-all" }, { auth: false });
    assert.equal(pw.status, 401);
  });

  await t.test("the audit log names each SSO sign-in: the person signed in (actor kind oidc), or the refusal with its reason; never the one-time code", async () => {
    p.accounts.set("sub-erin", { preferred_username: "erin", groups: ["net-ops"] });
    const landing = await signIn(h, "sub-erin");
    const code = landing.code ?? "";
    await exchange(h, code);
    const { authorizationUrl, cookie } = await start(h);
    const url = new URL(await signInAtProvider(authorizationUrl, "sub-dave", CALLBACK));
    url.searchParams.set("state", "not-this-browsers-state");
    assert.deepEqual(await callback(h, url.href, cookie), { error: "state_mismatch" });
    await new Promise((r) => setImmediate(r));
    await h.server.audit.flushed();
    const res = await h.req("GET", "/api/v1/audit?action=auth.&limit=100");
    assert.equal(res.status, 200, res.text);
    const sso = (res.json.items as Array<Record<string, any>>).filter((e) => String(e.action).startsWith("auth.sso"));
    const [refused, session, erin] = sso;
    assert.deepEqual([erin?.action, erin?.outcome, erin?.actor.kind, erin?.actor.name], ["auth.sso_login", "ok", "oidc", "erin"]);
    assert.deepEqual([session?.action, session?.outcome, session?.actor.kind, session?.actor.name], ["auth.sso_session", "ok", "oidc", "erin"]);
    assert.deepEqual([refused?.action, refused?.outcome, refused?.actor.kind], ["auth.sso_login", "denied", "anonymous"]);
    assert.deepEqual(refused?.changes, { reason: "state_mismatch" });
    assert.ok(!JSON.stringify(res.json).includes(code), "the one-time code is a secret");
  });

  await t.test("a wrong state: refused with state_mismatch, nothing opened", async () => {
    const { authorizationUrl, cookie } = await start(h);
    const url = new URL(await signInAtProvider(authorizationUrl, "sub-dave", CALLBACK));
    url.searchParams.set("state", "a-state-this-browser-never-started");
    const before = h.fingerprint();
    assert.deepEqual(await callback(h, url.href, cookie), { error: "state_mismatch" });
    // No cookie at all (the callback opened in another browser) is the same refusal.
    assert.deepEqual(await callback(h, url.href, ""), { error: "state_mismatch" });
    assert.equal(h.fingerprint(), before);
  });

  await t.test("a replayed code: the callback once more, or the code under a new sign-in's state, opens nothing", async () => {
    const { authorizationUrl, cookie } = await start(h);
    const redirect = await signInAtProvider(authorizationUrl, "sub-dave", CALLBACK);
    const first = await callback(h, redirect, cookie);
    assert.ok(first.code !== undefined, JSON.stringify(first));
    const before = h.fingerprint();
    assert.deepEqual(await callback(h, redirect, cookie), { error: "state_unknown" });
    // A second sign-in in the same browser, fed the first one's code: the provider refuses it
    // (used already, and its PKCE challenge is the first verifier's).
    const fresh = await start(h);
    const replay = new URL(redirect);
    replay.searchParams.set("state", fresh.cookie.split("=")[1] ?? "");
    assert.deepEqual(await callback(h, replay.href, fresh.cookie), { error: "code_rejected" });
    assert.equal(h.fingerprint(), before);
  });

  await t.test("a user whose groups map to no role is refused (unknown users refused)", async () => {
    const before = h.fingerprint();
    assert.deepEqual(await signIn(h, "sub-bob"), { error: "no_role" });
    assert.equal(h.fingerprint(), before);
  });

  await t.test("a local password user of the same name is not taken over", async () => {
    const local = await h.req("POST", "/api/v1/users", { username: "Carol", password: "carol's own password", role: "viewer" });
    assert.equal(local.status, 201, local.text);
    const before = h.fingerprint();
    assert.deepEqual(await signIn(h, "sub-carol"), { error: "username_taken" });
    assert.equal(h.fingerprint(), before);
  });

  await t.test("a disabled SSO user is refused", async () => {
    const users = (await h.req("GET", "/api/v1/users")).json.users as Array<{ user_id: string; username: string }>;
    const alice = users.find((u) => u.username === "alice");
    assert.ok(alice);
    assert.equal((await h.req("PATCH", `/api/v1/users/${alice.user_id}`, { disabled: true })).status, 200);
    assert.deepEqual(await signIn(h, "sub-alice"), { error: "user_disabled" });
  });

  await t.test("groups that would demote the last enabled owner: refused, the owner stays", async () => {
    const olga = await exchange(h, (await signIn(h, "sub-olga")).code ?? "");
    assert.equal((await h.req("GET", "/api/v1/auth/me", undefined, { auth: olga })).json.user.role, "owner");
    // admin steps down: olga is the one enabled owner left.
    assert.equal((await h.req("PATCH", "/api/v1/users/usr-admin", { role: "admin" }, { auth: olga })).status, 200);
    p.accounts.set("sub-olga", { preferred_username: "olga", groups: ["net-ops"] });
    const before = h.fingerprint();
    assert.deepEqual(await signIn(h, "sub-olga"), { error: "last_owner" });
    assert.equal(h.fingerprint(), before);
    assert.equal((await h.req("GET", "/api/v1/auth/me", undefined, { auth: olga })).json.user.role, "owner");
  });

  await t.test("an expired ID token: refused by the service's clock, no user made", async () => {
    const { authorizationUrl, cookie } = await start(h);
    const redirect = await signInAtProvider(authorizationUrl, "sub-dave", CALLBACK);
    // The ID token lives 60 s (plus 30 s of tolerance); the service's clock is five minutes on.
    h.clock.advance((ID_TOKEN_TTL_S + 240) * 1000);
    const before = h.fingerprint();
    assert.deepEqual(await callback(h, redirect, cookie), { error: "id_token_expired" });
    assert.equal(h.fingerprint(), before);
  });

  await t.test("unknown users created: a user in no mapped group signs in as viewer", async () => {
    const open = serviceOver(h, oidcSettings(p, "create"));
    const { location, state } = await open.start();
    const redirect = new URL(await signInAtProvider(location, "sub-bob", CALLBACK));
    const { handoff } = await open.callback(redirect.search.slice(1), state);
    const { accessToken } = await open.exchange(handoff);
    const me = await h.req("GET", "/api/v1/auth/me", undefined, { auth: accessToken });
    assert.equal(me.json.user.role, "viewer");
    assert.equal(me.json.user.username, "bob");
    assert.equal(me.json.login, "oidc");
  });

  await t.test("a provider that cannot be reached: provider_unreachable, tried again at the next sign-in", async () => {
    const away = serviceOver(h, { ...oidcSettings(p, "refuse"), issuer: "http://127.0.0.1:9" });
    for (let i = 0; i < 2; i++) {
      await assert.rejects(away.start(), (err) => isAppError(err, "SSO_FAILED") && err.details?.["reason"] === "provider_unreachable");
    }
  });

  await t.test("without SSO settings the methods say so and a start is refused as not configured", async () => {
    const off = serviceOver(h, undefined);
    assert.deepEqual(off.methods(), { password: true, sso: { enabled: false, label: null } });
    await assert.rejects(off.start(), (err) => isAppError(err, "SSO_FAILED") && err.details?.["reason"] === "not_configured");
  });
});

/** Another single sign-on service over the harness's database and sessions (other settings, the same service). */
function serviceOver(h: Harness, settings: OidcSettings | undefined): OidcService {
  // Its own clock at the wall clock's now: the harness's clock may have been moved on.
  return new OidcService({ settings, store: h.server.store, clock: new ManualClock(Date.now()), auth: h.server.auth, publicUrl: () => PUBLIC_URL, log: createLogger("silent") });
}

test("SSO settings: a role map naming an unknown role, or an http issuer off loopback, stops start-up with one line", () => {
  const env = { SVC_OIDC_ISSUER: "https://id.example.com", SVC_OIDC_CLIENT_ID: "svc" };
  assert.throws(() => loadSettings({ ...env, SVC_OIDC_ROLE_MAP: "net-admins=admin,net-ops=superuser" }), (e) => e instanceof SettingsError && /SVC_OIDC_ROLE_MAP: "superuser" of group "net-ops" is not a role/.test(e.message));
  assert.throws(() => loadSettings({ ...env, SVC_OIDC_ROLE_MAP: "net-admins" }), SettingsError);
  assert.throws(() => loadSettings({ ...env, SVC_OIDC_ISSUER: "http://id.example.com" }), /must be an https URL/);
  assert.throws(() => loadSettings({ SVC_OIDC_ISSUER: "https://id.example.com" }), /SVC_OIDC_CLIENT_ID: required/);
  const ok = loadSettings({ ...env, SVC_OIDC_ROLE_MAP: " net-admins = admin , net-ops=operator" }).oidc;
  assert.deepEqual([...(ok?.roleMap ?? [])], [["net-admins", "admin"], ["net-ops", "operator"]]);
  assert.equal(ok?.unknownUsers, "refuse");
  assert.equal(loadSettings({}).oidc, undefined);
});
