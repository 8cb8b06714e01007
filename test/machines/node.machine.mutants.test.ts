import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createActor, SimulatedClock, type StateValue } from "xstate";
import { hasPendingTimers, nodeMachine, presenceDeadline, type NodeEvent } from "../../src/machines/node.machine.js";

// Boundaries and edge events of the node statechart that node.machine.test.ts does not pin down
// (found by mutation testing, docs/mutation.md). Time is a SimulatedClock; events carry
// `at = clock.now()`; nothing sleeps.

const T0 = Date.UTC(2025, 0, 1, 12);
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const ONLINE_TTL = 45 * MINUTE; // DESIGN §3, spec §6.4 rule 7
const DETECT_TIMEOUT = 20 * SECOND; // DESIGN §3, spec §6.4 rule 8

type WithoutAt<E> = E extends unknown ? Omit<E, "at"> : never;

function start(mode: "static" | "dynamic" = "dynamic") {
  const clock = new SimulatedClock();
  clock.set(T0);
  const revoked: string[] = [];
  const actor = createActor(
    nodeMachine.provide({
      actions: {
        revokeClient: (_a, params) => {
          revoked.push(params.reason);
        },
      },
    }),
    { input: { configId: "office", nodeId: "laptop", mode, onlineTtlMs: ONLINE_TTL, detectTimeoutMs: DETECT_TIMEOUT }, clock },
  );
  actor.start();
  const h = {
    clock,
    actor,
    revoked,
    send(event: WithoutAt<NodeEvent>) {
      actor.send({ ...event, at: clock.now() } as NodeEvent);
    },
    advance(ms: number) {
      clock.increment(ms);
    },
    state(region: string): string {
      const v = (actor.getSnapshot().value as Record<string, StateValue>)[region];
      return typeof v === "string" ? v : (Object.keys(v ?? {})[0] ?? "");
    },
    context: () => actor.getSnapshot().context,
    /** Every region's state, for "nothing changed" checks. */
    value: () => JSON.stringify(actor.getSnapshot().value),
  };
  return h;
}

type H = ReturnType<typeof start>;

function onlineNode(wgOnline = true): H {
  const h = start();
  h.send({ type: "bind_token.issued", expiresAt: h.clock.now() + 5 * MINUTE });
  h.send({ type: "client.bound", clientVersion: "1.0.0" });
  h.send({ type: "mqtt.signal", source: "heartbeat", wgOnline });
  assert.equal(h.state("presence"), "online");
  return h;
}

describe("detect probe timing (spec §6.4 rule 8, DESIGN §3: 20 s)", () => {
  test("spec §6.4 rule 8: the detect ACK deadline is 20 s after the detect: still waiting at 20 s - 1 ms, dropped at 20 s", () => {
    const h = onlineNode();
    h.advance(SECOND);
    h.send({ type: "detect.sent" });
    h.advance(DETECT_TIMEOUT - 1);
    assert.equal(h.state("probe"), "waiting");
    assert.equal(h.state("presence"), "online");
    h.advance(1);
    assert.equal(h.state("probe"), "idle");
    assert.equal(h.state("presence"), "dropped");
  });

  test("a second detect while one is outstanding restarts the 20 s from the new detect", () => {
    const h = onlineNode();
    h.advance(SECOND);
    h.send({ type: "detect.sent" });
    h.advance(10 * SECOND);
    h.send({ type: "detect.sent" });
    assert.equal(h.context().detectSentAt, h.clock.now());
    h.advance(DETECT_TIMEOUT - 1);
    assert.equal(h.state("presence"), "online", "the first detect's deadline has passed, the second's has not");
    h.advance(1);
    assert.equal(h.state("presence"), "dropped");
  });

  test("spec §3.1 \"no other recent signal\": a signal in the same millisecond as the detect counts as recent (not dropped)", () => {
    const h = onlineNode();
    h.advance(SECOND);
    h.send({ type: "mqtt.signal", source: "heartbeat", wgOnline: true });
    h.send({ type: "detect.sent" });
    h.advance(DETECT_TIMEOUT);
    assert.equal(h.state("probe"), "idle");
    assert.equal(h.state("presence"), "online");
    assert.equal(h.state("runtime"), "unknown", "spec §3.3: a detect timeout still clears the runtime");
  });

  test("spec §6.4 rule 3: a detect failure without an ACK (publish error) does not refresh last_reachable_at; a failed ACK does", () => {
    const h = onlineNode();
    assert.equal(h.context().lastReachableAt, null);
    h.advance(SECOND);
    h.send({ type: "detect.sent" });
    h.advance(SECOND);
    h.send({ type: "detect.failed" });
    assert.equal(h.context().lastReachableAt, null, "a publish error is not a message from the node");
    const g = onlineNode();
    g.advance(SECOND);
    g.send({ type: "detect.sent" });
    g.advance(SECOND);
    g.send({ type: "detect.failed", ack: false });
    assert.equal(g.context().lastReachableAt, null);
    g.send({ type: "detect.sent" });
    g.advance(SECOND);
    g.send({ type: "detect.failed", ack: true });
    assert.equal(g.context().lastReachableAt, g.clock.now());
  });
});

describe("presence TTL check (spec §3.1, §6.4 rule 7)", () => {
  test("a TTL check that arrives before the deadline (a sweep entry older than the newest heartbeat) leaves the node online", () => {
    const h = onlineNode();
    h.advance(30 * MINUTE);
    h.send({ type: "mqtt.signal", source: "heartbeat", wgOnline: true });
    h.advance(20 * MINUTE); // past the first heartbeat's deadline, before the second's
    h.send({ type: "presence.ttl_check" });
    assert.equal(h.state("presence"), "online");
    h.advance(ONLINE_TTL - 20 * MINUTE - 1);
    h.send({ type: "presence.ttl_check" });
    assert.equal(h.state("presence"), "online", "1 ms before the deadline");
    h.advance(1);
    h.send({ type: "presence.ttl_check" });
    assert.equal(h.state("presence"), "dropped");
  });
});

describe("mode events that do not change the mode (spec §3.1 dynamic → static)", () => {
  test("node.mode_changed to dynamic on a dynamic node changes nothing: no revoke, still initialized, online, token valid", () => {
    const h = onlineNode();
    h.send({ type: "bind_token.issued", expiresAt: h.clock.now() + 5 * MINUTE });
    h.send({ type: "detect.sent" });
    const before = h.value();
    h.send({ type: "node.mode_changed", mode: "dynamic" });
    assert.equal(h.value(), before);
    assert.deepEqual(h.revoked, []);
    assert.equal(h.context().mode, "dynamic");
    assert.notEqual(h.context().lastSignalAt, null);
  });

  test("node.mode_changed to static on a static node changes nothing (it does not turn dynamic)", () => {
    const h = start("static");
    assert.equal(h.state("mode"), "static");
    h.send({ type: "node.mode_changed", mode: "static" });
    assert.equal(h.state("mode"), "static");
    assert.equal(h.context().mode, "static");
    h.send({ type: "node.mode_changed", mode: "dynamic" });
    assert.equal(h.state("mode"), "dynamic");
    assert.equal(h.context().mode, "dynamic");
  });
});

describe("confirmed config protocol (spec §3.5, §6.3 previous_tunnel_protocol)", () => {
  test("an applied ACK records the pushed protocol; one without a protocol keeps the previous", () => {
    const h = onlineNode();
    h.send({ type: "config.staged", version: 1, sha: "a".repeat(64) });
    h.send({ type: "config.applied", version: 1, sha: "a".repeat(64), protocol: "awg_2" });
    assert.equal(h.context().confirmedProtocol, "awg_2");
    assert.equal(h.state("sync"), "latest");
    h.send({ type: "config.staged", version: 2, sha: "b".repeat(64) });
    h.send({ type: "config.applied", version: 2, sha: "b".repeat(64) });
    assert.equal(h.context().confirmedProtocol, "awg_2");
    assert.equal(h.context().confirmedVersion, 2);
    h.send({ type: "config.applied", version: 3, sha: "c".repeat(64), protocol: "wireguard" });
    assert.equal(h.context().confirmedProtocol, "wireguard");
    assert.equal(h.state("sync"), "pending", "confirmed something that is not the staged config");
  });
});

describe("helpers for the actor layer: presenceDeadline, hasPendingTimers", () => {
  const ctx = { lastSignalAt: 1000, onlineTtlMs: ONLINE_TTL };

  test("presenceDeadline: newest signal + TTL while online; null when offline, dropped or without a presence region", () => {
    assert.equal(presenceDeadline({ value: { presence: { online: "fresh" } }, context: ctx }), 1000 + ONLINE_TTL);
    assert.equal(presenceDeadline({ value: { presence: "offline" }, context: ctx }), null);
    assert.equal(presenceDeadline({ value: { presence: "dropped" }, context: ctx }), null);
    assert.equal(presenceDeadline({ value: {}, context: ctx }), null);
    // Online without any signal recorded: due at once.
    assert.equal(presenceDeadline({ value: { presence: { online: "fresh" } }, context: { lastSignalAt: null, onlineTtlMs: ONLINE_TTL } }), 0);
  });

  test("presenceDeadline and hasPendingTimers read a stored value that is not a region map (null, undefined, a string) as no state, without throwing", () => {
    for (const value of [null, undefined, "online", 7]) {
      assert.equal(presenceDeadline({ value, context: ctx }), null, String(value));
      assert.equal(hasPendingTimers(value), false, String(value));
    }
  });

  test("hasPendingTimers: true exactly when a bind token is valid or a detect is outstanding (the states with `after` timers)", () => {
    assert.equal(hasPendingTimers({ bindToken: "valid", probe: "idle" }), true);
    assert.equal(hasPendingTimers({ bindToken: "used", probe: "waiting" }), true);
    assert.equal(hasPendingTimers({ bindToken: "valid", probe: "waiting" }), true);
    for (const bindToken of ["none", "used", "expired", "invalidated"]) {
      assert.equal(hasPendingTimers({ bindToken, probe: "idle" }), false, bindToken);
    }
    assert.equal(hasPendingTimers({}), false);
    // From real snapshots.
    const h = onlineNode(); // its bind token was used, no detect outstanding
    assert.equal(hasPendingTimers(h.actor.getSnapshot().value), false);
    h.send({ type: "detect.sent" });
    assert.equal(hasPendingTimers(h.actor.getSnapshot().value), true);
    const g = start();
    g.send({ type: "bind_token.issued", expiresAt: g.clock.now() + 5 * MINUTE });
    assert.equal(hasPendingTimers(g.actor.getSnapshot().value), true);
  });
});
