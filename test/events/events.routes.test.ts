import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";
import { login } from "../helpers/api.js";
import type { SystemStatusPayload } from "../../src/events/hub.js";
import { ADMIN_PASSWORD, markerStatus, opening, publishMarker, startSseServer, subscribers, type SseFrame } from "./sse-harness.js";

/** `GET /api/v1/events/stream` over real HTTP (spec §6.5, §5 console SSE row). */

const T = { timeout: 30_000 };

/** How the stream ended, or "still open" when it did not within 5 s (a guard, not a timer under test). */
function endedWithin(c: { ended: Promise<"end" | "close"> }): Promise<"end" | "close" | "still open"> {
  return Promise.race([c.ended, new Promise<"still open">((resolve) => setTimeout(() => resolve("still open"), 5000).unref())]);
}

/** Frames other than the audit log's: every write the test makes appends an entry, announced by `audit.appended`. */
const notAudit = (f: SseFrame) => f.json.type !== "audit.appended";

test("the stream needs the admin bearer token: none or a bad one answers 401 UNAUTHORIZED and opens nothing (spec §5)", T, async (t) => {
  const s = await startSseServer(t);
  for (const token of [null, "not-a-token", "A".repeat(43)]) {
    const c = await s.open({ token });
    assert.equal(c.status, 401, `token ${String(token)}`);
    assert.match(String(c.headers["content-type"]), /^application\/json/);
    const body = JSON.parse(await c.body()) as { error: { code: string } };
    assert.equal(body.error.code, "UNAUTHORIZED");
  }
  const basic = await s.open({ token: null, lastEventId: "1" });
  assert.equal(basic.status, 401);
  await basic.body();
  assert.equal(s.hub.subscriberCount(), 0);
  assert.equal(s.hub.metrics().lastEventId, 0, "no frame was generated for a refused stream");
});

test("the stream is text/event-stream, unbuffered, and opens with system.status.updated then system.clock.sync (spec §6.5 rule 1)", T, async (t) => {
  const s = await startSseServer(t);
  const c = await s.open();
  assert.equal(c.status, 200);
  // spec §6.5: Content-Type text/event-stream; production proxies must not buffer.
  assert.match(String(c.headers["content-type"]), /^text\/event-stream/);
  assert.equal(c.headers["cache-control"], "no-cache, no-transform");
  assert.equal(c.headers["x-accel-buffering"], "no");
  const [status, sync] = await opening(c);
  // spec §6.5 frame fields: event = type, id, data = JSON {type, payload}.
  assert.equal(status.id, "1");
  assert.equal(status.json.type, "system.status.updated");
  assert.deepEqual(Object.keys(status.json.payload).sort(), ["services", "summary", "sync", "topology", "update"]);
  assert.equal(sync.id, "2");
  assert.deepEqual(sync.json, { type: "system.clock.sync", payload: { timestamp: new Date(s.clock.now()).toISOString() } });
  assert.equal(s.hub.subscriberCount(), 1);
});

test("system.clock.sync follows every 15 s of the injected clock while the stream lives (spec §6.5 rule 2)", T, async (t) => {
  const s = await startSseServer(t);
  const start = s.clock.now();
  const c = await s.open();
  await opening(c);
  s.clock.advance(14_999);
  s.clock.advance(1);
  const first = await c.next();
  // Had a sync fired at 14 999 ms, this frame would carry that time.
  assert.deepEqual(first.json, { type: "system.clock.sync", payload: { timestamp: new Date(start + 15_000).toISOString() } });
  assert.equal(first.id, "3");
  s.clock.advance(15_000);
  const second = await c.next();
  assert.equal(second.json.payload.timestamp, new Date(start + 30_000).toISOString());
  assert.equal(second.id, "4");
});

test("with no subscriber nothing is generated: publish assigns no id and buffers nothing, the clock sync stops (spec §6.5 rule 5)", T, async (t) => {
  const s = await startSseServer(t);
  s.hub.publish("config.list.updated", { configs: [] });
  assert.deepEqual(s.hub.metrics(), { subscribers: 0, published: 0, dropped: 0, buffered: 0, lastEventId: 0 });

  const c = await s.open();
  const [status] = await opening(c);
  assert.equal(status.id, "1", "the publish above used no id");
  c.destroy();
  await subscribers(s.hub, 0);

  s.clock.advance(60_000);
  s.hub.publish("config.list.updated", { configs: [] });
  assert.deepEqual(s.hub.metrics(), { subscribers: 0, published: 0, dropped: 0, buffered: 0, lastEventId: 2 });
  const again = await s.open();
  const [status2, sync2] = await opening(again);
  assert.equal(status2.id, "3", "no clock sync or event was generated while nobody listened");
  assert.equal(sync2.id, "4");
});

test("a published event reaches every subscriber with the same id, type and JSON data (spec §6.5)", T, async (t) => {
  const s = await startSseServer(t);
  const a = await s.open();
  const b = await s.open();
  await opening(a);
  await opening(b);
  // spec §6.5: data is JSON; the payload is plain data by type (times ISO strings, enums strings).
  const status = {
    config_id: "cfg-1",
    node_id: "node-1",
    mode: "dynamic",
    effective_mode: "dynamic",
    client_initialized: true,
    client_presence_state: "online",
    runtime_state: "running",
    last_reachable_at: "2026-01-01T00:00:05.000Z",
    client_version: "1.2.3",
    config_version_state: "latest",
    staged_config: { config_version: 2, config_sha256: "a".repeat(64) },
    confirmed_config: { config_version: 2, config_sha256: "a".repeat(64) },
    mqtt_enabled: true,
  } as const;
  s.hub.publish("endpoint.status.updated", { config_id: "cfg-1", node_id: "node-1", status });
  const fa = await a.next();
  const fb = await b.next();
  assert.deepEqual(fa, fb);
  assert.equal(fa.event, "endpoint.status.updated");
  assert.equal(fa.id, "5");
  assert.deepEqual(fa.json, { type: "endpoint.status.updated", payload: { config_id: "cfg-1", node_id: "node-1", status } });
  assert.equal(s.hub.metrics().published, 1);
});

test("spec §6.5 rule 1: with Last-Event-ID the two opening events come first, then the missed frames from the bounded buffer", T, async (t) => {
  const s = await startSseServer(t, { replayBufferSize: 3 });
  const a = await s.open();
  await opening(a); // ids 1, 2
  for (let i = 1; i <= 5; i++) {
    publishMarker(s.hub, "control.log.created", { config_id: "cfg-1", node_id: "node-1", log: { n: i } });
    await a.next(); // ids 3..7
  }
  assert.equal(s.hub.metrics().buffered, 3, "ids 5, 6, 7 kept");
  const ids = (frames: SseFrame[]) => frames.map((f) => `${f.id}:${f.event}`);

  const recent = await s.open({ lastEventId: "5" });
  const got = [await recent.next(), await recent.next(), await recent.next(), await recent.next()];
  assert.deepEqual(ids(got), ["8:system.status.updated", "9:system.clock.sync", "6:control.log.created", "7:control.log.created"]);
  assert.deepEqual(got[2]?.json.payload, { config_id: "cfg-1", node_id: "node-1", log: { n: 4 } });
  // A frame published after the stream opened follows the replay, once (not replayed twice).
  publishMarker(s.hub, "control.log.created", { config_id: "cfg-1", node_id: "node-1", log: { n: 6 } });
  const live = await recent.next();
  assert.equal(`${live.id}:${live.event}`, "10:control.log.created");
  assert.deepEqual(live.json.payload.log, { n: 6 });

  // Older than the buffer (ids up to 5 were evicted): the opening events, then everything buffered (ids 6, 7, 10).
  const old = await s.open({ lastEventId: "3" });
  const gotOld = [await old.next(), await old.next(), await old.next(), await old.next(), await old.next()];
  assert.deepEqual(ids(gotOld), [
    "11:system.status.updated",
    "12:system.clock.sync",
    "6:control.log.created",
    "7:control.log.created",
    "10:control.log.created",
  ]);

  // Up to date, or not one of our ids: no replay.
  for (const lastEventId of ["10", "abc", ""]) {
    const c = await s.open({ lastEventId });
    await opening(c);
    publishMarker(s.hub, "config.list.updated", { configs: [lastEventId] });
    const next = await c.next();
    assert.equal(next.event, "config.list.updated", `Last-Event-ID ${JSON.stringify(lastEventId)}: nothing replayed`);
    assert.deepEqual(next.json.payload, { configs: [lastEventId] });
  }
});

test("spec §6.5 rule 1: frames published while a replaying stream's opening status is computed follow the replay", T, async (t) => {
  let release: (v: SystemStatusPayload) => void = () => {};
  let hold = false;
  const s = await startSseServer(t, {
    systemStatus: () => (hold ? new Promise((resolve) => (release = resolve)) : markerStatus({ summary: {} })),
  });
  const a = await s.open();
  await opening(a); // 1, 2
  publishMarker(s.hub, "control.log.created", { config_id: "c", node_id: "n", log: { n: 1 } }); // 3
  await a.next();
  hold = true;
  const b = await s.open({ lastEventId: "2" });
  await subscribers(s.hub, 2);
  publishMarker(s.hub, "control.log.created", { config_id: "c", node_id: "n", log: { n: 2 } }); // 4
  release(markerStatus({ summary: { late: true } }));
  const got = [await b.next(), await b.next(), await b.next(), await b.next()];
  assert.deepEqual(
    got.map((f) => `${f.id}:${f.event}`),
    ["5:system.status.updated", "6:system.clock.sync", "3:control.log.created", "4:control.log.created"],
  );
});

test("a stream ends when its admin session logs out; another session's stream keeps receiving (spec §5 console SSE)", T, async (t) => {
  const s = await startSseServer(t);
  const other = await login(s.baseUrl, ADMIN_PASSWORD);
  const mine = await s.open();
  const theirs = await s.open({ token: other });
  await opening(mine);
  await opening(theirs);
  const out = await fetch(`${s.baseUrl}/api/v1/auth/logout`, { method: "POST", headers: { authorization: `Bearer ${s.token}` } });
  assert.equal(out.status, 204);
  assert.equal(await endedWithin(mine), "end", "the logged-out session's stream ended");
  await subscribers(s.hub, 1);
  publishMarker(s.hub, "config.list.updated", { configs: ["after-logout"] });
  // The sign-outs are audit entries: their `audit.appended` frames may come first.
  assert.deepEqual((await theirs.waitFor(notAudit)).json.payload, { configs: ["after-logout"] });
  assert.equal(mine.frames.filter(notAudit).length, 2, "nothing reached the ended stream after its opening events");
  const again = await s.open();
  assert.equal(again.status, 401, "the revoked token opens no new stream");
  await again.body();
});

test("deleting or disabling a user ends their open streams at once (within 1 s), and their token opens no new one; the owner's stream keeps receiving", T, async (t) => {
  const s = await startSseServer(t);
  const owner = await s.open();
  await opening(owner);
  const ends: number[] = [];
  for (const change of ["delete", "disable"] as const) {
    const username = `${change}-me`;
    const created = await fetch(`${s.baseUrl}/api/v1/users`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.token}`, "content-type": "application/json" },
      body: JSON.stringify({ username, password: "a long enough password", role: "viewer" }),
    });
    assert.equal(created.status, 201);
    const { user_id } = (await created.json()) as { user_id: string };
    const token = await login(s.baseUrl, "a long enough password", username);
    const theirs = await s.open({ token });
    await opening(theirs);
    const started = performance.now();
    const res = await fetch(`${s.baseUrl}/api/v1/users/${user_id}`, {
      method: change === "delete" ? "DELETE" : "PATCH",
      headers: { authorization: `Bearer ${s.token}`, ...(change === "disable" ? { "content-type": "application/json" } : {}) },
      ...(change === "disable" ? { body: JSON.stringify({ disabled: true }) } : {}),
    });
    assert.equal(res.status, change === "delete" ? 204 : 200);
    assert.equal(await endedWithin(theirs), "end", `${change}: the stream ended`);
    ends.push(performance.now() - started);
    const again = await s.open({ token });
    assert.equal(again.status, 401, `${change}: the token opens no new stream`);
    await again.body();
  }
  assert.ok(ends.every((ms) => ms < 1000), `ended after ${ends.map((ms) => ms.toFixed(0)).join(", ")} ms`);
  publishMarker(s.hub, "config.list.updated", { configs: ["after"] });
  assert.deepEqual((await owner.waitFor(notAudit)).json.payload, { configs: ["after"] });
});

test("a stream ends when its admin session expires on the injected clock, not a millisecond before", T, async (t) => {
  const s = await startSseServer(t, {}, { settings: { adminSessionTtlMs: 60_000 } });
  const c = await s.open(); // the session was issued at the clock's start: it expires 60 s later
  await opening(c);
  s.clock.advance(59_999);
  publishMarker(s.hub, "config.list.updated", { configs: ["still-open"] });
  assert.deepEqual((await c.waitFor((f) => f.event === "config.list.updated")).json.payload, { configs: ["still-open"] });
  assert.equal(s.hub.subscriberCount(), 1);
  s.clock.advance(1);
  assert.equal(await endedWithin(c), "end");
  assert.equal(s.hub.subscriberCount(), 0);
  const again = await s.open();
  assert.equal(again.status, 401);
  await again.body();
});

test("a subscriber that never reads is dropped past its queue limit while another keeps receiving", T, async (t) => {
  const s = await startSseServer(t, { maxQueuedBytesPerSubscriber: 256 * 1024 });
  const healthy = await s.open();
  await opening(healthy);
  const stalled = await s.openStalled();
  await subscribers(s.hub, 2);

  const blob = "x".repeat(48 * 1024);
  let i = 0;
  // Kernel socket buffers absorb several MiB first; the bound only keeps a broken test finite.
  for (; i < 5000 && s.hub.metrics().dropped === 0; i++) {
    publishMarker(s.hub, "node.workspace.updated", { config_id: "cfg-1", node_id: "node-1", workspace: { i, blob } });
    const f = await healthy.waitFor((fr) => fr.event === "node.workspace.updated");
    assert.equal((f.json.payload.workspace as { i: number }).i, i, "the healthy stream never stalls or skips");
  }
  assert.equal(s.hub.metrics().dropped, 1, `dropped after ${i} frames`);
  assert.equal(s.hub.subscriberCount(), 1);

  publishMarker(s.hub, "config.list.updated", { configs: ["after-drop"] });
  const after = await healthy.waitFor((fr) => fr.event === "config.list.updated");
  assert.deepEqual(after.json.payload, { configs: ["after-drop"] });

  // The dropped connection is closed by the server.
  stalled.resume();
  await once(stalled, "close");
});

test("hub.close() ends every open stream and refuses new ones with 503 (spec §6.5 rule 4)", T, async (t) => {
  const s = await startSseServer(t);
  const a = await s.open();
  const b = await s.open();
  await opening(a);
  await opening(b);
  await s.hub.close();
  assert.equal(await a.ended, "end");
  assert.equal(await b.ended, "end");
  assert.equal(s.hub.subscriberCount(), 0);
  const late = await s.open();
  assert.equal(late.status, 503);
  assert.equal((JSON.parse(await late.body()) as { error: { code: string } }).error.code, "SERVICE_UNAVAILABLE");
});

test("server.close() does not hang on an open stream: the route's preClose hook wakes it (spec §6.5 rule 4)", T, async (t) => {
  const s = await startSseServer(t);
  const a = await s.open();
  await opening(a);
  const stalled = await s.openStalled();
  await subscribers(s.hub, 2);
  await s.close();
  assert.equal(await a.ended, "end");
  assert.equal(s.hub.subscriberCount(), 0);
  stalled.destroy();
});

test("the OpenAPI document lists the stream under the events tag, with bearer security and error answers", T, async (t) => {
  const s = await startSseServer(t);
  const res = await fetch(`${s.baseUrl}/api/v1/openapi.json`, { headers: { authorization: `Bearer ${s.token}` } });
  assert.equal(res.status, 200);
  const doc = (await res.json()) as { paths: Record<string, Record<string, any>> }; // eslint-disable-line @typescript-eslint/no-explicit-any -- checked field by field
  const op = doc.paths["/api/v1/events/stream"]?.get;
  assert.ok(op, "GET /api/v1/events/stream is documented");
  assert.deepEqual(op.tags, ["events"]);
  assert.equal(typeof op.summary, "string");
  assert.ok(!(Array.isArray(op.security) && op.security.length === 0), "not marked public");
  for (const status of ["200", "401", "503"]) assert.ok(op.responses[status], `response ${status}`);
  assert.equal(doc.paths["/api/v1/events/stream"]?.head, undefined, "no HEAD route");
});
