/**
 * The console's one SSE connection (`web/src/sse/connection.ts`; spec §6.5 rule 3: one shared
 * connection and one reconnect layer) against the real service's stream, in
 * Node: `fetch-event-source` only needs `window.setTimeout`/`fetch` and a `document` with no
 * visibility events (the connection stays open in hidden tabs), given here.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { SseConnection, type SseStatus } from "../../web/src/sse/connection.js";
import { startBackend } from "./harness.js";

const g = globalThis as Record<string, unknown>;
g["window"] ??= globalThis;
g["document"] ??= { hidden: false, addEventListener() {}, removeEventListener() {} };

/** Resolves at the first status `wanted` (now, if it is already). */
function statusReached(conn: SseConnection, wanted: SseStatus): Promise<void> {
  if (conn.status === wanted) return Promise.resolve();
  return new Promise((resolve) => {
    const off = conn.onStatus((s) => {
      if (s === wanted) {
        off();
        resolve();
      }
    });
  });
}

test("spec §6.5 rule 3: removing one listener leaves the others of the same event type on the one connection", { timeout: 20_000 }, async (t) => {
  const b = await startBackend(t, { mqttEnabled: false });
  const conn = new SseConnection({ url: `${b.baseUrl}/api/v1/events/stream`, token: b.token, onUnauthorized: () => assert.fail("401"), onReconnected: () => undefined });
  t.after(() => conn.stop());
  const seenByA: string[] = [];
  let resolveB: (names: string[]) => void = () => undefined;
  const seenByB = new Promise<string[]>((resolve) => (resolveB = resolve));
  const offA = conn.subscribe("config.list.updated", (p) => seenByA.push(...p.configs.map((c) => c.name)));
  conn.subscribe("config.list.updated", (p) => resolveB(p.configs.map((c) => c.name)));
  assert.equal(conn.listenerCount("config.list.updated"), 2);
  conn.start();
  await statusReached(conn, "live");
  offA();
  offA(); // idempotent: removes nothing else
  assert.equal(conn.listenerCount("config.list.updated"), 1);
  await b.api("POST", "/api/v1/configs", { name: "seen", tunnel_protocol: "wireguard", network_cidr: "10.60.0.0/24" });
  assert.deepEqual(await seenByB, ["seen"]);
  assert.deepEqual(seenByA, [], "the removed listener is not called");
});

test("spec §6.5 rule 3: a stream the server ends is reopened by the one reconnect layer with Last-Event-ID; a 401 ends the session instead of retrying", { timeout: 20_000 }, async (t) => {
  const b = await startBackend(t, { mqttEnabled: false });
  const lastEventIds: Array<string | undefined> = [];
  const attach = b.server.hub.attach.bind(b.server.hub);
  b.server.hub.attach = (res, lastEventId, opts) => {
    lastEventIds.push(lastEventId);
    return attach(res, lastEventId, opts);
  };
  let reconnected = 0;
  const statuses: SseStatus[] = [];
  const conn = new SseConnection({
    url: `${b.baseUrl}/api/v1/events/stream`,
    token: b.token,
    onUnauthorized: () => assert.fail("401"),
    onReconnected: () => reconnected++,
    backoff: { startMs: 20, maxMs: 40 },
  });
  t.after(() => conn.stop());
  conn.onStatus((s) => statuses.push(s));
  let lastFrame = "";
  conn.subscribe("system.clock.sync", (_p, id) => (lastFrame = id));
  conn.start();
  await statusReached(conn, "live");
  assert.equal(reconnected, 0);
  const session = await b.server.auth.session(b.token);
  assert.equal(b.server.hub.endSession(session.key), 1);
  await statusReached(conn, "reconnecting");
  await statusReached(conn, "live");
  assert.equal(reconnected, 1);
  assert.deepEqual(statuses, ["connecting", "live", "reconnecting", "live"]);
  assert.equal(lastEventIds.length, 2);
  assert.equal(lastEventIds[0], undefined);
  assert.equal(lastEventIds[1], lastFrame, "the reconnect names the last frame read");
  conn.stop();
  assert.equal(conn.status, "closed");

  // A token the service refuses: onUnauthorized once, closed, no retry.
  let attempts = 0;
  const verify = b.server.auth.verifyAccessToken.bind(b.server.auth);
  b.server.auth.verifyAccessToken = (token) => {
    if (token === "not-a-token") attempts++;
    return verify(token);
  };
  let unauthorized = 0;
  const refused = new SseConnection({
    url: `${b.baseUrl}/api/v1/events/stream`,
    token: "not-a-token",
    onUnauthorized: () => unauthorized++,
    onReconnected: () => assert.fail("reconnected"),
    backoff: { startMs: 20, maxMs: 40 },
  });
  t.after(() => refused.stop());
  const closed = statusReached(refused, "live").then(() => assert.fail("went live"));
  refused.start();
  await new Promise<void>((resolve) => {
    const off = refused.onStatus((s) => {
      if (s === "closed") {
        off();
        resolve();
      }
    });
  });
  void closed;
  assert.equal(unauthorized, 1);
  assert.equal(attempts, 1, "one attempt");
  assert.equal(lastEventIds.length, 2, "never attached");
});
