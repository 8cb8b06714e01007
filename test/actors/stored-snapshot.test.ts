import assert from "node:assert/strict";
import { test } from "node:test";
import { createActor } from "xstate";
import { parsePersistedNode } from "../../src/actors/stored-snapshot.js";
import { ManualClock } from "../../src/lib/clock.js";
import { nodeMachine } from "../../src/machines/node.machine.js";

/**
 * The strict check of a stored machine snapshot (src/actors/stored-snapshot.ts): what passes is
 * restored, what fails names its first problem and the node is quarantined (docs/decisions.md
 * "Quarantine at start and reload"). The snapshots are real ones, persisted by the node machine.
 */

const ROW = { config_id: "cfg-1", node_id: "n-1" };

/** A real persisted snapshot of a bound, online node, as JSON-ready data. */
function persisted(): Record<string, unknown> {
  const clock = new ManualClock();
  const actor = createActor(nodeMachine, { input: { configId: "cfg-1", nodeId: "n-1", mode: "dynamic", onlineTtlMs: 60_000, detectTimeoutMs: 20_000 }, clock });
  actor.start();
  actor.send({ type: "client.bound", at: clock.now(), clientVersion: "1.0.0" });
  actor.send({ type: "mqtt.signal", at: clock.now(), source: "heartbeat", wgOnline: true });
  const snapshot = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as Record<string, unknown>;
  actor.stop();
  return snapshot;
}

const parse = (raw: unknown) => parsePersistedNode(nodeMachine.root, typeof raw === "string" ? raw : JSON.stringify(raw), ROW);

test("a snapshot the node machine persisted passes, with its state value and context as stored", () => {
  const raw = persisted();
  const parsed = parse(raw);
  assert.deepEqual(parsed.value, raw.value);
  assert.equal(parsed.context.nodeId, "n-1");
  assert.equal(parsed.context.clientVersion, "1.0.0");
});

test("an older snapshot without confirmedProtocol passes (the field came later)", () => {
  const raw = persisted();
  delete (raw.context as Record<string, unknown>).confirmedProtocol;
  assert.doesNotThrow(() => parse(raw));
});

test("quarantine reasons: each broken snapshot throws naming its first problem", () => {
  const cases: Array<[string, (raw: Record<string, unknown>) => unknown, RegExp]> = [
    ["not JSON", () => "{not json", /is not JSON/],
    ["not an object", () => 42, /not an object/],
    ["status", (raw) => ({ ...raw, status: "done" }), /status must be active/],
    ["value not an object", (raw) => ({ ...raw, value: "online" }), /value must be an object/],
    ["a region missing", (raw) => ({ ...raw, value: { presence: "offline" } }), /must hold exactly the regions/],
    ["a state of no machine", (raw) => ({ ...raw, value: { ...(raw.value as object), presence: "asleep" } }), /"asleep" is not a state/],
    ["a context field unknown", (raw) => ({ ...raw, context: { ...(raw.context as object), extra: 1 } }), /context.extra is not a context field/],
    ["a context field missing", (raw) => ({ ...raw, context: { ...(raw.context as object), stagedVersion: undefined } }), /context.stagedVersion is missing/],
    ["a context field of the wrong type", (raw) => ({ ...raw, context: { ...(raw.context as object), onlineTtlMs: -5 } }), /context.onlineTtlMs has a wrong type or value/],
    ["a sha that is not one", (raw) => ({ ...raw, context: { ...(raw.context as object), stagedSha: "abc" } }), /context.stagedSha has a wrong type/],
    ["another node's", (raw) => ({ ...raw, context: { ...(raw.context as object), nodeId: "n-2" } }), /belongs to another node/],
  ];
  for (const [what, broken, reason] of cases) {
    assert.throws(() => parse(broken(persisted())), reason, what);
  }
});
