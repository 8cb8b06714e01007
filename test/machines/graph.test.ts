import assert from "node:assert/strict";
import { test } from "node:test";
import type { AnyStateNode } from "xstate";
import { toDirectedGraph, type DirectedGraphNode } from "xstate/graph";
import { nodeMachine } from "../../src/machines/node.machine.js";
import { api } from "../control/agent-harness.js";
import { startSseServer } from "../events/sse-harness.js";

/**
 * `GET /api/v1/machines/node` answers the node statechart generated from
 * src/machines/node.machine.ts. Derived coverage: the expectations below are walked from the
 * machine itself (its `root` and, independently, `xstate/graph`'s `toDirectedGraph`); nothing is
 * listed by hand, so a state or transition added to the machine and missing from the answer fails.
 */

type State = { id: string; key: string; parent: string | null; kind: string; initial: string | null };
type Transition = {
  source: string;
  targets: string[];
  trigger: string;
  event: string | null;
  guard: string | null;
  delay: string | null;
  delay_ms: number | null;
  reenter: boolean;
};

function allStates(node: AnyStateNode): AnyStateNode[] {
  return [node, ...Object.values(node.states).flatMap(allStates)];
}

function guardOf(guard: unknown): string | null {
  return typeof guard === "string" ? guard : guard === undefined ? null : "?";
}

test("the machine endpoint lists every state of node.machine.ts with its parent, kind and initial child, and every transition (on, after, always) with targets, event, guard and timer delay in ms", async (t) => {
  const s = await startSseServer(t, {}, { settings: { detectTimeoutMs: 17_000, bindTokenTtlMs: 240_000 } });
  const res = await api(s, "GET", "/api/v1/machines/node");
  assert.equal(res.status, 200, JSON.stringify(res.json));
  const states = res.json.states as State[];
  const transitions = res.json.transitions as Transition[];
  assert.equal(res.json.machine_id, nodeMachine.id);

  const byId = new Map(states.map((st) => [st.id, st]));
  const machineStates = allStates(nodeMachine.root);
  assert.equal(states.length, machineStates.length, "no state more, none less");
  for (const node of machineStates) {
    const st = byId.get(node.id);
    assert.ok(st, `state ${node.id} is missing`);
    assert.equal(st.parent, node.parent?.id ?? null, `${node.id} parent`);
    assert.equal(st.kind, node.type, `${node.id} kind`);
    assert.equal(st.initial, node.type === "compound" ? (node.initial.target[0]?.id ?? null) : null, `${node.id} initial`);
  }

  // Every defined transition of every state: `on` and `after` (in `transitions`), then `always`.
  let defined = 0;
  const key = (x: Pick<Transition, "source" | "event" | "guard"> & { targets: string[] }) =>
    `${x.source} ${x.event ?? "(always)"} [${x.guard ?? ""}] -> ${x.targets.join(",")}`;
  const answered = new Map(transitions.map((tr) => [key(tr), tr]));
  for (const node of machineStates) {
    const delays = new Map(node.after.map((a) => [a.eventType, a.delay]));
    for (const [event, list] of node.transitions) {
      for (const tr of list) {
        defined++;
        const got = answered.get(key({ source: node.id, event, guard: guardOf(tr.guard), targets: (tr.target ?? []).map((x) => x.id) }));
        assert.ok(got, `transition ${node.id} on ${event} is missing`);
        assert.equal(got.reenter, tr.reenter);
        const delay = delays.get(event);
        assert.equal(got.trigger, delay === undefined ? "event" : "after");
        assert.equal(got.delay, delay === undefined ? null : String(delay));
      }
    }
    for (const tr of node.always ?? []) {
      defined++;
      const got = answered.get(key({ source: node.id, event: null, guard: guardOf(tr.guard), targets: (tr.target ?? []).map((x) => x.id) }));
      assert.ok(got, `always transition of ${node.id} is missing`);
      assert.equal(got.trigger, "always");
    }
  }
  assert.equal(transitions.length, defined, "no transition more, none less");

  // Cross-check with xstate/graph (an independent walk): every edge is in the answer.
  const edges: Array<{ source: string; target: string; event: string }> = [];
  const collect = (n: DirectedGraphNode) => {
    for (const e of n.edges) edges.push({ source: e.source.id, target: e.target.id, event: e.label.text });
    n.children.forEach(collect);
  };
  collect(toDirectedGraph(nodeMachine));
  assert.ok(edges.length > 30);
  for (const e of edges) {
    const found = transitions.some(
      (tr) => tr.source === e.source && tr.event === e.event && (tr.targets.includes(e.target) || (tr.targets.length === 0 && e.target === e.source)),
    );
    assert.ok(found, `edge ${e.source} --${e.event}--> ${e.target} is missing`);
  }

  // Timer delays in ms, from this service's settings (detect timeout, bind token TTL).
  const timers = Object.fromEntries(transitions.filter((tr) => tr.trigger === "after").map((tr) => [tr.delay, tr.delay_ms]));
  assert.deepEqual(timers, { detectTimeout: 17_000, bindTokenTtl: 240_000 });
  assert.ok(transitions.filter((tr) => tr.trigger !== "after").every((tr) => tr.delay_ms === null));
});

test("the machine routes are in the OpenAPI document with their response schemas, and need the admin", async (t) => {
  const s = await startSseServer(t);
  const doc = (await api(s, "GET", "/api/v1/openapi.json")).json;
  for (const path of ["/api/v1/machines/node", "/api/v1/configs/{config_id}/nodes/{node_id}/machine", "/api/v1/configs/{config_id}/nodes/{node_id}/timeline"]) {
    assert.ok(doc.paths[path]?.get?.responses?.["200"], path);
  }
  assert.equal((await api(s, "GET", "/api/v1/machines/node", undefined, false)).status, 401);
});
