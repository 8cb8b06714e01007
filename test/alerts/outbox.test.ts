/**
 * The outbox (docs/alerts.md "Delivery"): an alert enqueued inside a writer's transaction is sent
 * only if that transaction commits, through the Kysely write path (`AlertsService.enqueue`) and
 * through the hot path's prepared statement (`createAlertOutboxStatements`) alike.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { isoTime } from "../../src/lib/clock.js";
import type { AlertMessage } from "../../src/protocol/alerts.schema.js";
import { createAlertOutboxStatements } from "../../src/store/alerts.repository.js";
import { sqliteOf } from "../../src/store/connection.js";
import { createChannel, deliveryOf, startAlerts, startReceiver, until } from "./harness.js";

test("an alert enqueued in a transaction that rolls back is never sent; committed, it is delivered once, by either write path", async (t) => {
  const rx = await startReceiver(t);
  const h = await startAlerts(t);
  const ch = await createChannel(h, { name: "outbox", kind: "webhook", url: rx.url });
  const message = (type: string): AlertMessage => ({ type, timestamp: isoTime(h.clock.now()), title: type, text: "a node went offline", severity: "warning", data: { node_id: "node-a" } });
  const { store, alerts } = h.server;

  await assert.rejects(
    store.transaction(async (trx, afterCommit) => {
      await alerts.enqueue(trx, afterCommit, [ch.channel_id], message("node.offline"));
      throw new Error("the state change failed");
    }),
    /the state change failed/,
  );
  const [id] = await store.transaction((trx, afterCommit) => alerts.enqueue(trx, afterCommit, [ch.channel_id], message("node.online")));
  await until(async () => (await deliveryOf(h, ch.channel_id)).status === "delivered", "the committed alert delivered");
  assert.equal(rx.received.length, 1);
  assert.equal(rx.received[0]?.headers["webhook-id"], id);
  assert.equal(JSON.parse(rx.received[0]?.body ?? "{}").type, "node.online");

  // The hot path: a raw statement inside the writer's own transaction, the worker kicked after its commit.
  const outbox = createAlertOutboxStatements(store);
  const sqlite = sqliteOf(store);
  const row = (deliveryId: string, type: string) => ({
    delivery_id: deliveryId, channel_id: ch.channel_id, type, message: JSON.stringify(message(type)), status: "pending" as const, attempts: 0,
    next_attempt_at: h.clock.now(), last_attempt_at: null, last_http_status: null, last_error: null, created_at: h.clock.now(), updated_at: h.clock.now(),
  });
  await store.whenIdle(() => {
    assert.throws(() => sqlite.transaction(() => {
      outbox.enqueue(row("msg-rolled-back", "node.dropped"));
      throw new Error("group commit failed");
    })());
    sqlite.transaction(() => outbox.enqueue(row("msg-committed", "command.failed")))();
  });
  alerts.kick();
  await until(() => rx.received.length === 2, "the hot path's alert delivered");
  assert.equal(rx.received[1]?.headers["webhook-id"], "msg-committed");
  const log = (await h.req("GET", "/api/v1/alerts/deliveries")).json.items.map((d: { delivery_id: string }) => d.delivery_id);
  assert.ok(!log.includes("msg-rolled-back"), "the rolled-back alert was never stored");
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 2, "nothing rolled back was sent");
});
