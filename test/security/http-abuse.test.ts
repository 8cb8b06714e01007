import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";
import { loadSettings, SettingsError } from "../../src/config.js";
import { ERROR_CODES } from "../../src/errors.js";
import { opening, publishMarker, startSseServer, subscribers } from "../events/sse-harness.js";
import { startHarness } from "../http/harness.js";
import { encode, rawExchange, type RawAnswer } from "./http-raw.js";

/**
 * Abuse limits, over real sockets against a real service: login brute force is
 * limited per client address with a clear 429, SSE streams per admin session are capped, and
 * subscribers that stop reading are dropped (DESIGN §3 error body; spec §5 admin auth, §6.5 the
 * console's stream). RSS under 1,000 stuck subscribers: scripts/bench/stuck-subscribers.ts.
 */

const WRONG = JSON.stringify({ password: "wrong horse battery staple" });

function assertCode(res: RawAnswer, code: keyof typeof ERROR_CODES, why: string): { error: { code: string; message: string; details?: Record<string, unknown> } } {
  assert.equal(res.status, ERROR_CODES[code].status, `${why}: ${res.status} ${res.body.slice(0, 200)}`);
  const body = JSON.parse(res.body) as { error: { code: string; message: string; details?: Record<string, unknown> } };
  assert.deepEqual(Object.keys(body), ["error"], why);
  assert.equal(body.error.code, code, why);
  assert.ok(body.error.message.length > 0, why);
  return body;
}

test("spec §5: login guessing is limited per client address: past SVC_AUTH_RATE_LIMIT_MAX a 429 RATE_LIMITED with Retry-After, even for the right password and a forged X-Forwarded-For; another address is not limited", async (t) => {
  const h = await startHarness(t, { authRateLimitMax: 5 });
  const address = await h.server.app.listen({ host: "127.0.0.1", port: 0 });
  const port = Number(new URL(address).port);
  const login = (body: string, opts: { from?: string; headers?: Array<[string, string]> } = {}) =>
    rawExchange(port, [encode({ method: "POST", target: "/api/v1/auth/login", headers: [["Content-Type", "application/json"], ...(opts.headers ?? [])], body })], opts.from === undefined ? {} : { localAddress: opts.from });
  // The harness's own login (by inject, also 127.0.0.1) was the first of the five.
  for (let i = 0; i < 4; i++) assertCode(await login(WRONG), "UNAUTHORIZED", `guess ${i + 1}`);
  const before = h.fingerprint();
  const limited = await login(JSON.stringify({ password: "correct horse battery staple" }));
  const body = assertCode(limited, "RATE_LIMITED", "sixth attempt, right password");
  const retryAfter = Number(limited.headers.get("retry-after"));
  assert.ok(Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= 60, `Retry-After: ${limited.headers.get("retry-after")}`);
  assert.match(body.error.message, /retry in \d+ s/);
  assert.equal(h.fingerprint(), before, "no session was created while limited");
  // A forged X-Forwarded-For is not a new client (trustProxy is off).
  for (const xff of ["10.9.9.9", "127.0.0.2", "::1"]) {
    assertCode(await login(WRONG, { headers: [["X-Forwarded-For", xff]] }), "RATE_LIMITED", `X-Forwarded-For ${xff}`);
  }
  // Another client address has its own budget.
  assertCode(await login(WRONG, { from: "127.0.0.2" }), "UNAUTHORIZED", "from 127.0.0.2");
  const other = await login(JSON.stringify({ password: "correct horse battery staple" }), { from: "127.0.0.2" });
  assert.equal(other.status, 200, other.body);
});

test("spec §4 rule 11: bind token guessing is limited per client address the same way", async (t) => {
  const h = await startHarness(t, { authRateLimitMax: 3 });
  const address = await h.server.app.listen({ host: "127.0.0.1", port: 0 });
  const port = Number(new URL(address).port);
  const bind = () =>
    rawExchange(port, [
      encode({
        method: "POST",
        target: "/api/client/bind",
        headers: [["Content-Type", "application/json"]],
        body: JSON.stringify({ bind_token: "A".repeat(43), server_url: "http://127.0.0.1:8080", client_version: "0.1.0", platform: "linux-amd64", hostname: "h" }),
      }),
    ]);
  for (let i = 0; i < 3; i++) assertCode(await bind(), "INVALID_BIND_TOKEN", `guess ${i + 1}`);
  const limited = await bind();
  assertCode(limited, "RATE_LIMITED", "fourth guess");
  assert.ok(Number(limited.headers.get("retry-after")) > 0, "Retry-After");
});

test("spec §6.5: one admin session holds at most SVC_SSE_MAX_STREAMS_PER_SESSION streams; one more is 429 RATE_LIMITED, other sessions are not affected, a closed stream frees its place", async (t) => {
  const s = await startSseServer(t, {}, { settings: { sseMaxStreamsPerSession: 2 } });
  const a = await s.open();
  const b = await s.open();
  await opening(a);
  await opening(b);
  const third = await s.open();
  assert.equal(third.status, 429);
  const body = JSON.parse(await third.body()) as { error: { code: string; message: string; details: { open_streams: number; limit: number } } };
  assert.equal(body.error.code, "RATE_LIMITED");
  assert.deepEqual(body.error.details, { open_streams: 2, limit: 2 });
  assert.match(body.error.message, /SVC_SSE_MAX_STREAMS_PER_SESSION=2/);
  assert.equal(s.hub.subscriberCount(), 2, "the refused stream never reached the hub");

  // Another session has its own allowance.
  const res = await fetch(`${s.baseUrl}/api/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ password: "correct horse battery staple" }) });
  const other = ((await res.json()) as { access_token: string }).access_token;
  const c = await s.open({ token: other });
  assert.equal(c.status, 200);
  await opening(c);

  // Closing one of the first admin session's streams frees its place.
  a.destroy();
  await subscribers(s.hub, 2);
  const again = await s.open();
  assert.equal(again.status, 200);
  await opening(again);
  assert.equal(s.hub.subscriberCount(), 3);
});

test("spec §6.5: fifty subscribers that stop reading are all dropped at the per-subscriber queue limit while a reading console gets every frame in order", async (t) => {
  const s = await startSseServer(t, { maxQueuedBytesPerSubscriber: 64 * 1024 }, { settings: { sseMaxStreamsPerSession: 100 } });
  const healthy = await s.open();
  await opening(healthy);
  const stuck = await Promise.all(Array.from({ length: 50 }, () => s.openStalled()));
  await subscribers(s.hub, 51);

  const blob = "x".repeat(48 * 1024);
  let i = 0;
  // Kernel socket buffers absorb a few MiB per socket first; the bound only keeps a broken test finite.
  for (; i < 5000 && s.hub.metrics().dropped < 50; i++) {
    publishMarker(s.hub, "node.workspace.updated", { config_id: "cfg-1", node_id: "node-1", workspace: { i, blob } });
    const f = await healthy.waitFor((fr) => fr.event === "node.workspace.updated");
    assert.equal((f.json.payload.workspace as { i: number }).i, i, "the reading console never stalls or skips");
  }
  assert.equal(s.hub.metrics().dropped, 50, `dropped after ${i} frames`);
  assert.equal(s.hub.subscriberCount(), 1, "only the reading console is left");
  // The dropped connections are closed by the service.
  await Promise.all(
    stuck.map((socket) => {
      socket.resume();
      return once(socket, "close");
    }),
  );
});

test("the abuse-limit settings parse from the environment with defaults 20 / 120000 / 8 and refuse out-of-range values naming the variable", () => {
  const d = loadSettings({});
  assert.deepEqual([d.authRateLimitMax, d.httpRequestTimeoutMs, d.sseMaxStreamsPerSession], [20, 120_000, 8]);
  const s = loadSettings({ SVC_AUTH_RATE_LIMIT_MAX: "5", SVC_HTTP_REQUEST_TIMEOUT_MS: "1000", SVC_SSE_MAX_STREAMS_PER_SESSION: "1000" });
  assert.deepEqual([s.authRateLimitMax, s.httpRequestTimeoutMs, s.sseMaxStreamsPerSession], [5, 1000, 1000]);
  for (const [name, value] of [["SVC_AUTH_RATE_LIMIT_MAX", "0"], ["SVC_HTTP_REQUEST_TIMEOUT_MS", "999"], ["SVC_SSE_MAX_STREAMS_PER_SESSION", "1001"], ["SVC_SSE_MAX_STREAMS_PER_SESSION", "2.5"]] as const) {
    assert.throws(() => loadSettings({ [name]: value }), (err: Error) => err instanceof SettingsError && err.message.includes(name), `${name}=${value}`);
  }
});
