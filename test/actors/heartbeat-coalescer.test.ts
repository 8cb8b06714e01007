import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { HeartbeatCoalescer, type HeartbeatEvent } from "../../src/actors/heartbeat-coalescer.js";
import type { Entry } from "../../src/actors/node-entries.js";
import { PresenceSweep } from "../../src/actors/presence-sweep.js";
import { RecorderSink } from "../../src/actors/recorder-sink.js";
import { afterEventsOf } from "../../src/actors/recorder.js";
import { ManualClock } from "../../src/lib/clock.js";
import { nodeMachine } from "../../src/machines/node.machine.js";
import { liveNode, log, openStores, PART_TTL_MS, tempDbFile } from "./harness.js";

/**
 * The heartbeat coalescer on its own (src/actors/heartbeat-coalescer.ts): a heartbeat of an
 * online node that would change nothing but `lastSignalAt` skips XState, yet still counts for
 * presence (spec §3.1 online TTL). The whole registry is compared with a non-coalescing one in
 * coalesced-heartbeats.test.ts; here each rule of the part. A real node actor and ManualClock.
 */

async function open(t: TestContext, enabled = true) {
  const { store, close } = await openStores(tempDbFile(t));
  const clock = new ManualClock();
  const recorder = new RecorderSink({ store, clock, log, afterEvents: afterEventsOf(nodeMachine.root) });
  const sweep = new PresenceSweep<Entry>({ clock, enabled: true, onDue: () => {} });
  const coalescer = new HeartbeatCoalescer({ enabled, sweep, recorder });
  const { actor, entry } = liveNode(clock, "n-1");
  t.after(async () => {
    actor.stop();
    sweep.stop();
    await close();
  });
  const heartbeat = (wgOnline?: boolean): HeartbeatEvent =>
    wgOnline === undefined ? { type: "mqtt.signal", at: clock.now(), source: "heartbeat" } : { type: "mqtt.signal", at: clock.now(), source: "heartbeat", wgOnline };
  /** A heartbeat delivered in full, learned from as the registry does (`quiet`: nothing queued). */
  const deliver = (event: HeartbeatEvent, quiet = true) => {
    const before = actor.getSnapshot();
    recorder.sendAs(actor, event);
    coalescer.learn(entry, event, before, actor.getSnapshot(), quiet);
  };
  // Bound and online, running: the heartbeats that follow repeat what the node reported.
  actor.send({ type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
  deliver(heartbeat(true));
  return { clock, sweep, coalescer, actor, entry, heartbeat, deliver };
}

test("spec §3.1: once a heartbeat moved only lastSignalAt, the next identical one is held: XState does not see it, yet its time is kept and the presence deadline moves to at + TTL", async (t) => {
  const h = await open(t);
  assert.equal(h.coalescer.hold(h.entry, h.clock.now(), true), false, "nothing learned yet: the first heartbeat changed the state");
  h.clock.advance(1000);
  h.deliver(h.heartbeat(true));
  h.clock.advance(1000);
  const snapshot = h.actor.getSnapshot();
  const at = h.clock.now();
  assert.equal(h.coalescer.hold(h.entry, at, true), true);
  assert.equal(h.actor.getSnapshot(), snapshot, "the actor's snapshot is untouched");
  assert.equal(h.entry.pendingSignalAt, at);
  assert.equal(h.entry.deadline, at + PART_TTL_MS);
  assert.equal(h.coalescer.held, 1);
});

test("spec §3.3: a heartbeat reporting another wg_online, or one after any other change of the snapshot, is not held", async (t) => {
  const h = await open(t);
  h.deliver(h.heartbeat(true));
  assert.equal(h.coalescer.hold(h.entry, h.clock.now(), false), false, "another runtime report");
  assert.equal(h.coalescer.hold(h.entry, h.clock.now(), undefined), false, "no runtime report");
  h.actor.send({ type: "detect.sent", at: h.clock.now() });
  assert.equal(h.coalescer.hold(h.entry, h.clock.now(), true), false, "the snapshot moved on");
  assert.equal(h.coalescer.held, 0);
});

test("a heartbeat that queued an effect or a flight-recorder row teaches nothing", async (t) => {
  const h = await open(t);
  h.deliver(h.heartbeat(true), false);
  assert.equal(h.entry.signalOnly, undefined);
  assert.equal(h.coalescer.hold(h.entry, h.clock.now(), true), false);
});

test("spec §3.1: the newest held heartbeat is delivered before anything else reaches the actor, with its time and wg_online", async (t) => {
  const h = await open(t);
  h.deliver(h.heartbeat(true));
  h.clock.advance(5_000);
  h.coalescer.hold(h.entry, h.clock.now(), true);
  h.clock.advance(5_000);
  const newest = h.clock.now();
  h.coalescer.hold(h.entry, newest, true);
  h.coalescer.deliverHeld(h.entry);
  assert.equal(h.actor.getSnapshot().context.lastSignalAt, newest);
  assert.equal(h.entry.pendingSignalAt, undefined);
  h.coalescer.deliverHeld(h.entry);
  assert.equal(h.actor.getSnapshot().context.lastSignalAt, newest, "nothing held: nothing delivered");
});

test("only plain heartbeats may be held, and none when coalescing is off", async (t) => {
  const h = await open(t);
  const at = h.clock.now();
  assert.equal(h.coalescer.coalesces({ type: "mqtt.signal", at, source: "heartbeat", wgOnline: true }), true);
  assert.equal(h.coalescer.coalesces({ type: "mqtt.signal", at, source: "heartbeat", clientVersion: "1.1.0" }), false, "a new client version");
  assert.equal(h.coalescer.coalesces({ type: "mqtt.signal", at, source: "heartbeat", requestId: "r-1" }), false, "an answer to a request");
  assert.equal(h.coalescer.coalesces({ type: "mqtt.signal", at, source: "ack" }), false, "an ACK");
  assert.equal(h.coalescer.coalesces({ type: "mqtt.will", at }), false);
  const off = await open(t, false);
  assert.equal(off.coalescer.coalesces({ type: "mqtt.signal", at, source: "heartbeat" }), false);
});
