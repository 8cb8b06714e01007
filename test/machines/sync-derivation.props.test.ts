import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { createActor, SimulatedClock } from "xstate";
import { projectNode } from "../../src/actors/projection.js";
import { configVersionState } from "../../src/domain/config-version.js";
import { nodeMachine, type NodeEvent } from "../../src/machines/node.machine.js";
import { endpointStatusView } from "../../src/services/control.service.js";
import { clientView } from "../../src/services/views.js";

/**
 * spec §3.5 has two readers: the node machine's `sync` region (what the system status counts
 * and what decides an automatic push) and the node views' `config_version_state` (what the
 * console shows, from the staged sha and the confirmed one). Both are the one rule
 * `configVersionState`; this checks, for every sequence of the events that touch a node's
 * staged or confirmed config or its client, that after each event the region, the projection,
 * the endpoint status and the node view over the machine's own staged and confirmed sha say the
 * same thing.
 */

const SHAS = ["a".repeat(64), "b".repeat(64), "c".repeat(64)];

type Step =
  | { type: "config.staged"; sha: number }
  | { type: "config.applied"; sha: number }
  | { type: "client.bound" | "client.reset" | "mqtt.will" | "detect.sent" | "heartbeat" | "ack" }
  | { type: "node.mode_changed"; mode: "static" | "dynamic" };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ type: fc.constant("config.staged" as const), sha: fc.nat(SHAS.length - 1) }) },
  { weight: 4, arbitrary: fc.record({ type: fc.constant("config.applied" as const), sha: fc.nat(SHAS.length - 1) }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constantFrom("client.bound" as const, "client.reset" as const, "mqtt.will" as const, "detect.sent" as const, "heartbeat" as const, "ack" as const) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("node.mode_changed" as const), mode: fc.constantFrom("static" as const, "dynamic" as const) }) },
);

function eventOf(step: Step, at: number): NodeEvent {
  switch (step.type) {
    case "config.staged":
      return { type: "config.staged", at, version: step.sha + 1, sha: SHAS[step.sha] ?? "" };
    case "config.applied":
      return { type: "config.applied", at, version: step.sha + 1, sha: SHAS[step.sha] ?? "", protocol: "wireguard" };
    case "client.bound":
      return { type: "client.bound", at, clientVersion: "1.0.0" };
    case "heartbeat":
      return { type: "mqtt.signal", at, source: "heartbeat" };
    case "ack":
      return { type: "mqtt.signal", at, source: "ack" };
    case "node.mode_changed":
      return { type: "node.mode_changed", at, mode: step.mode };
    default:
      return { type: step.type, at };
  }
}

test("spec §3.5: after any sequence of stagings, applied ACKs and client events, the machine's sync region equals the views' sha comparison over its own staged and confirmed sha", () => {
  fc.assert(
    fc.property(fc.constantFrom("static" as const, "dynamic" as const), fc.array(stepArb, { maxLength: 40 }), (mode, steps) => {
      const clock = new SimulatedClock();
      clock.set(Date.UTC(2025, 0, 1));
      const actor = createActor(nodeMachine, { input: { configId: "c", nodeId: "n", mode, onlineTtlMs: 45 * 60_000, detectTimeoutMs: 20_000 }, clock });
      actor.start();
      const check = (after: string) => {
        const snapshot = actor.getSnapshot();
        const { stagedSha, confirmedSha } = snapshot.context;
        const region = (snapshot.value as Record<string, unknown>).sync;
        const rule = configVersionState(stagedSha, confirmedSha);
        assert.equal(region, rule, `sync region after ${after}`);
        const p = projectNode(snapshot);
        assert.equal(p.sync, rule, `projection after ${after}`);
        // The console's readers, for a dynamic node with MQTT on, given the machine's own staged sha.
        const node = { config_id: "c", node_id: "n", mode: "dynamic" as const, staged_config_version: p.stagedVersion, staged_config_sha256: stagedSha };
        assert.equal(endpointStatusView(node, p, true).config_version_state, region, `endpoint status after ${after}`);
        assert.equal(
          clientView(node, { initialized: true, presence: "online", runtime: "running", lastReachableAt: null, clientVersion: null, confirmedSha }, true).config_version_state,
          region,
          `node view after ${after}`,
        );
      };
      check("start");
      for (const [i, step] of steps.entries()) {
        clock.increment(1000);
        actor.send(eventOf(step, clock.now()));
        check(`step ${i} ${JSON.stringify(step)}`);
      }
      actor.stop();
    }),
    { numRuns: 500 },
  );
});

test("spec §3.5: configVersionState is latest exactly when a staged sha exists and the confirmed one equals it", () => {
  const sha = fc.option(fc.constantFrom(...SHAS), { nil: null });
  fc.assert(
    fc.property(sha, sha, (staged, confirmed) => {
      assert.equal(configVersionState(staged, confirmed), staged !== null && staged === confirmed ? "latest" : "pending");
    }),
  );
  assert.equal(configVersionState(null, null), "pending", "nothing staged, nothing confirmed: not latest");
});
