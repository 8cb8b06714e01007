import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { authorize, nodeIdentity, type BrokerAction, type BrokerIdentity } from "../../src/mqtt/authz.policy.js";
import { DOWNSTREAM, UPSTREAM, backendSubscriptions } from "../../src/protocol/topics.js";

// Properties of the one MQTT authorization policy (spec §5 rules 1-3, §6.1, §6.4 rule 5) that
// hold for all inputs, next to the example matrix in authz.policy.test.ts. The policy is what a
// broker hook calls with whatever the client sent, so it must also deny (never throw) on input
// the types do not allow.

const ID = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,12}$/);
const DOWN = Object.values(DOWNSTREAM);
const UP = Object.values(UPSTREAM);
const SUFFIX = fc.constantFrom(...DOWN, ...UP);
const ACTION = fc.constantFrom<BrokerAction>("publish", "subscribe");
const QOS = fc.constantFrom(0, 1);

/** Topics near the real ones: real suffixes, other ids, wildcards, `$`, empty levels, odd characters. */
const TOPIC = fc.oneof(
  fc.tuple(ID, ID, SUFFIX).map(([c, n, s]) => `svc/${c}/${n}/${s}`),
  fc.tuple(fc.constantFrom("svc", "SVC", "$SYS", "$share/g/svc", "", "+", "#"), fc.constantFrom("cfg-1", "+", "#", "", "x\u0000"), fc.constantFrom("node-a", "+", "#", ""), fc.constantFrom(...DOWN, ...UP, "#", "+", "", "event/x")).map(
    (parts) => parts.join("/"),
  ),
  fc.string({ maxLength: 40 }),
);

describe("authorize() for all inputs (spec §5)", () => {
  test("spec §5 rules 1-2: a node is allowed exactly its own topics, in the right direction, never a wildcard", () => {
    fc.assert(
      fc.property(ID, ID, TOPIC, ACTION, QOS, (configId, nodeId, topic, action, qos) => {
        const own = new Set((action === "publish" ? UP : DOWN).map((s) => `svc/${configId}/${nodeId}/${s}`));
        const want = own.has(topic) ? "allow" : "deny";
        const me = nodeIdentity(configId, nodeId);
        assert.equal(authorize(me, action, topic, { qos }), want);
        // The node's own topics themselves (a random topic rarely is one).
        for (const s of UP) assert.equal(authorize(me, action, `svc/${configId}/${nodeId}/${s}`, { qos }), action === "publish" ? "allow" : "deny");
        for (const s of DOWN) assert.equal(authorize(me, action, `svc/${configId}/${nodeId}/${s}`, { qos }), action === "subscribe" ? "allow" : "deny");
      }),
      { numRuns: 2000 },
    );
  });

  test("spec §5 rule 1: a node's own topic is denied to every other node, also one sharing its config or node id", () => {
    fc.assert(
      fc.property(ID, ID, ID, ID, SUFFIX, ACTION, (c1, n1, c2, n2, suffix, action) => {
        fc.pre(c1 !== c2 || n1 !== n2);
        assert.equal(authorize(nodeIdentity(c2, n2), action, `svc/${c1}/${n1}/${suffix}`, { qos: 1 }), "deny");
      }),
      { numRuns: 1000 },
    );
  });

  test("spec §5 rule 3: the backend subscribes exactly to backendSubscriptions() and publishes exactly to concrete downstream topics", () => {
    const filters = new Set(backendSubscriptions());
    fc.assert(
      fc.property(TOPIC, ACTION, QOS, (topic, action, qos) => {
        const backend: BrokerIdentity = { kind: "backend" };
        const downstream = /^svc\/[a-z0-9][a-z0-9_-]{0,63}\/[a-z0-9][a-z0-9_-]{0,63}\/(.+)$/.exec(topic);
        const want =
          action === "subscribe"
            ? filters.has(topic)
            : downstream !== null && (DOWN as string[]).includes(downstream[1]!);
        assert.equal(authorize(backend, action, topic, { qos }), want ? "allow" : "deny", topic);
      }),
      { numRuns: 2000 },
    );
    for (const f of filters) assert.equal(authorize({ kind: "backend" }, "subscribe", f, { qos: 1 }), "allow");
  });

  test("spec §6.4 rule 5: a retained publish is denied to everyone, whatever the topic", () => {
    fc.assert(
      fc.property(fc.option(fc.tuple(ID, ID)), SUFFIX, fc.tuple(ID, ID), (who, suffix, [c, n]) => {
        const identity: BrokerIdentity = who === null ? { kind: "backend" } : nodeIdentity(who[0], who[1]);
        assert.equal(authorize(identity, "publish", `svc/${c}/${n}/${suffix}`, { qos: 1, retain: true }), "deny");
      }),
    );
  });

  test("an action other than publish or subscribe is denied, also on a topic the node would be allowed to subscribe to", () => {
    const a = nodeIdentity("cfg-1", "node-a");
    for (const action of ["all", "read", "write", "", "PUBLISH", "Subscribe"]) {
      for (const s of [...DOWN, ...UP]) {
        assert.equal(authorize(a, action as BrokerAction, `svc/cfg-1/node-a/${s}`, { qos: 1 }), "deny", `${action} ${s}`);
        assert.equal(authorize({ kind: "backend" }, action as BrokerAction, `svc/cfg-1/node-a/${s}`, { qos: 1 }), "deny", `backend ${action} ${s}`);
      }
    }
  });

  test("input outside the types (a broker hook passes what it got): unknown identity kind, undefined identity, non-string topic → deny, never a throw", () => {
    const own = "svc/cfg-1/node-a/control";
    // An identity object of a kind the policy does not know, carrying a node's valid ids.
    const odd = { kind: "admin", configId: "cfg-1", nodeId: "node-a", clientId: "svc-cfg-1-node-a" } as unknown as BrokerIdentity;
    assert.equal(authorize(odd, "subscribe", own, { qos: 1 }), "deny");
    assert.equal(authorize(odd, "publish", "svc/cfg-1/node-a/event", { qos: 1 }), "deny");
    assert.equal(authorize(undefined as unknown as BrokerIdentity, "subscribe", own, { qos: 1 }), "deny");
    for (const topic of [undefined, null, 42, ["svc", "cfg-1", "node-a", "control"], { length: 3 }]) {
      for (const identity of [nodeIdentity("cfg-1", "node-a"), { kind: "backend" } as BrokerIdentity]) {
        for (const action of ["publish", "subscribe"] as const) {
          assert.equal(authorize(identity, action, topic as unknown as string, { qos: 1 }), "deny", `${identity.kind} ${action} ${JSON.stringify(topic)}`);
        }
      }
    }
  });
});
