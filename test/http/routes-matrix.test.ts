import assert from "node:assert/strict";
import { test } from "node:test";
import { ERROR_CODES } from "../../src/errors.js";
import { assertError, createConfig, createNode, startHarness, type Harness } from "./harness.js";

/**
 * Every route of the OpenAPI document, driven generically: auth is enforced, bad ids and bad
 * bodies answer a documented error code, and nothing is written (DESIGN §3 error body, §5).
 */

interface Route {
  method: string;
  path: string; // OpenAPI form: /api/v1/configs/{config_id}
  hasBody: boolean;
  security: boolean;
}

async function routes(h: Harness): Promise<Route[]> {
  const res = await h.req("GET", "/api/v1/openapi.json");
  assert.equal(res.status, 200);
  const out: Route[] = [];
  for (const [path, ops] of Object.entries(res.json.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(ops)) {
      out.push({
        method: method.toUpperCase(),
        path,
        hasBody: op.requestBody !== undefined,
        security: !(Array.isArray(op.security) && op.security.length === 0),
      });
    }
  }
  return out;
}

async function fixture(h: Harness) {
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { public_address: "192.0.2.10" });
  const other = await createNode(h, config.config_id, { public_address: "192.0.2.11" });
  const pairs = await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs`);
  const pf = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/port-forwards`, {
    protocol: "tcp",
    listen_port: 8080,
    target_address: other.address,
    target_port: 80,
  });
  assert.equal(pf.status, 201, pf.text);
  return {
    config_id: config.config_id,
    node_id: node.node_id,
    pair_id: pairs.json.mesh_pairs[0].pair_id as string,
    forward_id: pf.json.forward_id as string,
  };
}

function fill(path: string, ids: Record<string, string>): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => ids[name] ?? "x");
}

test("the OpenAPI document lists every route and every registered error code", async (t) => {
  const h = await startHarness(t);
  const list = await routes(h);
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  const expected = [
    "POST /api/v1/auth/login",
    "GET /api/v1/health",
    "GET /api/v1/configs",
    "POST /api/v1/configs",
    "GET /api/v1/configs/{config_id}",
    "PATCH /api/v1/configs/{config_id}",
    "DELETE /api/v1/configs/{config_id}",
    "GET /api/v1/configs/{config_id}/tags",
    "GET /api/v1/configs/{config_id}/nodes",
    "GET /api/v1/configs/{config_id}/node-counts",
    "POST /api/v1/configs/{config_id}/nodes",
    "GET /api/v1/configs/{config_id}/nodes/{node_id}",
    "PATCH /api/v1/configs/{config_id}/nodes/{node_id}",
    "DELETE /api/v1/configs/{config_id}/nodes/{node_id}",
    "GET /api/v1/configs/{config_id}/nodes/{node_id}/config",
    "POST /api/v1/configs/{config_id}/nodes/{node_id}/download-token",
    "GET /api/v1/configs/{config_id}/nodes/{node_id}/config/download",
    "GET /api/v1/configs/{config_id}/mesh-pairs",
    "POST /api/v1/configs/{config_id}/mesh-pairs",
    "PATCH /api/v1/configs/{config_id}/mesh-pairs/{pair_id}",
    "DELETE /api/v1/configs/{config_id}/mesh-pairs/{pair_id}",
    "GET /api/v1/configs/{config_id}/nodes/{node_id}/port-forwards",
    "POST /api/v1/configs/{config_id}/nodes/{node_id}/port-forwards",
    "PATCH /api/v1/configs/{config_id}/nodes/{node_id}/port-forwards/{forward_id}",
    "DELETE /api/v1/configs/{config_id}/nodes/{node_id}/port-forwards/{forward_id}",
    "POST /api/v1/configs/{config_id}/nodes/{node_id}/bind-command",
    "POST /api/client/bind",
    "POST /api/v1/configs/{config_id}/nodes/{node_id}/reset-client",
    "POST /api/v1/configs/{config_id}/nodes/{node_id}/control",
    "GET /api/v1/configs/{config_id}/nodes/{node_id}/endpoint-status",
    "GET /api/v1/configs/{config_id}/nodes/{node_id}/control-logs",
    "GET /api/v1/events/stream",
    "POST /api/internal/emqx/authz",
    "GET /api/v1/system/status",
    "GET /api/v1/metrics",
    "POST /api/v1/mcp",
    "GET /api/v1/mcp",
    "DELETE /api/v1/mcp",
  ];
  const got = new Set(list.map((r) => `${r.method} ${r.path}`));
  for (const e of expected) assert.ok(got.has(e), `OpenAPI lacks ${e}`);
  const codes = (doc["x-error-codes"] as Array<{ code: string; status: number }>).map((c) => c.code).sort();
  assert.deepEqual(codes, Object.keys(ERROR_CODES).sort());
  for (const code of Object.keys(ERROR_CODES)) assert.ok(doc.info.description.includes(code), code);
});

test("spec §9 rule 1, DESIGN §5: every route lives under /api/v1/ except bind, the broker's authz hook and the /metrics and /mcp aliases", async (t) => {
  const h = await startHarness(t);
  // The OpenAPI document: only the two paths the specification names carry no version segment.
  const unversioned = new Set(["/api/client/bind", "/api/internal/emqx/authz"]);
  for (const r of await routes(h)) {
    assert.ok(r.path.startsWith("/api/v1/") || unversioned.has(r.path), `${r.method} ${r.path} is outside /api/v1/`);
  }
  // The router itself (hidden routes included): the top level of its tree.
  const top = h.server.app
    .printRoutes({ commonPrefix: false })
    .split("\n")
    .map((line) => /^[├└]── (\/\S*)/.exec(line)?.[1])
    .filter((p): p is string => p !== undefined);
  assert.ok(top.length > 10, top.join(", "));
  const aliases = new Set(["/metrics", "/mcp"]);
  const outside = top.filter((p) => !p.startsWith("/api/v1/"));
  assert.deepEqual(outside.sort(), [...unversioned, ...aliases].sort(), "routes outside /api/v1/");
  // Each alias answers like its /api/v1 route.
  assert.equal((await h.req("GET", "/metrics")).text.split("\n")[0], (await h.req("GET", "/api/v1/metrics")).text.split("\n")[0]);
  assert.equal((await h.req("GET", "/mcp")).status, 405);
  assert.equal((await h.req("GET", "/api/v1/mcp")).status, 405);
});

test("every route except health, login and token downloads refuses a missing, garbage or expired bearer token", async (t) => {
  const h = await startHarness(t);
  const ids = await fixture(h);
  const list = await routes(h);
  // Public to the admin scheme: each checks its own credential (download token, bind token,
  // the broker's shared key), proven in their own tests.
  const publicRoutes = new Set([
    "GET /api/v1/health",
    "POST /api/v1/auth/login",
    "GET /api/v1/configs/{config_id}/nodes/{node_id}/config/download",
    "POST /api/client/bind",
    "POST /api/internal/emqx/authz",
    "GET /api/v1/backups/export/{snapshot_id}",
    "GET /api/v1/tools/download/config-bulk/package/{package_id}",
    // Single sign-on: the steps of signing in (the provider's answer and a one-time code are their credentials).
    "GET /api/v1/auth/methods",
    "GET /api/v1/auth/oidc/start",
    "GET /api/v1/auth/oidc/callback",
    "POST /api/v1/auth/oidc/exchange",
  ]);
  const before = h.fingerprint();
  for (const r of list) {
    const key = `${r.method} ${r.path}`;
    assert.equal(r.security, !publicRoutes.has(key), `${key} security in OpenAPI`);
    if (publicRoutes.has(key)) continue;
    const url = fill(r.path, ids);
    const body = r.hasBody ? {} : undefined;
    assertError(await h.req(r.method, url, body, { auth: false }), "UNAUTHORIZED", `${key} without token`);
    assertError(await h.req(r.method, url, body, { auth: "not-a-token" }), "UNAUTHORIZED", `${key} garbage`);
    assertError(
      await h.req(r.method, url, body, { auth: "A".repeat(43) }),
      "UNAUTHORIZED",
      `${key} unknown token`,
    );
  }
  assert.equal(h.fingerprint(), before, "refused requests wrote nothing");

  // Expiry, driven by the injected clock (DESIGN §3 Admin auth).
  assert.equal((await h.req("GET", "/api/v1/configs")).status, 200);
  h.clock.advance(12 * 3600 * 1000 - 1);
  assert.equal((await h.req("GET", "/api/v1/configs")).status, 200, "valid until the last millisecond");
  h.clock.advance(1);
  assertError(await h.req("GET", "/api/v1/configs"), "UNAUTHORIZED", "expired session");
});

test("every route answers ids holding '/', '+', '#', NUL, upper case or 1 KiB with a documented code and writes nothing (DESIGN §3 Ids)", async (t) => {
  const h = await startHarness(t);
  const ids = await fixture(h);
  const list = (await routes(h)).filter((r) => r.path.includes("{"));
  const bad: Array<[string, "VALIDATION_FAILED" | "NOT_FOUND"]> = [
    ["a%2Fb", "VALIDATION_FAILED"], // encoded slash reaches the param
    ["a/b", "NOT_FOUND"], // a raw slash is another path
    ["a%2Bb", "VALIDATION_FAILED"],
    ["a+b", "VALIDATION_FAILED"],
    ["a%23b", "VALIDATION_FAILED"],
    ["a%00b", "VALIDATION_FAILED"],
    ["Abc", "VALIDATION_FAILED"],
    ["-abc", "VALIDATION_FAILED"],
    ["%20", "VALIDATION_FAILED"],
    ["a".repeat(65), "VALIDATION_FAILED"],
    ["a".repeat(1024), "VALIDATION_FAILED"], // longer than the router's parameter limit
  ];
  const before = h.fingerprint();
  for (const r of list) {
    for (const param of r.path.match(/\{(\w+)\}/g) ?? []) {
      const name = param.slice(1, -1);
      for (const [value, code] of bad) {
        const url = fill(r.path, { ...ids, [name]: value });
        const body = r.hasBody ? {} : undefined;
        const res = await h.req(r.method, url, body);
        assertError(res, code, `${r.method} ${r.path} with ${name}=${value.slice(0, 20)}`);
      }
      // Well-formed but unknown: 404.
      const url = fill(r.path, { ...ids, [name]: `${name.split("_")[0]}-unknown` });
      if (r.method === "GET" && r.path.endsWith("/config/download")) continue; // token checked first
      const validBody = r.hasBody ? validBodyFor(r.path) : undefined;
      assertError(await h.req(r.method, url, validBody), "NOT_FOUND", `${r.method} ${r.path} unknown ${name}`);
    }
  }
  assert.equal(h.fingerprint(), before, "refused requests wrote nothing");
});

function validBodyFor(path: string): unknown {
  if (path.endsWith("/nodes")) return { name: "n-new", mode: "static" };
  if (path.endsWith("/control")) return { action: "start" };
  if (path.endsWith("/mesh-pairs")) return { node_a: "node-unknown-a", node_b: "node-unknown-b" };
  if (path.endsWith("/mesh-pairs/{pair_id}")) return { enabled: false };
  if (path.endsWith("/port-forwards")) return { protocol: "tcp", listen_port: 1, target_address: "10.0.0.1", target_port: 1 };
  if (path.includes("/port-forwards/")) return { enabled: false };
  if (path.endsWith("/nodes/{node_id}")) return { name: "renamed" };
  if (path.endsWith("/restore")) return {};
  if (path.endsWith("/users/{user_id}")) return { disabled: false };
  return { name: "renamed" };
}

test("every route with a body refuses wrong types, unknown fields, 1 KiB strings and non-JSON and writes nothing", async (t) => {
  const h = await startHarness(t);
  const ids = await fixture(h);
  // Login and the broker's authz endpoint check their credential first (their own tests cover
  // their bodies); everything else validates the body.
  const list = (await routes(h)).filter(
    (r) => r.hasBody && r.path !== "/api/v1/auth/login" && r.path !== "/api/internal/emqx/authz",
  );
  const before = h.fingerprint();
  for (const r of list) {
    const url = fill(r.path, ids);
    const key = `${r.method} ${r.path}`;
    assertError(await h.req(r.method, url, []), "VALIDATION_FAILED", `${key} array`);
    assertError(await h.req(r.method, url, "\"text\""), "VALIDATION_FAILED", `${key} string`);
    assertError(await h.req(r.method, url, "{not json"), "VALIDATION_FAILED", `${key} malformed JSON`);
    assertError(await h.req(r.method, url, { unexpected_field: 1 }), "VALIDATION_FAILED", `${key} unknown field`);
    assertError(
      await h.req(r.method, url, { name: "x".repeat(1024), enabled: "yes", listen_port: "80", node_a: 5 }),
      "VALIDATION_FAILED",
      `${key} wrong types`,
    );
    assertError(
      await h.req(r.method, url, "name=x", { headers: { "content-type": "application/x-www-form-urlencoded" } }),
      "UNSUPPORTED_MEDIA_TYPE",
      `${key} form body`,
    );
    assertError(
      await h.req(r.method, url, JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) })),
      "PAYLOAD_TOO_LARGE",
      `${key} 2 MiB body`,
    );
  }
  assert.equal(h.fingerprint(), before, "refused requests wrote nothing");
});
