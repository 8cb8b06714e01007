import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { ERROR_CODES } from "../../src/errors.js";
import { startHarness, type Harness } from "../http/harness.js";
import { encode, rawExchange, type RawAnswer } from "./http-raw.js";

/**
 * Regression tests of what the HTTP fuzzing (`http-fuzz.test.ts`) found, one per
 * finding, over real sockets against a real service (DESIGN §3 error body, spec §5 admin auth).
 */

async function listen(t: TestContext, overrides: Parameters<typeof startHarness>[1] = {}): Promise<{ h: Harness; port: number }> {
  const h = await startHarness(t, overrides);
  const address = await h.server.app.listen({ host: "127.0.0.1", port: 0 });
  return { h, port: Number(new URL(address).port) };
}

function assertRefused(res: RawAnswer, code: keyof typeof ERROR_CODES, why: string): void {
  assert.equal(res.status, ERROR_CODES[code].status, `${why}: ${res.status} ${res.body.slice(0, 200)}`);
  assert.equal((JSON.parse(res.body) as { error: { code: string } }).error.code, code, why);
}

test("a second Authorization header is refused 400 before auth, whichever comes first; a logout so sent ends nothing (spec §5)", async (t) => {
  const { h, port } = await listen(t);
  const good = `Bearer ${h.token}`;
  for (const pair of [[good, "Bearer x"], ["Bearer x", good], [good, good]]) {
    const res = await rawExchange(port, [encode({ method: "GET", target: "/api/v1/configs", headers: pair.map((v): [string, string] => ["Authorization", v]) })]);
    assertRefused(res, "VALIDATION_FAILED", `duplicate Authorization ${pair.map((p) => p.slice(0, 9)).join(" / ")}`);
  }
  const before = h.fingerprint();
  const logout = await rawExchange(port, [encode({ method: "POST", target: "/api/v1/auth/logout", headers: [["Authorization", good], ["Authorization", "Bearer x"]] })]);
  assertRefused(logout, "VALIDATION_FAILED", "logout with two Authorization headers");
  assert.equal(h.fingerprint(), before, "the session was not ended");
  // Two Host headers, two Content-Type headers: refused too.
  assertRefused(await rawExchange(port, [encode({ method: "GET", target: "/api/v1/health", headers: [["Host", "a"], ["Host", "b"]] })]), "VALIDATION_FAILED", "two Host headers");
  assertRefused(
    await rawExchange(port, [encode({ method: "POST", target: "/api/v1/configs", headers: [["Authorization", good], ["Content-Type", "application/json"], ["Content-Type", "text/plain"]], body: "{}" })]),
    "VALIDATION_FAILED",
    "two Content-Type headers",
  );
  // One of each still works.
  assert.equal((await rawExchange(port, [encode({ method: "GET", target: "/api/v1/configs", headers: [["Authorization", good]] })])).status, 200);
});

test("Transfer-Encoding other than plain chunked (gzip, chunked) is refused 400, nothing runs", async (t) => {
  const { h, port } = await listen(t);
  const before = h.fingerprint();
  const res = await rawExchange(port, [
    encode({ method: "POST", target: "/api/v1/auth/logout", headers: [["Authorization", `Bearer ${h.token}`], ["Transfer-Encoding", "gzip, chunked"]], body: "2\r\n{}\r\n0\r\n\r\n", autoLength: false }),
  ]);
  assertRefused(res, "VALIDATION_FAILED", "gzip, chunked");
  assert.equal(h.fingerprint(), before, "the session was not ended");
  const chunked = await rawExchange(port, [
    encode({ method: "POST", target: "/api/v1/configs", headers: [["Authorization", `Bearer ${h.token}`], ["Content-Type", "application/json"], ["Transfer-Encoding", "chunked"]], body: "2\r\n{}\r\n0\r\n\r\n", autoLength: false }),
  ]);
  assertRefused(chunked, "VALIDATION_FAILED", "plain chunked reaches validation (the body is {})");
  assert.match(chunked.body, /body/);
});

test("integer query parameters take plain decimals only (0x10, 1e3, ' 1', 010 are refused; 16 works)", async (t) => {
  const { h, port } = await listen(t);
  const cfg = await h.req("POST", "/api/v1/configs", { name: "m", tunnel_protocol: "wireguard", network_cidr: "10.20.0.0/24" });
  const node = await h.req("POST", `/api/v1/configs/${cfg.json.config_id}/nodes`, { name: "n", mode: "static" });
  const base = `/api/v1/configs/${cfg.json.config_id}/nodes/${node.json.node_id}`;
  const get = (target: string) => rawExchange(port, [encode({ method: "GET", target, headers: [["Authorization", `Bearer ${h.token}`]] })]);
  for (const path of [`${base}/control-logs`, `${base}/timeline`]) {
    for (const v of ["0x10", "1e3", "%201", "010", "1.0", "+5"]) assertRefused(await get(`${path}?limit=${v}`), "VALIDATION_FAILED", `${path} limit=${v}`);
    assert.equal((await get(`${path}?limit=16`)).status, 200, `${path} limit=16`);
  }
  assertRefused(await get(`${base}/timeline?before=0x10`), "VALIDATION_FAILED", "before=0x10");
  assert.equal((await get(`${base}/timeline?before=16`)).status, 200);
});

test("a body that never finishes is answered 408 REQUEST_TIMEOUT at SVC_HTTP_REQUEST_TIMEOUT_MS and the connection closed", async (t) => {
  const { h, port } = await listen(t, { httpRequestTimeoutMs: 1000 });
  const before = h.fingerprint();
  const head = encode({ method: "POST", target: "/api/v1/configs", headers: [["Authorization", `Bearer ${h.token}`], ["Content-Type", "application/json"], ["Content-Length", "64"]] });
  const started = Date.now();
  // The client's own give-up time is far past the server's limit: the server must act first.
  const res = await rawExchange(port, [head, Buffer.from("{\"name\":")], { timeoutMs: 8000 });
  assertRefused(res, "REQUEST_TIMEOUT", "unfinished body");
  assert.ok(Date.now() - started < 6000, `answered after ${Date.now() - started} ms`);
  assert.equal(h.fingerprint(), before);
});
