/**
 * Webhook channels and the delivery you can trust (docs/alerts.md): Standard Webhooks signatures
 * verified by the `standardwebhooks` library against a real HTTP receiver on loopback, secret
 * rotation, retries with the same `webhook-id` across a receiver outage and a backend restart,
 * `Retry-After`, 410 and failing-too-long disabling, secrets shown once. One service per test,
 * a ManualClock at the wall clock's time, the retry schedule 1 s, 2 s, 5 s.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Webhook } from "standardwebhooks";
import { advance, createChannel, deliveryOf, startAlerts, startReceiver, until } from "./harness.js";

test("a webhook channel's test alert is one POST of {type, timestamp, data} whose signature verifies with the standardwebhooks library; the secret is answered once and never again", async (t) => {
  const rx = await startReceiver(t);
  const h = await startAlerts(t);
  const ch = await createChannel(h, { name: "ops hook", kind: "webhook", url: rx.url });
  assert.match(ch.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.equal(ch.has_secret, true);

  const sent = await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`);
  assert.equal(sent.status, 200, sent.text);
  assert.equal(sent.json.status, "delivered");
  assert.equal(sent.json.attempts, 1);
  assert.equal(sent.json.last_http_status, 200);
  assert.equal(rx.received.length, 1);
  const got = rx.received[0];
  assert.ok(got);
  assert.equal(got.headers["webhook-id"], sent.json.delivery_id, "webhook-id is the delivery's id");
  const payload = new Webhook(ch.secret).verify(got.body, got.headers as Record<string, string>) as { type: string; timestamp: string; data: Record<string, unknown> };
  assert.equal(payload.type, "alert.test");
  assert.deepEqual(Object.keys(payload).sort(), ["data", "timestamp", "type"]);
  assert.equal(payload.data.channel_id, ch.channel_id);
  assert.throws(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString("base64")}`).verify(got.body, got.headers as Record<string, string>), /signature/i, "another secret does not verify");

  for (const path of [`/api/v1/alerts/channels/${ch.channel_id}`, "/api/v1/alerts/channels", "/api/v1/alerts/deliveries"]) {
    const res = await h.req("GET", path);
    assert.equal(res.status, 200);
    assert.ok(!res.text.includes(ch.secret.slice(6)), `${path} does not carry the secret`);
    assert.ok(!res.text.includes('"secret"'), `${path} has no secret field`);
  }
  const patched = await h.req("PATCH", `/api/v1/alerts/channels/${ch.channel_id}`, { name: "ops hook 2" });
  assert.equal(patched.json.secret, undefined, "a PATCH without rotate_secret answers no secret");
  assert.ok(h.logs.every((line) => !line.includes(ch.secret.slice(6))), "the secret is never logged");
  const metrics = await h.server.metrics.render();
  assert.match(metrics, new RegExp(`svc_alert_delivery_attempts_total\\{channel_id="${ch.channel_id}",status="delivered"\\} 1`));
});

test("rotation answers the new secret once; for 24 h every attempt is signed with both secrets, then with the new one only", async (t) => {
  const rx = await startReceiver(t);
  const h = await startAlerts(t);
  const ch = await createChannel(h, { name: "rotating", kind: "webhook", url: rx.url });
  const rotated = await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/rotate-secret`);
  assert.equal(rotated.status, 200, rotated.text);
  const fresh = rotated.json.secret as string;
  assert.match(fresh, /^whsec_/);
  assert.notEqual(fresh, ch.secret);
  assert.ok(rotated.json.previous_secret_until);

  assert.equal((await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`)).json.status, "delivered");
  const during = rx.received[0];
  assert.ok(during);
  assert.equal(String(during.headers["webhook-signature"]).split(" ").length, 2, "two signatures during the grace period");
  new Webhook(fresh).verify(during.body, during.headers as Record<string, string>);
  new Webhook(ch.secret).verify(during.body, during.headers as Record<string, string>);

  await advance(h, 24 * 3600 * 1000 + 1000);
  assert.equal((await h.req("GET", `/api/v1/alerts/channels/${ch.channel_id}`)).json.previous_secret_until, null);
  assert.equal((await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`)).json.status, "delivered");
  const after = rx.received[1];
  assert.ok(after);
  // The clock is now a day ahead of the wall clock, past the library's timestamp tolerance, so
  // the signatures are compared with the library's own signing of the same id, time and body.
  const id = String(after.headers["webhook-id"]);
  const at = new Date(Number(after.headers["webhook-timestamp"]) * 1000);
  assert.equal(after.headers["webhook-signature"], new Webhook(fresh).sign(id, at, after.body), "only the new secret signs");
  assert.ok(!String(after.headers["webhook-signature"]).includes(new Webhook(ch.secret).sign(id, at, after.body).slice(3)));
});

test("a receiver answering 503 while the backend restarts: delivered exactly once, every attempt with the same webhook-id, attempts in the delivery log", async (t) => {
  const rx = await startReceiver(t);
  let h = await startAlerts(t);
  const ch = await createChannel(h, { name: "outage", kind: "webhook", url: rx.url });
  rx.script.push({ status: 503 });
  const first = await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`);
  assert.equal(first.json.status, "pending");
  assert.equal(first.json.last_http_status, 503);
  assert.equal(first.json.attempts, 1);
  assert.equal(Date.parse(first.json.next_attempt_at) - Date.parse(first.json.last_attempt_at), 1000, "the first retry waits 1 s");

  h = await h.restart();
  await advance(h, 1000);
  const delivered = await until(async () => {
    const d = await deliveryOf(h, ch.channel_id);
    return d.status === "delivered" && d;
  }, "delivery after the restart");
  assert.equal(delivered.attempts, 2);
  assert.deepEqual(delivered.history.map((a: { http_status: number }) => a.http_status), [503, 200]);
  assert.equal(rx.received.length, 2);
  assert.deepEqual(rx.received.map((r) => r.headers["webhook-id"]), [first.json.delivery_id, first.json.delivery_id]);
  new Webhook(ch.secret).verify(rx.received[1]?.body ?? "", rx.received[1]?.headers as Record<string, string>);

  // Nothing more, ever: another restart and a day of time send nothing again.
  h = await h.restart();
  await advance(h, 24 * 3600 * 1000);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 2, "nothing is sent twice once a 2xx was recorded");
});

test("an attempt in flight when the backend stops is sent again after the restart with the same webhook-id (at least once)", async (t) => {
  const rx = await startReceiver(t);
  let h = await startAlerts(t);
  const ch = await createChannel(h, { name: "hanging", kind: "webhook", url: rx.url });
  rx.script.push({ status: 0 });
  const answered = h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`);
  await until(() => rx.received.length === 1, "the first attempt in flight");
  h = await h.restart();
  const first = await answered;
  assert.equal(first.json.attempts, 0, "the attempt cut short recorded nothing");
  const delivered = await until(async () => {
    const d = await deliveryOf(h, ch.channel_id);
    return d.status === "delivered" && d;
  }, "delivery after the restart");
  assert.equal(delivered.attempts, 1);
  assert.equal(rx.received.length, 2);
  assert.deepEqual(rx.received.map((r) => r.headers["webhook-id"]), [first.json.delivery_id, first.json.delivery_id]);
});

test("429 with Retry-After: the next attempt waits what the receiver asked, not the schedule's 1 s", async (t) => {
  const rx = await startReceiver(t);
  const h = await startAlerts(t);
  const ch = await createChannel(h, { name: "busy", kind: "webhook", url: rx.url });
  rx.script.push({ status: 429, headers: { "retry-after": "30" } });
  const first = await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`);
  assert.equal(first.json.last_http_status, 429);
  assert.equal(Date.parse(first.json.next_attempt_at) - Date.parse(first.json.last_attempt_at), 30_000);
  await advance(h, 5000);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 1, "no attempt before Retry-After");
  await advance(h, 25_000);
  await until(() => rx.received.length === 2, "the retry at 30 s");
  await until(async () => (await deliveryOf(h, ch.channel_id)).status === "delivered", "delivered");
});

test("410 Gone disables the channel (why and when on the channel, an app event, the metric, an audit entry by the service); a disabled channel's test is refused; enabling it again clears the reason", async (t) => {
  const rx = await startReceiver(t);
  const h = await startAlerts(t);
  const disabled: string[] = [];
  h.server.events.on("alert.channel_disabled", (id, reason) => disabled.push(`${id}: ${reason}`));
  const ch = await createChannel(h, { name: "gone", kind: "webhook", url: rx.url });
  rx.script.push({ status: 410 });
  const sent = await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`);
  assert.equal(sent.json.status, "failed");
  assert.match(sent.json.last_error, /410/);
  const view = (await h.req("GET", `/api/v1/alerts/channels/${ch.channel_id}`)).json;
  assert.equal(view.enabled, false);
  assert.match(view.disabled_reason, /410 Gone/);
  assert.ok(view.disabled_at);
  assert.equal(disabled.length, 1);
  assert.match(await h.server.metrics.render(), new RegExp(`svc_alert_channels_disabled_total\\{channel_id="${ch.channel_id}"\\} 1`));
  const audit = (await h.req("GET", "/api/v1/audit?action=alert.channel_disabled")).json.items;
  assert.equal(audit.length, 1);
  assert.deepEqual([audit[0].actor.kind, audit[0].target, audit[0].outcome], ["system", { type: "alert_channel", id: ch.channel_id, config_id: null }, "ok"]);
  assert.match(audit[0].changes.reason, /410 Gone/);
  assert.equal((await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`)).status, 409);
  const enabled = await h.req("PATCH", `/api/v1/alerts/channels/${ch.channel_id}`, { enabled: true });
  assert.equal(enabled.json.enabled, true);
  assert.equal(enabled.json.disabled_reason, null);
  assert.equal((await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`)).json.status, "delivered");
});

test("a channel failing for SVC_ALERTS_DISABLE_AFTER_H is disabled then, not before; its waiting delivery is kept, unsent while disabled, and delivered once the channel is enabled again", async (t) => {
  const rx = await startReceiver(t);
  const hour = 3600 * 1000;
  const h = await startAlerts(t, { alertsDisableAfterMs: 3 * hour, alertsRetryScheduleMs: Array.from({ length: 10 }, () => hour) });
  const ch = await createChannel(h, { name: "down", kind: "webhook", url: rx.url });
  for (let i = 0; i < 10; i++) rx.script.push({ status: 500 });
  assert.equal((await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`)).json.status, "pending");
  assert.ok((await h.req("GET", `/api/v1/alerts/channels/${ch.channel_id}`)).json.failing_since);
  for (let i = 1; i <= 2; i++) {
    await advance(h, hour);
    await until(() => rx.received.length === i + 1, `attempt ${i + 1}`);
    await until(async () => (await deliveryOf(h, ch.channel_id)).attempts === i + 1, `attempt ${i + 1} recorded`);
  }
  assert.equal((await h.req("GET", `/api/v1/alerts/channels/${ch.channel_id}`)).json.enabled, true, "2 h of failing: still enabled");
  await advance(h, hour);
  const view = await until(async () => {
    const v = (await h.req("GET", `/api/v1/alerts/channels/${ch.channel_id}`)).json;
    return v.enabled === false && v;
  }, "the channel disabled after 3 h");
  assert.match(view.disabled_reason, /failed for 3 h/);
  const waiting = await deliveryOf(h, ch.channel_id);
  assert.equal(waiting.status, "pending", "the delivery waits for the channel, not lost");
  await advance(h, 5 * hour);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(rx.received.length, 4, "a disabled channel is not attempted");
  rx.script.length = 0;
  await h.req("PATCH", `/api/v1/alerts/channels/${ch.channel_id}`, { enabled: true });
  await until(async () => (await deliveryOf(h, ch.channel_id)).status === "delivered", "delivered once enabled again");
  assert.equal((await h.req("GET", `/api/v1/alerts/channels/${ch.channel_id}`)).json.failing_since, null);
});
