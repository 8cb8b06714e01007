import assert from "node:assert/strict";
import { once } from "node:events";
import { test, type TestContext } from "node:test";
import { Aedes } from "aedes";
import { CommandTracker, type ControlLogView, type OpenCommand } from "../../src/actors/commands.js";
import { ManualClock } from "../../src/lib/clock.js";
import type { Envelope } from "../../src/protocol/envelope.schema.js";
import { nodeTopic } from "../../src/protocol/topics.js";
import { listOpenCommandLogs } from "../../src/store/commands.repository.js";
import type { ControlLogRow } from "../../src/store/schema.js";
import { CONFIG, log, openStores, seedNodes, tempDbFile } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * The command tracker on its own (src/actors/commands.ts): a real SQLite file through `Store`,
 * commands published through a real aedes broker (in-process, as the embedded broker's backend
 * link publishes), an injected ManualClock for the timeout. What it promises (spec §2.8, §3.4,
 * §6.4 rules 1-2): the control log row is written `pending` before the command is published;
 * only an ACK with the same `request_id`, node and ACK kind moves it (accepted → applied |
 * failed); no final ACK within the timeout ends it `timed_out`; anything else changes nothing.
 */

const TIMEOUT_MS = 60_000;
const NODE = "node-a";
const OTHER = "node-b";

interface Delivered {
  topic: string;
  envelope: Envelope;
  /** The open command rows a second connection saw when the broker delivered the command. */
  openRowsAtDelivery: ControlLogRow[];
}

async function openHarness(t: TestContext) {
  const { store, reader, close } = await openStores(tempDbFile(t));
  await seedNodes(store, [NODE, OTHER]);
  const clock = new ManualClock();
  const broker = await Aedes.createBroker();
  const delivered: Delivered[] = [];
  const deliveries: Array<() => void> = [];
  await new Promise<void>((resolve) =>
    broker.subscribe(
      "svc/#",
      (packet, done) => {
        delivered.push({
          topic: packet.topic,
          envelope: JSON.parse(packet.payload.toString()) as Envelope,
          openRowsAtDelivery: listOpenCommandLogs(sqliteOf(reader)),
        });
        for (const wake of deliveries.splice(0)) wake();
        done();
      },
      () => resolve(),
    ),
  );
  const logs: Array<{ change: "created" | "updated"; log: ControlLogView }> = [];
  const timeouts: OpenCommand[] = [];
  const finals: Array<[string, string]> = [];
  const tracker = new CommandTracker({
    store,
    clock,
    log,
    timeoutMs: TIMEOUT_MS,
    detectTimeoutMs: 20_000,
    publish: (topic, envelope) =>
      new Promise<void>((resolve, reject) =>
        broker.publish({ cmd: "publish", topic, payload: Buffer.from(JSON.stringify(envelope)), qos: 1, retain: false, dup: false }, (err) =>
          err ? reject(err) : resolve(),
        ),
      ),
    onLog: (change, view) => logs.push({ change, log: view }),
    onTimeout: (command) => timeouts.push(command),
    onFinal: (command, status) => finals.push([command.requestId, status]),
  });
  t.after(async () => {
    tracker.stop();
    broker.close();
    await close();
  });
  /** Sends a control command to `node` and waits until the broker has delivered it. */
  const sendControl = async (node = NODE) => {
    const arrived = new Promise<void>((resolve) => deliveries.push(resolve));
    const sent = await tracker.send({ configId: CONFIG, nodeId: node, kind: "control", action: "start", payload: { action: "start", tunnel_protocol: "wireguard", interface_name: "svc0" } });
    await arrived;
    return sent;
  };
  /** Status of each command row still open, as the committed store holds it. */
  const openRows = () => new Map(listOpenCommandLogs(sqliteOf(reader)).map((r) => [r.request_id, r.status]));
  return { store, reader, clock, broker, tracker, delivered, logs, timeouts, finals, sendControl, openRows };
}

const ack = (status: "accepted" | "applied" | "failed", message = "") => ({ status, message, action: "start" });

test("spec §2.8, §6.4 rule 2: the control log row is stored `pending` (and control.log.created emitted) before the command is published, under the envelope's request_id", async (t) => {
  const h = await openHarness(t);
  const { requestId, log } = await h.sendControl();

  assert.equal(h.delivered.length, 1);
  const [d] = h.delivered;
  assert.equal(d!.topic, nodeTopic(CONFIG, NODE, "control"));
  assert.equal(d!.envelope.request_id, requestId);
  assert.deepEqual(
    d!.openRowsAtDelivery.map((r) => [r.request_id, r.node_id, r.action, r.status]),
    [[requestId, NODE, "start", "pending"]],
    "committed before the broker delivered the command",
  );
  assert.deepEqual(h.logs.map((l) => [l.change, l.log.status]), [["created", "pending"]]);
  assert.equal(log?.request_id, requestId);
  assert.equal(h.tracker.openCount, 1);
});

test("spec §3.4: an ACK with the command's request_id moves it accepted → applied, and closes it; the same for accepted → failed with its message", async (t) => {
  const h = await openHarness(t);
  const first = await h.sendControl();
  assert.ok(h.tracker.ack("control_ack", CONFIG, NODE, first.requestId, ack("accepted")));
  assert.equal(h.openRows().get(first.requestId), "accepted");
  assert.ok(h.tracker.ack("control_ack", CONFIG, NODE, first.requestId, ack("applied", "started")));
  assert.equal(h.openRows().has(first.requestId), false, "closed");
  assert.deepEqual(h.logs.filter((l) => l.change === "updated").map((l) => [l.log.status, l.log.message]), [["accepted", ""], ["applied", "started"]]);

  const second = await h.sendControl();
  assert.ok(h.tracker.ack("control_ack", CONFIG, NODE, second.requestId, ack("failed", "wg-quick: no such interface")));
  assert.equal(h.openRows().has(second.requestId), false);
  assert.deepEqual(h.logs.at(-1)?.log.status, "failed");
  assert.deepEqual(h.logs.at(-1)?.log.message, "wg-quick: no such interface");
  assert.deepEqual(h.finals, [[first.requestId, "applied"], [second.requestId, "failed"]]);
  assert.equal(h.tracker.openCount, 0);
});

test("spec §3.4, DESIGN §3 command ACK timeout: with no final ACK the command ends timed_out exactly at the timeout on the injected clock; a late ACK then changes nothing", async (t) => {
  const h = await openHarness(t);
  const { requestId } = await h.sendControl();
  h.tracker.ack("control_ack", CONFIG, NODE, requestId, ack("accepted"));

  h.clock.advance(TIMEOUT_MS - 1);
  assert.equal(h.openRows().get(requestId), "accepted", "1 ms before the timeout");
  assert.equal(h.timeouts.length, 0);

  h.clock.advance(1);
  assert.equal(h.openRows().has(requestId), false);
  assert.deepEqual(h.logs.at(-1)?.log.status, "timed_out");
  assert.deepEqual(h.timeouts.map((c) => c.requestId), [requestId]);
  const logsBefore = h.logs.length;

  assert.equal(h.tracker.ack("control_ack", CONFIG, NODE, requestId, ack("applied")), null, "late ACK");
  assert.equal(h.logs.length, logsBefore, "no row written");
  assert.deepEqual(h.finals, [[requestId, "timed_out"]]);
});

test("spec §3.4 'closed only by an ACK with the same request_id': ACKs from another node, on another ACK topic, or for an unknown request_id change nothing; the right ACK still closes it", async (t) => {
  const h = await openHarness(t);
  const { requestId } = await h.sendControl();
  const logsBefore = h.logs.length;

  assert.equal(h.tracker.ack("control_ack", CONFIG, OTHER, requestId, ack("applied")), null, "another node");
  assert.equal(h.tracker.ack("control_ack", "cfg-2", NODE, requestId, ack("applied")), null, "another config");
  assert.equal(h.tracker.ack("info_ack", CONFIG, NODE, requestId, ack("applied")), null, "another ACK kind");
  assert.equal(h.tracker.ack("control_ack", CONFIG, NODE, "9b2f0d7e-0000-4000-8000-000000000000", ack("applied")), null, "unknown request_id");
  assert.equal(h.openRows().get(requestId), "pending");
  assert.equal(h.logs.length, logsBefore);
  assert.equal(h.tracker.openCount, 1);

  assert.ok(h.tracker.ack("control_ack", CONFIG, NODE, requestId, ack("applied")));
  assert.equal(h.tracker.ack("control_ack", CONFIG, NODE, requestId, ack("applied")), null, "duplicate final ACK");
  assert.deepEqual(h.finals, [[requestId, "applied"]]);
});

test("spec §6.4 rule 8: a detect is tracked but writes no control log row; it times out at the detect timeout", async (t) => {
  const h = await openHarness(t);
  const arrived = once(h.broker, "publish");
  const { requestId, log: row } = await h.tracker.send({ configId: CONFIG, nodeId: NODE, kind: "detect", action: "detect", payload: {} });
  await arrived;
  assert.equal(row, null);
  assert.equal(h.logs.length, 0);
  assert.equal(h.openRows().size, 0);
  assert.equal(h.tracker.openCount, 1);
  h.clock.advance(20_000 - 1);
  assert.equal(h.tracker.openCount, 1, "1 ms before the detect timeout");
  h.clock.advance(1);
  assert.deepEqual(h.timeouts.map((c) => c.requestId), [requestId]);
  assert.equal(h.tracker.openCount, 0);
});
