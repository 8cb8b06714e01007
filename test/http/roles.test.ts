/**
 * Roles on every route (README "Users, roles and tokens"): each route's minimum role is read from
 * the OpenAPI document (`x-min-role`) and every route is called by every role; a caller below it
 * is answered 403 FORBIDDEN and nothing is written, a caller at or above it gets past the check.
 * Calls that pass are made harmless (an unknown id, a body that fails validation) so that the
 * matrix writes nothing either way.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { ROLES, roleAtLeast, type Role } from "../../src/protocol/roles.js";
import { sqliteOf } from "../../src/store/connection.js";
import { ADMIN_PASSWORD, assertError, createConfig, createNode, startHarness, type Harness } from "./harness.js";

const PASSWORD = "a long enough password";

interface Route {
  method: string;
  path: string;
  hasBody: boolean;
  minRole: Role | undefined;
  isPublic: boolean;
}

async function routes(h: Harness): Promise<Route[]> {
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  const out: Route[] = [];
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, Record<string, unknown>>>)) {
    for (const [method, op] of Object.entries(ops)) {
      const security = op.security;
      out.push({ method: method.toUpperCase(), path, hasBody: op.requestBody !== undefined, minRole: op["x-min-role"] as Role | undefined, isPublic: Array.isArray(security) && security.length === 0 });
    }
  }
  return out;
}

/** Creates a user of `role` as the owner and signs them in. */
async function signedIn(h: Harness, username: string, role: Role): Promise<{ user_id: string; token: string }> {
  const created = await h.req("POST", "/api/v1/users", { username, password: PASSWORD, role });
  assert.equal(created.status, 201, created.text);
  const login = await h.req("POST", "/api/v1/auth/login", { username, password: PASSWORD }, { auth: false });
  assert.equal(login.status, 200, login.text);
  return { user_id: created.json.user_id, token: login.json.access_token };
}

/** A new session of the matrix's user of `role` (the owner is `admin`). */
async function freshSession(h: Harness, role: Role): Promise<string> {
  const username = { owner: "admin", admin: "ada", operator: "otto", viewer: "vera" }[role];
  const password = role === "owner" ? ADMIN_PASSWORD : PASSWORD;
  const login = await h.req("POST", "/api/v1/auth/login", { username, password }, { auth: false });
  assert.equal(login.status, 200, login.text);
  return login.json.access_token;
}

function fill(path: string, ids: Record<string, string>): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => ids[name] ?? `${name.split("_")[0]}-unknown`);
}

test("every non-public route declares x-min-role in the OpenAPI document, and only the token-or-credential routes are public", async (t) => {
  const h = await startHarness(t);
  for (const r of await routes(h)) {
    if (r.isPublic) continue;
    assert.ok(r.minRole !== undefined && (ROLES as readonly string[]).includes(r.minRole), `${r.method} ${r.path} declares no x-min-role`);
  }
  const byKey = new Map((await routes(h)).map((r) => [`${r.method} ${r.path}`, r.minRole]));
  // The role rules, spot-checked by what each role exists for.
  assert.equal(byKey.get("GET /api/v1/configs"), "viewer");
  assert.equal(byKey.get("GET /api/v1/events/stream"), "viewer", "the SSE stream is a read");
  assert.equal(byKey.get("GET /api/v1/configs/{config_id}/nodes/{node_id}/config"), "operator", "config texts hold private keys");
  assert.equal(byKey.get("POST /api/v1/configs/{config_id}/nodes/{node_id}/bind-command"), "operator");
  assert.equal(byKey.get("POST /api/v1/configs/{config_id}/nodes/{node_id}/control"), "operator");
  assert.equal(byKey.get("POST /api/v1/configs/{config_id}/nodes/{node_id}/download-token"), "operator");
  assert.equal(byKey.get("POST /api/v1/configs"), "admin");
  assert.equal(byKey.get("POST /api/v1/backups/{snapshot_id}/restore"), "admin");
  assert.equal(byKey.get("POST /api/v1/users"), "owner");
});

test("every route × every role × {session, access token}: below x-min-role 403 FORBIDDEN with nothing written; at or above it, past the role check", async (t) => {
  // Sign-ins from one address beyond the guessing limit; no event stream may stay open (a
  // caller let through is answered 429 by the per-session stream cap instead of a stream).
  const h = await startHarness(t, { authRateLimitMax: 100_000, sseMaxStreamsPerSession: 0 });
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { public_address: "192.0.2.10" });
  const sessions: Record<Role, string> = {
    owner: h.token,
    admin: (await signedIn(h, "ada", "admin")).token,
    operator: (await signedIn(h, "otto", "operator")).token,
    viewer: (await signedIn(h, "vera", "viewer")).token,
  };
  // Each user's token of their own role, used once so that its first-use record is written before the fingerprint.
  const tokens = {} as Record<Role, string>;
  for (const role of ROLES) {
    const res = await h.req("POST", "/api/v1/tokens", { name: `matrix ${role}`, role, expires_in_days: 1 }, { auth: sessions[role] });
    assert.equal(res.status, 201, res.text);
    tokens[role] = res.json.token;
    assert.equal((await h.req("GET", "/api/v1/auth/me", undefined, { auth: tokens[role] })).json.user.role, role);
  }
  const list = (await routes(h)).filter((r) => !r.isPublic);
  assert.ok(list.length > 50, `${list.length} routes`);
  // The fingerprint leaves out the audit log (and only it): every refusal appends a `denied`
  // entry there by design (README "Audit log"), counted below; everything else must be as before.
  const before = h.fingerprint();
  const deniedBefore = deniedEntries(h);
  let refused = 0;
  for (const [kind, callers] of [["session", sessions], ["token", tokens]] as const) {
    for (const r of list) {
      const key = `${r.method} ${r.path}`;
      const min = r.minRole ?? "owner";
      for (const role of ROLES) {
        // Refused calls use the real ids; passing ones unknown ids or a body that fails validation.
        const allowed = roleAtLeast(role, min);
        // Logging out ends the session it is called with: a fresh one of the same user is used.
        const bearer = kind === "session" && key === "POST /api/v1/auth/logout" && allowed ? await freshSession(h, role) : callers[role];
        const ids: Record<string, string> = allowed ? {} : { config_id: config.config_id, node_id: node.node_id };
        const body = r.hasBody ? (allowed ? { unexpected_field: 1 } : {}) : undefined;
        const res = await h.req(r.method, fill(r.path, ids), body, { auth: bearer });
        if (allowed) {
          assert.ok(res.status !== 401 && res.status !== 403, `${key} as ${role} (${kind}): ${res.status} ${res.text.slice(0, 200)}`);
        } else {
          refused += 1;
          assertError(res, "FORBIDDEN", `${key} as ${role} (${kind})`);
          assert.deepEqual(res.json.error.details, { min_role: min, role }, key);
        }
      }
    }
  }
  assert.equal(h.fingerprint(), before, "no call of the matrix wrote anything");
  await h.server.audit.flushed();
  assert.equal(deniedEntries(h) - deniedBefore, refused, "each refusal is one denied audit entry");
});

/** Audit entries with outcome `denied` (the matrix's refusals). */
function deniedEntries(h: Harness): number {
  return (sqliteOf(h.server.store).prepare("SELECT count(*) AS n FROM audit_log WHERE outcome = 'denied'").get() as { n: number }).n;
}

test("who am I: GET /api/v1/auth/me names the user, the role and how they signed in; login's username defaults to admin", async (t) => {
  const h = await startHarness(t);
  const me = await h.req("GET", "/api/v1/auth/me");
  assert.equal(me.status, 200, me.text);
  assert.deepEqual(me.json, { user: { user_id: "usr-admin", username: "admin", role: "owner" }, via: "session", token: null, login: "password" });
  const vera = await signedIn(h, "Vera", "viewer");
  const hers = await h.req("GET", "/api/v1/auth/me", undefined, { auth: vera.token });
  assert.deepEqual(hers.json, { user: { user_id: vera.user_id, username: "Vera", role: "viewer" }, via: "session", token: null, login: "password" });
  // Names are unique without regard to case, and sign-in finds them the same way.
  assertError(await h.req("POST", "/api/v1/users", { username: "VERA", password: PASSWORD, role: "admin" }), "CONFLICT");
  assert.equal((await h.req("POST", "/api/v1/auth/login", { username: "vera", password: PASSWORD }, { auth: false })).status, 200);
  assertError(await h.req("POST", "/api/v1/auth/login", { username: "nobody", password: PASSWORD }, { auth: false }), "UNAUTHORIZED");
  assertError(await h.req("POST", "/api/v1/users", { username: "short", password: "too short", role: "viewer" }), "VALIDATION_FAILED");
});

test("a role change applies on the user's next request; disabling or deleting a user ends their sessions at once; the last enabled owner stays", async (t) => {
  const h = await startHarness(t);
  const otto = await signedIn(h, "otto", "operator");
  const config = await createConfig(h);
  const write = () => h.req("POST", "/api/v1/configs", { name: "x" }, { auth: otto.token });
  assertError(await write(), "FORBIDDEN");
  assert.equal((await h.req("PATCH", `/api/v1/users/${otto.user_id}`, { role: "admin" })).status, 200);
  assert.notEqual((await write()).status, 403, "the new role, without signing in again");
  assert.equal((await h.req("PATCH", `/api/v1/users/${otto.user_id}`, { disabled: true })).status, 200);
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}`, undefined, { auth: otto.token }), "UNAUTHORIZED", "disabled: the session ended");
  assertError(await h.req("POST", "/api/v1/auth/login", { username: "otto", password: PASSWORD }, { auth: false }), "UNAUTHORIZED", "disabled: no new session");

  // The last enabled owner cannot be demoted, disabled or deleted; with a second owner it can.
  const last = (await h.req("PATCH", "/api/v1/users/usr-admin", { role: "admin" }));
  assertError(last, "CONFLICT");
  assert.equal(last.json.error.details.reason, "last_owner");
  assertError(await h.req("PATCH", "/api/v1/users/usr-admin", { disabled: true }), "CONFLICT");
  assertError(await h.req("DELETE", "/api/v1/users/usr-admin"), "CONFLICT");
  const olga = await signedIn(h, "olga", "owner");
  assert.equal((await h.req("DELETE", "/api/v1/users/usr-admin", undefined, { auth: olga.token })).status, 204);
  assertError(await h.req("GET", "/api/v1/configs"), "UNAUTHORIZED", "the deleted admin's session ended");
  assert.equal((await h.req("GET", "/api/v1/users", undefined, { auth: olga.token })).json.users.map((u: { username: string }) => u.username).join(","), "olga,otto");
});

/** One user of the property's model: their session, their token and what happened to them. */
interface Person {
  user_id: string;
  token: string;
  pat: string;
  tokenId: string;
  tokenRole: Role;
  role: Role;
  sessionEnded: boolean;
  disabled: boolean;
  deleted: boolean;
  revoked: boolean;
}

/** What the model says a request of `caller` to a route needing `min` answers: 401, 403 or passes. */
type Outcome = 401 | 403 | "pass";

test("property: for random sequences of user, role, state and token changes and requests (by session or access token), every answer equals the reference model of the role rules", async (t) => {
  // Many sign-ins from one address: the guessing limit of login would refuse them.
  const h = await startHarness(t, { authRateLimitMax: 100_000 });
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { public_address: "192.0.2.10" });
  // One harmless probe per minimum role: an unknown id (404) or a body that fails validation (400) when it passes.
  const probes: Record<Role, { method: string; path: string; body?: unknown }> = {
    viewer: { method: "GET", path: `/api/v1/configs/${config.config_id}` },
    operator: { method: "GET", path: `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/config` },
    admin: { method: "POST", path: "/api/v1/configs", body: { unexpected_field: 1 } },
    owner: { method: "GET", path: "/api/v1/users" },
  };
  const role = fc.constantFrom(...ROLES);
  const op = fc.oneof(
    fc.record({ kind: fc.constant("role" as const), who: fc.nat(2), role }),
    fc.record({ kind: fc.constant("disable" as const), who: fc.nat(2), disabled: fc.boolean() }),
    fc.record({ kind: fc.constant("delete" as const), who: fc.nat(2) }),
    fc.record({ kind: fc.constant("revoke" as const), who: fc.nat(2) }),
    fc.record({ kind: fc.constant("request" as const), who: fc.nat(2), min: role, via: fc.constantFrom("session" as const, "token" as const) }),
  );
  const person = fc.record({ role, tokenRank: fc.nat(3) });
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(person, { minLength: 3, maxLength: 3 }), fc.array(op, { maxLength: 10 }), async (persons, ops) => {
      run += 1;
      const people: Person[] = [];
      for (const [i, p] of persons.entries()) {
        const signed = await signedIn(h, `p${run}-${i}`, p.role);
        // A token of a role at most the user's (the rule at creation).
        const tokenRole = ROLES[Math.min(p.tokenRank, ROLES.indexOf(p.role))] ?? "viewer";
        const minted = await h.req("POST", "/api/v1/tokens", { name: "t", role: tokenRole, expires_in_days: 1 }, { auth: signed.token });
        assert.equal(minted.status, 201, minted.text);
        people.push({ ...signed, pat: minted.json.token as string, tokenId: minted.json.token_id as string, tokenRole, role: p.role, sessionEnded: false, disabled: false, deleted: false, revoked: false });
      }
      for (const o of ops) {
        const p = people[o.who];
        if (p === undefined) continue;
        if (o.kind === "request") {
          // Sessions end for good when the user is disabled; tokens are refused while the user is.
          const dead = p.deleted || (o.via === "session" ? p.sessionEnded : p.disabled || p.revoked);
          const acting = o.via === "session" || roleAtLeast(p.tokenRole, p.role) ? p.role : p.tokenRole;
          const expected: Outcome = dead ? 401 : roleAtLeast(acting, o.min) ? "pass" : 403;
          const probe = probes[o.min];
          const res = await h.req(probe.method, probe.path, probe.body, { auth: o.via === "session" ? p.token : p.pat });
          const got: Outcome = res.status === 401 ? 401 : res.status === 403 ? 403 : "pass";
          assert.equal(got, expected, `${o.min} route by ${o.via} as ${p.role} (token ${p.tokenRole})${p.disabled ? " disabled" : ""}${p.deleted ? " deleted" : ""}${p.revoked ? " revoked" : ""}: ${res.text.slice(0, 120)}`);
          continue;
        }
        if (p.deleted) continue;
        if (o.kind === "role") {
          assert.equal((await h.req("PATCH", `/api/v1/users/${p.user_id}`, { role: o.role })).status, 200);
          p.role = o.role;
        } else if (o.kind === "disable") {
          assert.equal((await h.req("PATCH", `/api/v1/users/${p.user_id}`, { disabled: o.disabled })).status, 200);
          p.disabled = o.disabled;
          if (o.disabled) p.sessionEnded = true;
        } else if (o.kind === "revoke") {
          assert.equal((await h.req("DELETE", `/api/v1/tokens/${p.tokenId}`)).status, p.revoked ? 404 : 204);
          p.revoked = true;
        } else {
          assert.equal((await h.req("DELETE", `/api/v1/users/${p.user_id}`)).status, 204);
          p.deleted = true;
        }
      }
    }),
    { numRuns: 15 },
  );
});
