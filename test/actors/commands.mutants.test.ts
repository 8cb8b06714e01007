import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { CommandTracker, type ControlLogView, type OpenCommand } from "../../src/actors/commands.js";
import { ManualClock, isoTime } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import type { Envelope } from "../../src/protocol/envelope.schema.js";
import { api, bind, connectAgent, dynamicNode, nextMessage } from "../control/agent-harness.js";
import { fileSseServer, type SseServer } from "../events/sse-harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The command tracker (spec §6.4 rules 1-2, §3.4 ACK status, §2.8 control log): log row before
 * publish, fresh request_id, only the matching ACK from the same node on the matching ACK topic
 * closes a command, timeouts, and a restart re-arming open commands. On the real service's
 * SQLite store (nodes made over REST). A second tracker built on that store, with its own
 * clock and recorded callbacks, shows what the service's own tracker does at each step; its
 * `publish` is the seam to the broker connection.
 */

const SECOND = 1000;
const TIMEOUT = 60 * SECOND; // DESIGN §3: command ACK timeout 60 s
const DETECT_TIMEOUT = 20 * SECOND; // DESIGN §3: detect ACK timeout 20 s

// One service for the file (a fresh node per test keeps the tests apart).
const shared = fileSseServer();

interface Rig {
  s: SseServer;
  configId: string;
  nodeId: string;
  clock: ManualClock;
  tracker: CommandTracker;
  published: Array<{ topic: string; envelope: Envelope }>;
  logEvents: Array<{ change: string; log: ControlLogView }>;
  timeouts: OpenCommand[];
  /** Commands the broker did not take, with the reason (onPublishFailed). */
  publishFailures: Array<{ kind: string; message: string }>;
  finals: Array<{ action: string; status: string }>;
  /** The whole command each onFinal call carried. */
  finalCommands: OpenCommand[];
  /** Make the next publishes reject (the broker did not take them). */
  failPublish: (message: string | null) => void;
  /** Every warning line the rig's trackers logged (pino JSON, parsed), in order. */
  warnings: Warning[];
  row(logId: number): { status: string; message: string; updated_at: number; created_at: number; request_id: string };
}

/** One warning line as pino writes it: its message and fields. */
interface Warning {
  msg: string;
  [field: string]: unknown;
}

/** A warn-level logger whose JSON lines land, parsed, in `sink` (the service's own logger factory). */
function capturingLogger(sink: Warning[]): ReturnType<typeof createLogger> {
  return createLogger("warn", {
    write: (line: string) => {
      sink.push(JSON.parse(line) as Warning);
    },
  });
}

async function rig(opts: { start?: number } = {}): Promise<Rig> {
  const s = await shared();
  const { configId, nodeId } = await dynamicNode(s);
  const clock = new ManualClock(opts.start ?? Date.UTC(2026, 0, 1, 12));
  const published: Rig["published"] = [];
  const logEvents: Rig["logEvents"] = [];
  const timeouts: OpenCommand[] = [];
  const publishFailures: Rig["publishFailures"] = [];
  const finals: Rig["finals"] = [];
  const finalCommands: OpenCommand[] = [];
  const warnings: Warning[] = [];
  let failure: string | null = null;
  const make = () =>
    new CommandTracker({
      store: s.server.store,
      clock,
      log: capturingLogger(warnings),
      timeoutMs: TIMEOUT,
      detectTimeoutMs: DETECT_TIMEOUT,
      publish: async (topic, envelope) => {
        if (failure !== null) throw new Error(failure);
        published.push({ topic, envelope });
      },
      onLog: (change, log) => logEvents.push({ change, log }),
      onTimeout: (c) => timeouts.push(c),
      onPublishFailed: (c, message) => publishFailures.push({ kind: c.kind, message }),
      onFinal: (c, status) => {
        finals.push({ action: c.action, status });
        finalCommands.push(c);
      },
    });
  const tracker = make();
  return {
    s,
    configId,
    nodeId,
    clock,
    tracker,
    published,
    logEvents,
    timeouts,
    publishFailures,
    finals,
    finalCommands,
    failPublish: (m) => {
      failure = m;
    },
    warnings,
    row: (logId) => sqliteOf(s.server.store).prepare("SELECT * FROM control_logs WHERE log_id = ?").get(logId) as ReturnType<Rig["row"]>,
  };
}

/** A second tracker over the same database and clock, started: what a backend restart builds. */
function restarted(r: Rig, onFinal?: (c: OpenCommand, status: string) => void): CommandTracker {
  const next = new CommandTracker({
    store: r.s.server.store,
    clock: r.clock,
    log: capturingLogger(r.warnings),
    timeoutMs: TIMEOUT,
    detectTimeoutMs: DETECT_TIMEOUT,
    publish: async () => undefined,
    onLog: (change, log) => r.logEvents.push({ change, log }),
    onTimeout: (c) => r.timeouts.push(c),
    ...(onFinal ? { onFinal } : {}),
  });
  next.start();
  return next;
}

const applied = { status: "applied" as const, message: "done", action: "start" };
const accepted = { status: "accepted" as const, message: "", action: "start" };

describe("CommandTracker.send (spec §6.4 rules 1-2, §6.2 envelope)", () => {
  test("spec §6.4 rule 2: the log row (pending) exists before the publish; the envelope carries a fresh request_id and the node's ids", async () => {
    const r = await rig();
    const { requestId, log } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: { action: "start" } });
    assert.ok(log);
    assert.match(requestId, /^[0-9a-f-]{36}$/);
    assert.equal(log.status, "pending");
    assert.equal(log.kind, "command");
    assert.equal(log.action, "start");
    assert.equal(log.request_id, requestId);
    assert.equal(log.created_at, isoTime(r.clock.now()));
    assert.deepEqual(r.logEvents.map((e) => [e.change, e.log.log_id]), [["created", log.log_id]]);
    assert.deepEqual(r.published, [
      {
        topic: `svc/${r.configId}/${r.nodeId}/control`,
        envelope: {
          type: "control",
          request_id: requestId,
          config_id: r.configId,
          node_id: r.nodeId,
          boot_id: "",
          session_id: "",
          sent_at: isoTime(r.clock.now()),
          payload: { action: "start" },
        },
      },
    ]);
    assert.equal(r.tracker.published, 1);
    assert.equal(r.tracker.openCount, 1);
    const second = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "stop", payload: { action: "stop" } });
    assert.notEqual(second.requestId, requestId, "a fresh request_id per command");
  });

  test("spec §6.3: a config push goes to config/push with envelope type config_push; info and detect to their own topics", async () => {
    const r = await rig();
    await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "config_push", action: "push_config", payload: {} });
    await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "info", action: "wg_show", payload: {} });
    await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "detect", action: "detect", payload: {} });
    assert.deepEqual(
      r.published.map((p) => [p.topic.split("/").slice(3).join("/"), p.envelope.type]),
      [
        ["config/push", "config_push"],
        ["info", "info"],
        ["detect", "detect"],
      ],
    );
  });

  test("detects are tracked but not logged: no row, no log event, log null", async () => {
    const r = await rig();
    const { log } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "detect", action: "detect", payload: {} });
    assert.equal(log, null);
    assert.deepEqual(r.logEvents, []);
    assert.equal(r.tracker.openCount, 1);
  });

  test("spec §3.4: when the broker does not take the command it ends failed with the reason; nothing is counted as published", async () => {
    const r = await rig();
    r.failPublish("broker gone");
    const { log, requestId } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "stop", payload: { action: "stop" } });
    assert.ok(log);
    assert.equal(log.status, "failed");
    assert.equal(log.message, "publish to the broker failed: broker gone");
    assert.equal(r.tracker.published, 0);
    assert.equal(r.tracker.openCount, 0);
    assert.deepEqual(r.finals, [{ action: "stop", status: "failed" }]);
    assert.deepEqual(r.timeouts, [], "a failed control command is not a detect timeout");
    assert.equal(r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, applied), null, "a failed command takes no ACK");
    // Its timer went with it: the timeout never turns it into timed_out.
    r.clock.advance(TIMEOUT);
    assert.equal(r.row(log.log_id).status, "failed");
  });

  test("spec §6.4 rule 8: a detect the broker does not take is reported at once as a publish failure with the reason (the registry turns it into detect.failed), not as a timeout", async () => {
    const r = await rig();
    r.failPublish("no broker");
    await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "detect", action: "detect", payload: {} });
    assert.deepEqual(r.publishFailures, [{ kind: "detect", message: "publish to the broker failed: no broker" }]);
    assert.deepEqual(r.timeouts, [], "no timeout is waited for");
    assert.equal(r.tracker.openCount, 0);
    assert.deepEqual(r.finals, [{ action: "detect", status: "failed" }]);
  });
});

describe("CommandTracker.ack (spec §6.4 rule 1, §3.4)", () => {
  test("spec §3.4: pending → accepted → applied; each step updates the row (status, message, updated_at) and emits control.log.updated", async () => {
    const r = await rig();
    const { requestId, log } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    r.clock.advance(1000);
    const c1 = r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, { ...accepted, message: "on it" });
    assert.equal(c1?.status, "accepted");
    assert.deepEqual([r.row(log!.log_id).status, r.row(log!.log_id).message, r.row(log!.log_id).updated_at], ["accepted", "on it", r.clock.now()]);
    assert.equal(r.logEvents.at(-1)?.change, "updated");
    assert.equal(r.logEvents.at(-1)?.log.status, "accepted");
    assert.equal(r.logEvents.at(-1)?.log.updated_at, isoTime(r.clock.now()));
    assert.equal(r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, accepted), null, "a second accepted is a duplicate");
    r.clock.advance(1000);
    const c2 = r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, applied);
    assert.equal(c2?.requestId, requestId);
    assert.deepEqual([r.row(log!.log_id).status, r.row(log!.log_id).message, r.row(log!.log_id).updated_at], ["applied", "done", r.clock.now()]);
    assert.deepEqual(r.finals, [{ action: "start", status: "applied" }]);
    assert.equal(r.tracker.openCount, 0);
    assert.equal(r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, { ...applied, status: "failed" }), null, "late ACK");
    assert.equal(r.row(log!.log_id).status, "applied");
  });

  test("spec §6.4 rule 1: an ACK from another node, another config, or on another ACK topic does not close the command", async () => {
    const r = await rig();
    const other = await dynamicNode(r.s);
    const { requestId, log } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    assert.equal(r.tracker.ack("control_ack", r.configId, other.nodeId, requestId, applied), null, "another node");
    assert.equal(r.tracker.ack("control_ack", other.configId, r.nodeId, requestId, applied), null, "another config");
    for (const wrongTopic of ["info_ack", "detect_ack", "config_push_ack"] as const) {
      assert.equal(r.tracker.ack(wrongTopic, r.configId, r.nodeId, requestId, applied), null, wrongTopic);
    }
    assert.equal(r.row(log!.log_id).status, "pending");
    assert.equal(r.tracker.openCount, 1);
    assert.equal(r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, applied)?.requestId, requestId);
  });

  test("an ignored ACK is logged with its node, request_id, ACK topic and status, and says why: no open command, or a foreign one", async () => {
    const r = await rig();
    const other = await dynamicNode(r.s);
    const { requestId } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    const fields = (w: Warning | undefined) => w && { msg: w.msg, config_id: w.config_id, node_id: w.node_id, request_id: w.request_id, ack: w.ack, status: w.status };
    r.tracker.ack("control_ack", r.configId, r.nodeId, "00000000-0000-4000-8000-000000000000", applied);
    r.tracker.ack("control_ack", r.configId, other.nodeId, requestId, { ...applied, status: "failed" });
    r.tracker.ack("info_ack", r.configId, r.nodeId, requestId, accepted);
    assert.deepEqual(r.warnings.map(fields), [
      { msg: "ACK for no open command ignored (unknown, late or duplicate)", config_id: r.configId, node_id: r.nodeId, request_id: "00000000-0000-4000-8000-000000000000", ack: "control_ack", status: "applied" },
      { msg: "foreign ACK ignored", config_id: r.configId, node_id: other.nodeId, request_id: requestId, ack: "control_ack", status: "failed" },
      { msg: "foreign ACK ignored", config_id: r.configId, node_id: r.nodeId, request_id: requestId, ack: "info_ack", status: "accepted" },
    ]);
    // The matching ACK is not a warning; a second accepted is, as a duplicate.
    r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, accepted);
    assert.equal(r.warnings.length, 3);
    r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, accepted);
    assert.deepEqual(r.warnings.slice(3).map((w) => ({ msg: w.msg, request_id: w.request_id })), [{ msg: "duplicate accepted ACK ignored", request_id: requestId }]);
  });

  test("each command kind is closed by its own ACK topic (config push, info, detect)", async () => {
    const r = await rig();
    const pairs = [
      ["config_push", "config_push_ack", "push_config"],
      ["info", "info_ack", "wg_show"],
      ["detect", "detect_ack", "detect"],
    ] as const;
    for (const [kind, ackKind, action] of pairs) {
      const { requestId } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind, action, payload: {} });
      assert.ok(r.tracker.ack(ackKind, r.configId, r.nodeId, requestId, { status: "applied", message: "", action }), kind);
    }
    assert.equal(r.tracker.openCount, 0);
  });

  test("spec §3.4: failed is final too", async () => {
    const r = await rig();
    const { requestId, log } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "stop", payload: {} });
    assert.ok(r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, { status: "failed", message: "denied", action: "stop" }));
    assert.deepEqual([r.row(log!.log_id).status, r.row(log!.log_id).message], ["failed", "denied"]);
    assert.deepEqual(r.finals, [{ action: "stop", status: "failed" }]);
  });
});

describe("recordFailure: a command that could not be sent at all (spec §2.8, §3.4 failed)", () => {
  test("stores a failed command row without request_id, announces it as created, and reports a failed final with the node, the log row and the command's kind", async () => {
    const r = await rig();
    const push = r.tracker.recordFailure(r.configId, r.nodeId, "push_config", "the node has no staged config");
    assert.ok(push);
    assert.deepEqual(
      { kind: push.kind, action: push.action, status: push.status, message: push.message, request_id: push.request_id },
      { kind: "command", action: "push_config", status: "failed", message: "the node has no staged config", request_id: null },
    );
    assert.equal(r.row(push.log_id).status, "failed");
    assert.deepEqual(r.logEvents, [{ change: "created", log: push }]);
    const stop = r.tracker.recordFailure(r.configId, r.nodeId, "stop", "no broker");
    assert.deepEqual(r.finals, [
      { action: "push_config", status: "failed" },
      { action: "stop", status: "failed" },
    ]);
    assert.deepEqual(
      r.finalCommands.map((c) => ({ requestId: c.requestId, configId: c.configId, nodeId: c.nodeId, kind: c.kind, action: c.action, logId: c.logId, pushed: c.pushed })),
      [
        { requestId: "", configId: r.configId, nodeId: r.nodeId, kind: "config_push", action: "push_config", logId: push.log_id, pushed: null },
        { requestId: "", configId: r.configId, nodeId: r.nodeId, kind: "control", action: "stop", logId: stop!.log_id, pushed: null },
      ],
    );
    assert.equal(r.tracker.openCount, 0, "nothing waits for an ACK");
  });

  test("a reason longer than 4,000 characters is cut to 4,000 plus an ellipsis; one of exactly 4,000 is kept whole", async () => {
    const r = await rig();
    const exact = "x".repeat(4000);
    assert.equal(r.tracker.recordFailure(r.configId, r.nodeId, "stop", exact)?.message, exact);
    const long = `${"y".repeat(4000)}tail`;
    assert.equal(r.tracker.recordFailure(r.configId, r.nodeId, "stop", long)?.message, `${"y".repeat(4000)}…`);
  });

  test("when the row cannot be stored (the node is gone) it answers null, announces nothing, and logs both the failure and why it was not stored", async () => {
    const r = await rig();
    assert.equal(r.tracker.recordFailure(r.configId, "no-such-node", "push_config", "gone"), null);
    assert.deepEqual(r.logEvents, []);
    assert.deepEqual(r.finals, []);
    const [failed, unstored, ...rest] = r.warnings;
    assert.deepEqual(rest, []);
    assert.deepEqual(
      failed && { msg: failed.msg, config_id: failed.config_id, node_id: failed.node_id, action: failed.action, err: failed.err },
      { msg: "command failed before it was sent", config_id: r.configId, node_id: "no-such-node", action: "push_config", err: "gone" },
    );
    assert.deepEqual(
      unstored && { msg: unstored.msg, config_id: unstored.config_id, node_id: unstored.node_id, action: unstored.action },
      { msg: "the failed command could not be logged", config_id: r.configId, node_id: "no-such-node", action: "push_config" },
    );
    assert.match(String(unstored?.err), /FOREIGN KEY constraint failed/, "the store's own error is in the line");
  });

  test("a stored failure logs one warning naming the node, the action and the reason", async () => {
    const r = await rig();
    r.tracker.recordFailure(r.configId, r.nodeId, "stop", "no broker");
    assert.deepEqual(
      r.warnings.map((w) => ({ msg: w.msg, config_id: w.config_id, node_id: w.node_id, action: w.action, err: w.err })),
      [{ msg: "command failed before it was sent", config_id: r.configId, node_id: r.nodeId, action: "stop", err: "no broker" }],
    );
  });
});

describe("timeouts and restart (DESIGN §3: command ACK timeout 60 s, detect 20 s)", () => {
  test("a command without a final ACK is timed_out exactly at 60 s (an accepted ACK does not extend it); a detect at 20 s", async () => {
    const r = await rig();
    const { requestId, log } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "detect", action: "detect", payload: {} });
    r.clock.advance(DETECT_TIMEOUT - 1);
    assert.equal(r.timeouts.length, 0);
    r.clock.advance(1);
    assert.deepEqual(r.timeouts.map((c) => c.kind), ["detect"]);
    r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, accepted);
    r.clock.advance(TIMEOUT - DETECT_TIMEOUT - 1);
    assert.equal(r.row(log!.log_id).status, "accepted");
    r.clock.advance(1);
    assert.deepEqual([r.row(log!.log_id).status, r.row(log!.log_id).message], ["timed_out", "no final ACK before the timeout"]);
    assert.deepEqual(r.timeouts.map((c) => c.kind), ["detect", "control"]);
    assert.deepEqual(r.finals.map((f) => f.status), ["timed_out", "timed_out"]);
    assert.equal(r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, applied), null, "an ACK after the timeout is late");
  });

  test("an applied command's timer is cancelled: nothing happens at 60 s", async () => {
    const r = await rig();
    const { requestId } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    r.tracker.ack("control_ack", r.configId, r.nodeId, requestId, applied);
    r.clock.advance(TIMEOUT * 2);
    assert.deepEqual(r.timeouts, []);
    assert.deepEqual(r.finals.map((f) => f.status), ["applied"]);
  });

  test("stop() cancels every timer and forgets open commands; the rows stay open for the next run", async () => {
    const r = await rig();
    const { log } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    r.tracker.stop();
    assert.equal(r.tracker.openCount, 0);
    r.clock.advance(TIMEOUT * 2);
    assert.equal(r.row(log!.log_id).status, "pending");
    assert.deepEqual(r.timeouts, []);
  });

  test("restart: start() re-arms open commands with the time left, keeps accepted as accepted, maps push_config/wg_show to their ACK topics", async () => {
    const r = await rig();
    const push = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "config_push", action: "push_config", payload: {} });
    const show = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "info", action: "wg_show", payload: {} });
    const ctl = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    r.tracker.ack("control_ack", r.configId, r.nodeId, ctl.requestId, accepted);
    r.clock.advance(20 * SECOND);
    r.tracker.stop();
    // A row without request_id (output) is never re-armed; rows of other runs' nodes are re-armed too.
    const next = restarted(r);
    t_assertOpen(next, r, [push.requestId, show.requestId, ctl.requestId]);
    // A duplicate accepted for the restored accepted command is still a duplicate.
    assert.equal(next.ack("control_ack", r.configId, r.nodeId, ctl.requestId, accepted), null);
    // The restored kinds: the push closes on config_push_ack, the wg_show on info_ack (not on control_ack).
    assert.equal(next.ack("control_ack", r.configId, r.nodeId, push.requestId, { status: "applied", message: "", action: "push_config" }), null);
    assert.ok(next.ack("config_push_ack", r.configId, r.nodeId, push.requestId, { status: "applied", message: "", action: "push_config" }));
    assert.equal(next.ack("control_ack", r.configId, r.nodeId, show.requestId, { status: "applied", message: "", action: "wg_show" }), null);
    // 40 s are left of the 60 s: not timed out 1 ms before, timed out at.
    r.clock.advance(40 * SECOND - 1);
    assert.equal(r.row(ctl.log!.log_id).status, "accepted");
    r.clock.advance(1);
    assert.equal(r.row(ctl.log!.log_id).status, "timed_out");
    assert.equal(r.row(show.log!.log_id).status, "timed_out");
    const restored = r.timeouts.find((c) => c.requestId === ctl.requestId);
    assert.deepEqual(
      restored && { kind: restored.kind, action: restored.action, configId: restored.configId, nodeId: restored.nodeId, logId: restored.logId, pushed: restored.pushed },
      { kind: "control", action: "start", configId: r.configId, nodeId: r.nodeId, logId: ctl.log!.log_id, pushed: null },
    );
    next.stop();
  });

  test("spec §3.4, §6.4 rule 2: a start held for its push and a push held for the host, never published, are closed failed at restart saying so; a released start is re-armed (its row no longer says what it waited for)", async () => {
    const r = await rig();
    const start = { configId: r.configId, nodeId: r.nodeId, kind: "control" as const, action: "start", payload: { action: "start" } };
    const push = { configId: r.configId, nodeId: r.nodeId, kind: "config_push" as const, action: "push_config", payload: {} };
    // One chain published and released: push applied, then the start went out.
    const sentChain = await r.tracker.sendAfter({ command: push }, start, () => "waiting for the first config");
    assert.ok(sentChain);
    r.tracker.ack("config_push_ack", r.configId, r.nodeId, sentChain.firstRequestId, { status: "applied", message: "", action: "push_config" });
    await Promise.resolve();
    assert.equal(r.row(logIdOf(r, sentChain.requestId)).message, "", "a released start's row no longer says it waits");
    // One chain held: the push waits for the host, the start for the push.
    const heldChain = await r.tracker.sendAfter({ command: push, hold: { message: "waiting for the host to connect", timeout: "not sent" } }, start, () => "waiting for the first config");
    assert.ok(heldChain);
    r.tracker.stop();
    const finals: string[] = [];
    const next = restarted(r, (c, status) => finals.push(`${c.action}:${status}`));
    for (const id of [heldChain.firstRequestId, heldChain.requestId]) {
      const row = r.row(logIdOf(r, id));
      assert.equal(row.status, "failed", id);
      assert.match(String(row.message), /^not sent: the service restarted while the command was held \(waiting for .+\); send it again$/);
    }
    assert.deepEqual(finals.sort(), ["push_config:failed", "start:failed"]);
    // The released start is open again and still closes on its ACK.
    assert.ok(next.ack("control_ack", r.configId, r.nodeId, sentChain.requestId, applied));
    next.stop();
  });

  test("restart: a restored pending command takes its first accepted ACK (it is not mistaken for an accepted one)", async () => {
    const r = await rig();
    const ctl = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "stop", payload: { action: "stop" } });
    r.tracker.stop();
    const next = restarted(r);
    const c = next.ack("control_ack", r.configId, r.nodeId, ctl.requestId, { ...accepted, action: "stop" });
    assert.equal(c?.status, "accepted");
    assert.equal(r.row(ctl.log!.log_id).status, "accepted");
    next.stop();
  });

  test("a command whose log row is gone (node deleted, snapshot restored meanwhile) still closes on its ACK, and no view of a missing row is emitted", async () => {
    const r = await rig();
    const ctl = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: { action: "start" } });
    sqliteOf(r.s.server.store).prepare("DELETE FROM control_logs WHERE log_id = ?").run(ctl.log!.log_id);
    const events = r.logEvents.length;
    const c = r.tracker.ack("control_ack", r.configId, r.nodeId, ctl.requestId, applied);
    assert.equal(c?.requestId, ctl.requestId);
    assert.equal(r.tracker.openCount, 0);
    assert.equal(r.logEvents.length, events);
  });

  test("restart: an open config push without a valid stored target (none, or a partial one) is re-armed with a warning naming it; a push with its target and a control command are not", async () => {
    const r = await rig();
    const target = { version: 3, sha: "a".repeat(64), protocol: "wireguard" as const };
    const good = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "config_push", action: "push_config", payload: {}, pushed: target });
    const none = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "config_push", action: "push_config", payload: {} });
    const partial = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "config_push", action: "push_config", payload: {}, pushed: target });
    const ctl = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    const ctlPartial = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "stop", payload: {} });
    const sqlite = sqliteOf(r.s.server.store);
    sqlite.prepare("UPDATE control_logs SET pushed_config_sha256 = NULL WHERE log_id = ?").run(partial.log!.log_id);
    sqlite.prepare("UPDATE control_logs SET pushed_config_version = 7 WHERE log_id = ?").run(ctlPartial.log!.log_id);
    r.tracker.stop();
    assert.equal(r.warnings.length, 0, "sending logs nothing");
    const next = restarted(r);
    const ours = new Set([good, none, partial, ctl, ctlPartial].map((c) => c.requestId));
    const warned = r.warnings.filter((w) => ours.has(String(w.request_id)));
    assert.deepEqual(
      warned.map((w) => ({ msg: w.msg, config_id: w.config_id, node_id: w.node_id, request_id: w.request_id, log_id: w.log_id })),
      [none, partial, ctlPartial].map((c) => ({
        msg: "open config push re-armed without a valid push target: its ACK will not confirm a config",
        config_id: r.configId,
        node_id: r.nodeId,
        request_id: c.requestId,
        log_id: c.log!.log_id,
      })),
    );
    // Each is still re-armed: the good push keeps its target, the others carry none.
    const pushedOf = (requestId: string) => next.ack("config_push_ack", r.configId, r.nodeId, requestId, { status: "applied", message: "", action: "push_config" })?.pushed;
    assert.deepEqual(pushedOf(good.requestId), target);
    assert.equal(pushedOf(none.requestId), null);
    assert.equal(pushedOf(partial.requestId), null);
    next.stop();
  });

  test("restart after the deadline passed: the command times out at once (time left is never negative)", async () => {
    const r = await rig();
    const { log } = await r.tracker.send({ configId: r.configId, nodeId: r.nodeId, kind: "control", action: "start", payload: {} });
    r.tracker.stop();
    r.clock.advance(TIMEOUT * 3);
    const next = restarted(r);
    r.clock.advance(0);
    assert.equal(r.row(log!.log_id).status, "timed_out");
    next.stop();
  });
});

/** The control log row id of a command. */
function logIdOf(r: Rig, requestId: string): number {
  return (sqliteOf(r.s.server.store).prepare("SELECT log_id FROM control_logs WHERE request_id = ?").get(requestId) as { log_id: number }).log_id;
}

function t_assertOpen(tracker: CommandTracker, r: Rig, ids: string[]): void {
  // Every open row in the store is tracked again (other tests' rows included): at least ours.
  assert.ok(tracker.openCount >= ids.length, `open ${tracker.openCount}`);
  for (const id of ids) {
    const row = sqliteOf(r.s.server.store).prepare("SELECT status FROM control_logs WHERE request_id = ?").get(id) as { status: string };
    assert.ok(row.status === "pending" || row.status === "accepted", id);
  }
}

describe("through the real broker (spec §6.2 envelope on the wire)", () => {
  test("a control command reaches the bound agent as a full envelope: type, fresh request_id, empty boot/session ids, sent_at of the service clock", async () => {
    const s = await shared();
    const { configId, nodeId } = await dynamicNode(s);
    const p = await bind(s, configId, nodeId);
    const agent = await connectAgent(s, p);
    try {
      const msg = nextMessage(agent, p.topics.control!);
      const sent = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/control`, { action: "stop" });
      const got = (await msg) as unknown as Envelope;
      assert.deepEqual(
        { ...got, payload: undefined },
        { type: "control", request_id: sent.json.request_id, config_id: configId, node_id: nodeId, boot_id: "", session_id: "", sent_at: isoTime(s.clock.now()), payload: undefined },
      );
    } finally {
      agent.end(true);
    }
  });
});
