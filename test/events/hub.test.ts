import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { test, type TestContext } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { SSE_EVENT_TYPES, isSseEventType } from "../../src/events/event-types.js";
import { EventHub, type EventHubOptions, type HubClock, type SystemStatusPayload } from "../../src/events/hub.js";
import { createLogger } from "../../src/logger.js";
import { markerStatus, openStream, opening, publishMarker, subscribers } from "./sse-harness.js";

/**
 * The hub alone, on a bare node:http server (no app, no other timers on the clock), so that
 * the clock's pending timers can be counted.
 */

const T = { timeout: 30_000 };

async function bareHub(t: TestContext, overrides: Partial<EventHubOptions> = {}, wrapClock: (c: ManualClock) => HubClock = (c) => c) {
  const clock = new ManualClock();
  const hub = new EventHub({ clock: wrapClock(clock), log: createLogger("silent"), systemStatus: () => markerStatus({ summary: {} }), ...overrides });
  const http: Server = createServer((req, res) => {
    const id = req.headers["last-event-id"];
    // Test-only headers standing in for the route's session lookup.
    const session = req.headers["x-test-session"];
    const expiresAt = req.headers["x-test-expires-at"];
    void hub.attach(res, Array.isArray(id) ? id[0] : id, {
      ...(typeof session === "string" ? { session } : {}),
      ...(typeof expiresAt === "string" ? { expiresAt: Number(expiresAt) } : {}),
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
  t.after(async () => {
    await hub.close();
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
  });
  /** Timers pending on the clock: only the hub's exist here. */
  const timers = () => (clock as unknown as { timeouts: Map<unknown, unknown> }).timeouts.size;
  return { clock, hub, url, timers, open: (headers: Record<string, string> = {}) => openStream(url, headers) };
}

test("the event types are the twelve of the spec §6.5 table, settings.server.updated, audit.appended, the two of the alert delivery log, config.links.updated and the alert rules' one", () => {
  assert.equal(SSE_EVENT_TYPES.length, 18);
  assert.equal(new Set(SSE_EVENT_TYPES).size, 18);
  assert.ok(isSseEventType("config.links.updated"));
  assert.ok(isSseEventType("alert.rule.updated"));
  assert.ok(isSseEventType("alert.delivery.updated"));
  assert.ok(isSseEventType("settings.server.updated"));
  assert.ok(isSseEventType("node.apply.updated"));
  assert.ok(!isSseEventType("node.apply"));
});

test("the clock-sync timer exists only while subscribers exist; listeners see every count change (spec §6.5 rules 2 and 5, §6.4 rule 8)", T, async (t) => {
  const h = await bareHub(t);
  const counts: number[] = [];
  const off = h.hub.onSubscribersChanged((n) => counts.push(n));
  assert.equal(h.timers(), 0);
  h.clock.advance(60_000);
  h.hub.publish("snapshot.list.updated", { snapshots: [] });
  assert.deepEqual(h.hub.metrics(), { subscribers: 0, published: 0, dropped: 0, buffered: 0, lastEventId: 0 });

  const a = await h.open();
  await opening(a);
  assert.equal(h.timers(), 1, "one clock-sync timer while a stream is open");
  const b = await h.open();
  await opening(b);
  assert.equal(h.timers(), 1, "one timer for all streams");
  h.clock.advance(15_000);
  assert.equal((await a.next()).event, "system.clock.sync");
  assert.equal((await b.next()).event, "system.clock.sync");
  assert.equal(h.timers(), 1, "re-armed");

  a.destroy();
  await subscribers(h.hub, 1);
  b.destroy();
  await subscribers(h.hub, 0);
  assert.equal(h.timers(), 0, "no timer without subscribers");
  assert.deepEqual(counts, [1, 2, 1, 0]);
  off();
  const c = await h.open();
  await opening(c);
  assert.deepEqual(counts, [1, 2, 1, 0], "a removed listener hears nothing");
});

test("frames published while the status is computed follow the two opening events (spec §6.5 rule 1)", T, async (t) => {
  let release: (v: SystemStatusPayload) => void = () => {};
  let calls = 0;
  const h = await bareHub(t, {
    systemStatus: () => {
      calls++;
      return new Promise((resolve) => (release = resolve));
    },
  });
  const c = await h.open();
  await subscribers(h.hub, 1);
  publishMarker(h.hub, "config.list.updated", { configs: [1] });
  release(markerStatus({ summary: { late: true } }));
  const [status, sync] = await opening(c);
  assert.deepEqual(status.json.payload, { summary: { late: true } });
  assert.equal(calls, 1);
  const event = await c.next();
  assert.equal(event.event, "config.list.updated");
  // Ids are in send order for this stream.
  assert.ok(Number(status.id) < Number(sync.id));
  assert.ok(Number(event.id) < Number(status.id), "the event got its id when it was published");
});

test("a failing status provider ends the new stream instead of leaving it half open", T, async (t) => {
  const h = await bareHub(t, {
    systemStatus: () => {
      throw new Error("status store down");
    },
  });
  const c = await h.open();
  assert.equal(c.status, 200);
  assert.equal(await c.ended, "end");
  assert.equal(c.frames.length, 0);
  assert.equal(h.hub.subscriberCount(), 0);
  assert.equal(h.timers(), 0);
});

test("close() ends streams, stops the timer, empties the buffer and is idempotent (spec §6.5 rule 4)", T, async (t) => {
  const h = await bareHub(t);
  const a = await h.open();
  await opening(a);
  publishMarker(h.hub, "settings.mqtt.updated", { mqtt: { enabled: true } });
  await a.next();
  assert.equal(h.hub.metrics().buffered, 1);
  await h.hub.close();
  await h.hub.close();
  assert.equal(await a.ended, "end");
  assert.equal(h.timers(), 0);
  publishMarker(h.hub, "settings.mqtt.updated", { mqtt: { enabled: false } });
  assert.deepEqual(h.hub.metrics(), { subscribers: 0, published: 1, dropped: 0, buffered: 0, lastEventId: 3 });
  const late = await h.open();
  assert.equal(late.status, 503);
  await late.body();
});

test("replay never exceeds the per-subscriber queue limit: the newest frames that fit are sent", T, async (t) => {
  const h = await bareHub(t, { maxQueuedBytesPerSubscriber: 4096, replayBufferSize: 100 });
  const a = await h.open();
  await opening(a);
  for (let i = 0; i < 10; i++) {
    publishMarker(h.hub, "control.log.updated", { config_id: "c", node_id: "n", log: { i, pad: "p".repeat(1000) } });
    await a.next();
  }
  const b = await h.open({ "last-event-id": "2" });
  await opening(b); // spec §6.5 rule 1: the opening events come first, then the replay
  const replayed: number[] = [];
  h.hub.publish("config.list.updated", { configs: [] }); // marks the end of the replay
  for (;;) {
    const f = await b.next();
    if (f.event !== "control.log.updated") break;
    replayed.push((f.json.payload.log as { i: number }).i);
  }
  assert.ok(replayed.length >= 1 && replayed.length < 10, `replayed ${replayed.join(",")}`);
  assert.equal(replayed.at(-1), 9, "the newest frames are the ones kept");
  assert.equal(h.hub.subscriberCount(), 2, "the replaying stream was not dropped");
});

test("a session's streams end on endSession and at expiry, even past Node's longest timer; other sessions' streams stay", T, async (t) => {
  const days30 = 30 * 24 * 3600 * 1000;
  // Node runs a timer longer than 2^31 - 1 ms after 1 ms instead (TimeoutOverflowWarning); so does this clock.
  let longest = 0;
  const nodeLike = (c: ManualClock): HubClock => ({
    now: () => c.now(),
    setTimeout: (fn, ms) => {
      longest = Math.max(longest, ms);
      return c.setTimeout(fn, ms > 2_147_483_647 ? 1 : ms);
    },
    clearTimeout: (handle) => c.clearTimeout(handle),
  });
  const h = await bareHub(t, { clockSyncMs: 2_000_000_000 }, nodeLike); // few clock syncs in the way
  const a1 = await h.open({ "x-test-session": "a", "x-test-expires-at": String(h.clock.now() + days30) });
  const a2 = await h.open({ "x-test-session": "a" });
  const b = await h.open({ "x-test-session": "b", "x-test-expires-at": String(h.clock.now() + days30) });
  for (const c of [a1, a2, b]) await opening(c);
  // 2^31 - 1 ms (about 24.8 days) is the longest timer: the expiry re-arms instead of firing early.
  h.clock.advance(2_147_483_647);
  publishMarker(h.hub, "config.list.updated", { configs: ["day 25"] });
  for (const c of [a1, a2, b]) {
    assert.deepEqual((await c.waitFor((f) => f.event === "config.list.updated")).json.payload, { configs: ["day 25"] });
  }
  assert.equal(h.hub.endSession("a"), 2);
  assert.equal(await a1.ended, "end");
  assert.equal(await a2.ended, "end");
  assert.equal(h.hub.subscriberCount(), 1);
  h.clock.advance(days30 - 2_147_483_647 - 1);
  assert.equal(h.hub.subscriberCount(), 1, "not a millisecond early");
  h.clock.advance(1);
  assert.equal(await b.ended, "end");
  assert.equal(h.hub.subscriberCount(), 0);
  assert.equal(h.timers(), 0, "no clock-sync or expiry timer left");
  assert.equal(longest, 2_147_483_647, "a long expiry waits in steps Node can time, never asks for more");
  // Already expired when attached: ended at once.
  const late = await h.open({ "x-test-session": "c", "x-test-expires-at": String(h.clock.now()) });
  assert.equal(await late.ended, "end");
  assert.equal(late.frames.length, 0);
});
