import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { MAX_ENVELOPE_BYTES } from "../../src/protocol/envelope.schema.js";
import { api, bind, dynamicNode, envelope, type Profile } from "../control/agent-harness.js";
import { fileSseServer, type SseServer } from "../events/sse-harness.js";

/**
 * The MQTT router's decisions, one upstream message at a time (DESIGN §1 inbound; spec §6.1-§6.4),
 * on the real service: real SQLite, real node actors, the real command tracker. Messages go
 * straight into `router.handle` — the function the broker connection calls for every upstream
 * message — so each test sees the exact return value, drop reason and resulting node state
 * without waiting for MQTT delivery.
 */

interface Bound {
  s: SseServer;
  configId: string;
  nodeId: string;
  p: Profile;
  /** router.handle for one of the node's upstream topics. */
  send(topicKind: string, type: string, payload: Record<string, unknown>, requestId?: string): boolean;
  projection(): NonNullable<ReturnType<SseServer["server"]["registry"]["projection"]>>;
  logs(): Promise<Array<Record<string, unknown>>>;
  /** Drops counted since this node was made, by reason. */
  dropped(): Record<string, number>;
  /** Messages received since this node was made. */
  received(): number;
}

// One service for the file (a fresh node per test keeps the tests apart).
const shared = fileSseServer();

async function boundNode(_t: TestContext): Promise<Bound> {
  const s = await shared();
  const { configId, nodeId } = await dynamicNode(s);
  const p = await bind(s, configId, nodeId);
  const dropsBefore = new Map(s.server.router.dropped);
  const receivedBefore = s.server.router.received;
  return {
    dropped: () => {
      const out: Record<string, number> = {};
      for (const [k, v] of s.server.router.dropped) if (v !== (dropsBefore.get(k) ?? 0)) out[k] = v - (dropsBefore.get(k) ?? 0);
      return out;
    },
    received: () => s.server.router.received - receivedBefore,
    s,
    configId,
    nodeId,
    p,
    send: (topicKind, type, payload, requestId = "") =>
      s.server.router.handle(p.topics[topicKind]!, Buffer.from(envelope(p, type, payload, requestId))),
    projection: () => {
      const pr = s.server.registry.projection(configId, nodeId);
      assert.ok(pr);
      return pr;
    },
    logs: async () => (await api(s, "GET", `/api/v1/configs/${configId}/nodes/${nodeId}/control-logs`)).json.logs,
  };
}

const HB_RUNNING = { client_online: true, wg_online: true };
const HB_STOPPED = { client_online: true, wg_online: false };

function dropped(b: Bound): Record<string, number> {
  return b.dropped();
}

describe("router: what is dropped (spec §6.1, §6.2, §6.3; a malformed message never changes a node)", () => {
  test("every message is counted as received; a dispatched one returns true, a dropped one false and is counted by reason", async (t) => {
    const b = await boundNode(t);
    const router = b.s.server.router;
    assert.equal(b.received(), 0);
    assert.equal(b.send("heartbeat", "heartbeat", HB_RUNNING), true);
    assert.equal(router.handle(b.p.topics.heartbeat!, Buffer.from("{")), false);
    assert.equal(router.handle(b.p.topics.heartbeat!, Buffer.from("{")), false);
    assert.equal(b.received(), 3);
    assert.deepEqual(dropped(b), { bad_json: 2 });
  });

  test("size limit (DESIGN: 256 KiB): a message of exactly MAX_ENVELOPE_BYTES is read, one byte more is dropped as too_large", async (t) => {
    const b = await boundNode(t);
    const body = envelope(b.p, "heartbeat", HB_RUNNING);
    // JSON allows trailing white space: pad a valid heartbeat to the exact limit.
    const exact = Buffer.from(body + " ".repeat(MAX_ENVELOPE_BYTES - Buffer.byteLength(body)));
    assert.equal(exact.length, MAX_ENVELOPE_BYTES);
    assert.equal(b.s.server.router.handle(b.p.topics.heartbeat!, exact), true);
    assert.equal(b.projection().presence, "online");
    const over = Buffer.from(body + " ".repeat(MAX_ENVELOPE_BYTES + 1 - Buffer.byteLength(body)));
    assert.equal(b.s.server.router.handle(b.p.topics.heartbeat!, over), false);
    assert.deepEqual(dropped(b), { too_large: 1 });
  });

  test("spec §6.1: a downstream topic, a topic outside svc/... and a wildcard topic are bad_topic", async (t) => {
    const b = await boundNode(t);
    const msg = Buffer.from(envelope(b.p, "heartbeat", HB_RUNNING));
    assert.equal(b.s.server.router.handle(b.p.topics.control!, msg), false, "downstream: the backend's own command topic");
    assert.equal(b.s.server.router.handle(`svc/${b.configId}/${b.nodeId}/nothing`, msg), false);
    assert.equal(b.s.server.router.handle(`svc/${b.configId}/+/heartbeat`, msg), false);
    assert.deepEqual(dropped(b), { bad_topic: 3 });
    assert.equal(b.projection().presence, "offline");
  });

  test("spec §6.2: the envelope's config_id and node_id must both equal the topic's (either one differing is id_mismatch)", async (t) => {
    const b = await boundNode(t);
    const other = (profile: Partial<Profile["profile"]>) => Buffer.from(envelope({ ...b.p, profile: { ...b.p.profile, ...profile } }, "heartbeat", HB_RUNNING));
    assert.equal(b.s.server.router.handle(b.p.topics.heartbeat!, other({ config_id: "other-config" })), false);
    assert.equal(b.s.server.router.handle(b.p.topics.heartbeat!, other({ node_id: "other-node" })), false);
    assert.deepEqual(dropped(b), { id_mismatch: 2 });
    assert.equal(b.projection().presence, "offline");
  });

  test("spec §6.3: a payload that does not match its topic's schema is bad_payload (a heartbeat body on the detect ACK topic)", async (t) => {
    const b = await boundNode(t);
    assert.equal(b.send("detect_ack", "ack", HB_RUNNING), false);
    assert.deepEqual(dropped(b), { bad_payload: 1 });
  });

  test("a well-formed message for a static node, or for a node the service does not know, is unknown_node", async (t) => {
    const b = await boundNode(t);
    const patched = await api(b.s, "PATCH", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}`, { mode: "static" });
    assert.equal(patched.status, 200, JSON.stringify(patched.json));
    assert.equal(b.send("heartbeat", "heartbeat", HB_RUNNING), false);
    const ghost = { ...b.p, profile: { ...b.p.profile, node_id: "ghost-node" } };
    assert.equal(b.s.server.router.handle(`svc/${b.configId}/ghost-node/heartbeat`, Buffer.from(envelope(ghost, "heartbeat", HB_RUNNING))), false);
    assert.deepEqual(dropped(b), { unknown_node: 2 });
    assert.equal(b.projection().presence, "offline");
  });
});

describe("router: heartbeats and events (spec §3.1, §3.3, §6.3, §6.4 rules 3 and 6)", () => {
  test("spec §3.3: a heartbeat's wg_online sets runtime running / stopped; heartbeats do not refresh last_reachable_at (§6.4 rule 3)", async (t) => {
    const b = await boundNode(t);
    assert.equal(b.send("heartbeat", "heartbeat", HB_STOPPED), true);
    assert.equal(b.projection().presence, "online");
    assert.equal(b.projection().runtime, "stopped");
    b.s.clock.advance(1000);
    assert.equal(b.send("heartbeat", "heartbeat", HB_RUNNING), true);
    assert.equal(b.projection().runtime, "running");
    assert.equal(b.projection().lastSignalAt, b.s.clock.now());
    assert.equal(b.projection().lastReachableAt, null);
  });

  test("spec §6.4 rules 6 and 9: event `offline` (the will) → offline; any other event is a reachable signal; both are stored as control logs", async (t) => {
    const b = await boundNode(t);
    const stored = async () => (await b.logs()).map((l) => [l.kind, l.level, l.event, l.message]);
    assert.equal(b.send("event", "event", { level: "info", event: "started", message: "agent up" }), true);
    assert.equal(b.projection().presence, "online", "a non-offline event is a reachable signal");
    assert.equal(b.projection().lastReachableAt, null, "an event is not an ACK");
    assert.deepEqual(await stored(), [["event", "info", "started", "agent up"]], "an info event is stored (spec §6.4 rule 9)");
    assert.equal(b.send("event", "event", { level: "info", event: "offline", message: "lost" }), true);
    assert.equal(b.projection().presence, "offline");
    assert.equal(b.projection().runtime, "unknown");
    assert.deepEqual(
      await stored(),
      [
        ["event", "info", "offline", "lost"],
        ["event", "info", "started", "agent up"],
      ],
      "the will is stored too, newest first (docs/decisions.md, event storage)",
    );
  });

  test("spec §2.8: an event with level error is stored as a control log of kind event; its request_id falls back to the envelope's", async (t) => {
    const b = await boundNode(t);
    assert.equal(b.send("event", "event", { level: "error", event: "service_failed", message: "no privileges" }, "req-env-1"), true);
    assert.equal(b.send("event", "event", { level: "error", event: "service_failed", message: "again" }), true);
    const logs = await b.logs();
    assert.equal(logs.length, 2);
    const [second, first] = logs as [Record<string, unknown>, Record<string, unknown>];
    assert.deepEqual(
      { kind: first.kind, request_id: first.request_id, action: first.action, message: first.message, stream: first.stream, output: first.output, status: first.status },
      { kind: "event", request_id: "req-env-1", action: null, message: "no privileges", stream: null, output: null, status: null },
    );
    assert.equal(second.request_id, null, "no request_id anywhere: null, not an empty string");
    assert.equal(b.projection().presence, "online");
  });

  test("spec §6.5 diagnostics flow: command_output is stored as kind output with the payload's request_id, action, stream and output", async (t) => {
    const b = await boundNode(t);
    assert.equal(
      b.send("event", "event", { level: "info", event: "command_output", message: "m", request_id: "req-payload", action: "wg_show", stream: "stderr", output: "oops" }, "req-envelope"),
      true,
    );
    const [log] = (await b.logs()) as [Record<string, unknown>];
    assert.deepEqual(
      { kind: log.kind, request_id: log.request_id, action: log.action, message: log.message, stream: log.stream, output: log.output },
      { kind: "output", request_id: "req-payload", action: "wg_show", message: "m", stream: "stderr", output: "oops" },
    );
  });
});

describe("router: ACKs (spec §3.3, §3.5, §6.4 rules 1-3)", () => {
  test("spec §6.4 rule 3: an ACK for no open command changes no command but still proves reachability (online, last_reachable_at)", async (t) => {
    const b = await boundNode(t);
    b.s.clock.advance(5000);
    assert.equal(b.send("control_ack", "ack", { status: "applied", message: "", action: "start" }, "nobody-asked"), true);
    assert.equal(b.projection().presence, "online");
    assert.equal(b.projection().lastReachableAt, b.s.clock.now());
    assert.equal(b.projection().runtime, "unknown", "an unmatched start ACK reports nothing about the tunnel");
    assert.deepEqual(await b.logs(), []);
  });

  test("spec §3.3: an applied control ACK for stop → stopped, for start → running; an accepted or failed one leaves the runtime", async (t) => {
    const b = await boundNode(t);
    b.send("heartbeat", "heartbeat", HB_RUNNING);
    const stop = await api(b.s, "POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/control`, { action: "stop" });
    assert.equal(stop.status, 202);
    assert.equal(b.send("control_ack", "ack", { status: "accepted", message: "", action: "stop" }, stop.json.request_id), true);
    assert.equal(b.projection().runtime, "running", "accepted is not applied");
    assert.equal(b.send("control_ack", "ack", { status: "applied", message: "", action: "stop" }, stop.json.request_id), true);
    assert.equal(b.projection().runtime, "stopped");
    const start = await api(b.s, "POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/control`, { action: "start" });
    assert.equal(b.send("control_ack", "ack", { status: "failed", message: "no", action: "start" }, start.json.request_id), true);
    assert.equal(b.projection().runtime, "stopped", "a failed start leaves it stopped");
    const again = await api(b.s, "POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/control`, { action: "start" });
    assert.equal(b.send("control_ack", "ack", { status: "applied", message: "", action: "start" }, again.json.request_id), true);
    assert.equal(b.projection().runtime, "running");
  });

  test("spec §6.4 rule 3, §2.7: an ACK that closes its own command refreshes last_reachable_at to its receive time", async (t) => {
    const b = await boundNode(t);
    b.send("heartbeat", "heartbeat", HB_RUNNING);
    assert.equal(b.projection().lastReachableAt, null, "a heartbeat is not an ACK");
    const stop = await api(b.s, "POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/control`, { action: "stop" });
    b.s.clock.advance(3000);
    assert.equal(b.send("control_ack", "ack", { status: "applied", message: "", action: "stop" }, stop.json.request_id), true);
    assert.equal(b.projection().lastReachableAt, b.s.clock.now());
  });

  test("spec §3.3: an applied wg_show (info) ACK says nothing about the tunnel: runtime unchanged", async (t) => {
    const b = await boundNode(t);
    b.send("heartbeat", "heartbeat", HB_STOPPED);
    const show = await api(b.s, "POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/control`, { action: "wg_show" });
    assert.equal(b.send("info_ack", "ack", { status: "applied", message: "", action: "wg_show" }, show.json.request_id), true);
    assert.equal(b.projection().runtime, "stopped");
    const [log] = (await b.logs()) as [Record<string, unknown>];
    assert.equal(log.status, "applied");
  });

  test("spec §6.3 detect ACK: applied carries wg_online and client_version into the node; accepted carries the version only", async (t) => {
    const b = await boundNode(t);
    b.send("heartbeat", "heartbeat", HB_RUNNING);
    const detect = async () => {
      await b.s.server.registry.send(b.configId, b.nodeId, { type: "detect.sent", at: b.s.clock.now() });
      return (await b.s.server.commands.send({ configId: b.configId, nodeId: b.nodeId, kind: "detect", action: "detect", payload: { tunnel_protocol: "wireguard", interface_name: "svc0" } })).requestId;
    };
    const body = (status: string, wg: boolean, version: string) => ({ status, message: "", action: "detect", client_online: true, wg_online: wg, platform: "linux", client_version: version });
    const r1 = await detect();
    assert.equal(b.send("detect_ack", "ack", body("accepted", false, "2.0.0"), r1), true);
    assert.equal(b.projection().runtime, "running", "an accepted detect ACK's wg_online is not a report");
    assert.equal(b.projection().clientVersion, "2.0.0");
    assert.equal(b.send("detect_ack", "ack", body("applied", false, "2.0.1"), r1), true);
    assert.equal(b.projection().runtime, "stopped");
    assert.equal(b.projection().clientVersion, "2.0.1");
    assert.equal(b.projection().presence, "online");
  });

  test("spec §3.1: a failed detect ACK with no other signal since the probe → dropped; it still refreshes last_reachable_at (§6.4 rule 3)", async (t) => {
    const b = await boundNode(t);
    b.send("heartbeat", "heartbeat", HB_RUNNING);
    b.s.clock.advance(1000);
    await b.s.server.registry.send(b.configId, b.nodeId, { type: "detect.sent", at: b.s.clock.now() });
    const { requestId } = await b.s.server.commands.send({ configId: b.configId, nodeId: b.nodeId, kind: "detect", action: "detect", payload: { tunnel_protocol: "wireguard", interface_name: "svc0" } });
    b.s.clock.advance(1000);
    const failed = { status: "failed", message: "wg missing", action: "detect", client_online: true, wg_online: true, platform: "linux", client_version: "3.0.0" };
    assert.equal(b.send("detect_ack", "ack", failed, requestId), true);
    assert.equal(b.projection().presence, "dropped");
    assert.equal(b.projection().runtime, "unknown", "a failed detect's wg_online is not taken");
    assert.equal(b.projection().lastReachableAt, b.s.clock.now());
  });

  test("spec §3.5: only an applied config push ACK confirms the pushed pair → latest; accepted keeps pending", async (t) => {
    const b = await boundNode(t);
    b.send("heartbeat", "heartbeat", HB_RUNNING);
    const push = await api(b.s, "POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/control`, { action: "push_config" });
    assert.equal(push.status, 202, JSON.stringify(push.json));
    assert.equal(b.send("config_push_ack", "ack", { status: "accepted", message: "", action: "push_config" }, push.json.request_id), true);
    assert.equal(b.projection().sync, "pending");
    assert.equal(b.projection().confirmedSha, null);
    assert.equal(b.send("config_push_ack", "ack", { status: "applied", message: "", action: "push_config" }, push.json.request_id), true);
    const pr = b.projection();
    assert.equal(pr.sync, "latest");
    assert.equal(pr.confirmedSha, pr.stagedSha);
    assert.equal(pr.confirmedVersion, pr.stagedVersion);
    assert.equal(pr.confirmedProtocol, "wireguard");
  });

  test("spec §3.5: a failed config push ACK confirms nothing", async (t) => {
    const b = await boundNode(t);
    b.send("heartbeat", "heartbeat", HB_RUNNING);
    const push = await api(b.s, "POST", `/api/v1/configs/${b.configId}/nodes/${b.nodeId}/control`, { action: "push_config" });
    assert.equal(b.send("config_push_ack", "ack", { status: "failed", message: "bad", action: "push_config" }, push.json.request_id), true);
    assert.equal(b.projection().sync, "pending");
    assert.equal(b.projection().confirmedSha, null);
  });

  test("spec §3.5: an applied push ACK for a command without a push target (re-armed from a row whose target was refused) closes it, confirms nothing and does not throw", async (t) => {
    const b = await boundNode(t);
    b.send("heartbeat", "heartbeat", HB_RUNNING);
    const { requestId } = await b.s.server.commands.send({ configId: b.configId, nodeId: b.nodeId, kind: "config_push", action: "push_config", payload: { action: "push_config" } });
    assert.equal(b.send("config_push_ack", "ack", { status: "applied", message: "", action: "push_config" }, requestId), true);
    assert.equal(b.projection().sync, "pending");
    assert.equal(b.projection().confirmedSha, null);
    const [log] = (await b.logs()) as [Record<string, unknown>];
    assert.equal(log.status, "applied");
  });
});
