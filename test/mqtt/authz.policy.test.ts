import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  BACKEND_USERNAME_DEFAULT,
  authorize,
  nodeClientId,
  nodeGrants,
  nodeIdentity,
  nodeUsername,
  parseNodeUsername,
  type BrokerAction,
  type BrokerIdentity,
} from "../../src/mqtt/authz.policy.js";
import { backendSubscriptions } from "../../src/protocol/topics.js";

const A = nodeIdentity("cfg-1", "node-a");
const B = nodeIdentity("cfg-1", "node-b");
const BACKEND: BrokerIdentity = { kind: "backend" };

const DOWN = ["config/push", "control", "detect", "info"];
const UP = ["config/push/ack", "control/ack", "detect/ack", "info/ack", "event", "heartbeat"];
const t = (cfg: string, node: string, suffix: string) => `svc/${cfg}/${node}/${suffix}`;

type Row = [
  who: string,
  identity: BrokerIdentity | null,
  action: BrokerAction,
  topic: string,
  opts: { retain?: boolean; qos?: number },
  want: "allow" | "deny",
  why: string,
];

const rows: Row[] = [];

// spec §5 rule 1: own downstream topics, subscribe only; own upstream topics, publish only.
for (const s of DOWN) {
  rows.push(["A", A, "subscribe", t("cfg-1", "node-a", s), { qos: 1 }, "allow", "spec §5 rule 1: own downstream"]);
  rows.push(["A", A, "publish", t("cfg-1", "node-a", s), { qos: 1 }, "deny", "spec §5 rule 1: downstream is not published by a node"]);
  rows.push(["A", A, "subscribe", t("cfg-1", "node-b", s), { qos: 1 }, "deny", "spec §5 rule 1: foreign node"]);
  rows.push(["A", A, "subscribe", t("cfg-2", "node-a", s), { qos: 1 }, "deny", "spec §5 rule 1: same node id, other config"]);
  rows.push(["backend", BACKEND, "publish", t("cfg-1", "node-a", s), { qos: 1 }, "allow", "spec §6.4 rule 10: backend sends commands"]);
  rows.push(["backend", BACKEND, "subscribe", t("cfg-1", "node-a", s), { qos: 1 }, "deny", "spec §5 rule 3: backend subscribes upstream only"]);
  rows.push(["backend", BACKEND, "publish", t("cfg-1", "node-a", s), { qos: 1, retain: true }, "deny", "spec §6.4 rule 5: no retained"]);
}
for (const s of UP) {
  rows.push(["A", A, "publish", t("cfg-1", "node-a", s), { qos: 1, retain: false }, "allow", "spec §5 rule 1: own upstream"]);
  rows.push(["A", A, "publish", t("cfg-1", "node-a", s), { qos: 0 }, "allow", "spec §5 rule 1: own upstream, QoS 0"]);
  rows.push(["A", A, "subscribe", t("cfg-1", "node-a", s), { qos: 1 }, "deny", "spec §5 rule 1: upstream is not subscribed by a node"]);
  rows.push(["A", A, "publish", t("cfg-1", "node-b", s), { qos: 1 }, "deny", "spec §5 rule 1: foreign upstream (impersonation)"]);
  rows.push(["A", A, "publish", t("cfg-2", "node-a", s), { qos: 1 }, "deny", "spec §5 rule 1: same node id, other config"]);
  rows.push(["A", A, "publish", t("cfg-1", "node-a", s), { qos: 1, retain: true }, "deny", "spec §6.4 rule 5: retained is false"]);
  rows.push(["A", A, "publish", t("cfg-1", "node-a", s), { qos: 2 }, "deny", "QoS above 1 is not part of the protocol"]);
  rows.push(["B", B, "publish", t("cfg-1", "node-b", s), { qos: 1 }, "allow", "spec §5 rule 1: B's own upstream"]);
  rows.push(["backend", BACKEND, "publish", t("cfg-1", "node-a", s), { qos: 1 }, "deny", "backend never impersonates a node"]);
  rows.push(["backend", BACKEND, "subscribe", t("cfg-1", "node-a", s), { qos: 1 }, "deny", "spec §5 rule 3: exactly the backend filters"]);
}
// spec §5 rule 3: exactly backendSubscriptions(), nothing broader.
for (const f of backendSubscriptions()) {
  rows.push(["backend", BACKEND, "subscribe", f, { qos: 1 }, "allow", "spec §5 rule 3: every upstream topic"]);
  rows.push(["backend", BACKEND, "subscribe", f, { qos: 2 }, "deny", "QoS above 1"]);
  rows.push(["A", A, "subscribe", f, { qos: 1 }, "deny", "spec §5 rule 2: no wildcard grant to a node"]);
}
// spec §5 rule 2: no wildcard grant, ever.
for (const f of ["svc/#", "svc/+", "#", "+", "svc/+/+/control", "svc/cfg-1/+/control", "svc/cfg-1/node-a/#", "svc/cfg-1/node-a/+", "svc/+/+/+", "svc/+/+/+/+"]) {
  rows.push(["A", A, "subscribe", f, { qos: 1 }, "deny", "spec §5 rule 2: wildcard filter"]);
  rows.push(["backend", BACKEND, "subscribe", f, { qos: 1 }, "deny", "spec §5 rule 3: only the exact backend filters"]);
}
// Publish topics with wildcards, `$` topics and malformed topics.
const malformed: Array<[string, string]> = [
  ["svc/cfg-1/node-a/+", "wildcard in a publish"],
  ["svc/cfg-1/node-a/#", "wildcard in a publish"],
  ["svc/cfg-1/+/event", "wildcard in a publish"],
  ["svc/+/node-a/event", "wildcard in a publish"],
  ["svc/cfg-1/no+de/event", "id containing +"],
  ["svc/cfg-1/no#de/event", "id containing #"],
  ["svc/cfg-1/node-a/extra/event", "id containing / (extra level)"],
  ["svc/cfg-1/node\u0000-a/event", "NUL in a topic"],
  ["svc/cfg-1/node-a/event\u0000", "trailing NUL"],
  ["svc/cfg-1/Node-A/event", "upper case id (ids are lower case, DESIGN §3)"],
  ["SVC/cfg-1/node-a/event", "upper case root"],
  ["svc/cfg-1/node-a/Event", "upper case suffix"],
  ["svc//node-a/event", "empty level"],
  ["/svc/cfg-1/node-a/event", "leading empty level"],
  ["svc/cfg-1/node-a/event/", "trailing empty level"],
  ["svc/cfg-1/node-a//event", "doubled slash"],
  ["", "empty topic"],
  ["$SYS/broker/clients", "$SYS is reserved"],
  ["$SYS/#", "$SYS is reserved"],
  ["$share/g/svc/cfg-1/node-a/event", "shared subscriptions are never granted"],
  ["$CONTROL/dynamic-security/v1", "broker control topic"],
  [`svc/cfg-1/node-a/event${"x".repeat(300)}`, "over 256 characters"],
  ["svc/cfg-1/node-a/eventx", "unknown suffix"],
  ["svc/cfg-1/node-a", "no suffix"],
  ["svc/cfg-1/node-a/config", "partial suffix"],
];
for (const [topic, why] of malformed) {
  for (const [who, id] of [["A", A], ["backend", BACKEND]] as const) {
    rows.push([who, id, "publish", topic, { qos: 1 }, "deny", why]);
    rows.push([who, id, "subscribe", topic, { qos: 1 }, "deny", why]);
  }
}
// spec §5 / DESIGN §3: unknown identity is always denied.
for (const topic of [t("cfg-1", "node-a", "event"), t("cfg-1", "node-a", "control"), ...backendSubscriptions()]) {
  rows.push(["unknown", null, "publish", topic, { qos: 0 }, "deny", "unknown identity"]);
  rows.push(["unknown", null, "subscribe", topic, { qos: 0 }, "deny", "unknown identity"]);
}
// Identities whose ids are not valid never get anything (a `+` or `#` in an id would widen a topic).
const forged: Array<[string, BrokerIdentity]> = [
  ["id with +", { kind: "node", configId: "cfg-1", nodeId: "+", clientId: "svc-cfg-1-+" }],
  ["id with #", { kind: "node", configId: "#", nodeId: "node-a", clientId: "svc-#-node-a" }],
  ["id with /", { kind: "node", configId: "cfg-1/node-b", nodeId: "event", clientId: "svc-cfg-1/node-b-event" }],
  ["upper case id", { kind: "node", configId: "CFG-1", nodeId: "node-a", clientId: "svc-CFG-1-node-a" }],
  ["client id not the node's", { kind: "node", configId: "cfg-1", nodeId: "node-a", clientId: "other" }],
];
for (const [why, id] of forged) {
  rows.push([why, id, "subscribe", "svc/cfg-1/+/control", { qos: 1 }, "deny", `forged identity: ${why}`]);
  rows.push([why, id, "subscribe", "svc/#/control", { qos: 1 }, "deny", `forged identity: ${why}`]);
  rows.push([why, id, "publish", "svc/cfg-1/node-a/event", { qos: 1 }, "deny", `forged identity: ${why}`]);
  rows.push([why, id, "publish", "svc/cfg-1/node-b/event", { qos: 1 }, "deny", `forged identity: ${why}`]);
}

describe("authorize() matrix (spec §5 rules 1-3, §6.1, §6.4 rule 5)", () => {
  for (const [who, identity, action, topic, opts, want, why] of rows) {
    test(`${who} ${action} ${JSON.stringify(topic).slice(0, 80)} ${JSON.stringify(opts)} -> ${want} (${why})`, () => {
      assert.equal(authorize(identity, action, topic, opts), want);
    });
  }

  test("no option means QoS unchecked and not retained", () => {
    assert.equal(authorize(A, "publish", t("cfg-1", "node-a", "heartbeat")), "allow");
    assert.equal(authorize(A, "subscribe", t("cfg-1", "node-a", "control")), "allow");
  });

  test("a retained flag on a subscribe is irrelevant (retain is a publish property)", () => {
    assert.equal(authorize(A, "subscribe", t("cfg-1", "node-a", "control"), { retain: true }), "allow");
  });

  test("QoS must be 0 or 1: negative, fractional and NaN are denied", () => {
    for (const qos of [-1, 0.5, Number.NaN, 3]) {
      assert.equal(authorize(A, "publish", t("cfg-1", "node-a", "event"), { qos }), "deny", String(qos));
    }
  });

  test("an unknown action is denied", () => {
    assert.equal(authorize(A, "all" as BrokerAction, t("cfg-1", "node-a", "event")), "deny");
  });
});

describe("broker identity names (DESIGN §3 Broker identity)", () => {
  test("username n:{config_id}:{node_id} and client id svc-{config_id}-{node_id}", () => {
    assert.equal(nodeUsername("cfg-1", "node-a"), "n:cfg-1:node-a");
    assert.equal(nodeClientId("cfg-1", "node-a"), "svc-cfg-1-node-a");
    assert.deepEqual(nodeIdentity("cfg-1", "node-a"), { kind: "node", configId: "cfg-1", nodeId: "node-a", clientId: "svc-cfg-1-node-a" });
    assert.equal(BACKEND_USERNAME_DEFAULT, "svc-backend");
  });

  test("parseNodeUsername round-trips and rejects anything else", () => {
    assert.deepEqual(parseNodeUsername(nodeUsername("cfg-1", "node-a")), { configId: "cfg-1", nodeId: "node-a" });
    for (const bad of ["", "n:", "n:cfg-1", "n:cfg-1:", "n::node-a", "x:cfg-1:node-a", "n:cfg-1:node-a:x", "n:cfg-1:no+de", "n:c#:node-a", "n:cfg/1:node-a", "n:CFG:node-a", "n:cfg-1:node\u0000", "svc-backend"]) {
      assert.equal(parseNodeUsername(bad), null, JSON.stringify(bad));
    }
  });

  test("nodeGrants lists exactly what authorize() allows a node (for ACL-based brokers)", () => {
    const g = nodeGrants("cfg-1", "node-a");
    assert.equal(g.publish.length, 6);
    assert.equal(g.subscribe.length, 4);
    for (const topic of g.publish) assert.equal(authorize(A, "publish", topic, { qos: 1 }), "allow", topic);
    for (const topic of g.subscribe) assert.equal(authorize(A, "subscribe", topic, { qos: 1 }), "allow", topic);
    for (const topic of g.publish) assert.equal(authorize(A, "subscribe", topic, { qos: 1 }), "deny", topic);
    for (const topic of g.subscribe) assert.equal(authorize(A, "publish", topic, { qos: 1 }), "deny", topic);
  });
});
