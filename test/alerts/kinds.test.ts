/**
 * Slack, ntfy and email channels (docs/alerts.md "Channels"): the request shapes against a real
 * HTTP receiver on loopback, and email through a real `smtp-server` with a password that is never
 * answered and never logged. Also the delivery log's filters and pages, and the SSE events.
 */
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { SMTPServer } from "smtp-server";
import { advance, createChannel, startAlerts, startReceiver } from "./harness.js";

test("slack posts {text, blocks}; ntfy posts the text to the topic URL with Title, Priority and Tags; a Slack URL (a credential) is never answered", async (t) => {
  const rx = await startReceiver(t);
  const h = await startAlerts(t);
  const slackUrl = `${rx.url}/services/T000/B000/very-secret-token`;
  const slack = await createChannel(h, { name: "slack", kind: "slack", url: slackUrl });
  assert.equal(slack.secret, undefined);
  assert.equal(slack.target.url, `${new URL(rx.url).origin}/…`);
  assert.equal((await h.req("POST", `/api/v1/alerts/channels/${slack.channel_id}/test`)).json.status, "delivered");
  const s = rx.received[0];
  assert.ok(s);
  assert.equal(s.url, "/hook/services/T000/B000/very-secret-token");
  assert.equal(s.headers["content-type"], "application/json");
  const body = JSON.parse(s.body) as { text: string; blocks: Array<{ type: string; text?: { type: string; text: string } }> };
  assert.deepEqual(Object.keys(body).sort(), ["blocks", "text"]);
  assert.match(body.text, /Test alert to slack/);
  assert.equal(body.blocks[0]?.type, "section");
  assert.equal(body.blocks[0]?.text?.type, "mrkdwn");
  for (const path of ["/api/v1/alerts/channels", `/api/v1/alerts/channels/${slack.channel_id}`]) {
    assert.ok(!(await h.req("GET", path)).text.includes("very-secret-token"), `${path} does not show the Slack URL's path`);
  }

  await advance(h, 1000); // the delivery log is ordered by creation time
  const ntfy = await createChannel(h, { name: "ntfy ünïcode", kind: "ntfy", url: `${rx.url}/mesh-alerts` });
  assert.equal((await h.req("POST", `/api/v1/alerts/channels/${ntfy.channel_id}/test`)).json.status, "delivered");
  const n = rx.received[1];
  assert.ok(n);
  assert.equal(n.method, "POST");
  assert.equal(n.url, "/hook/mesh-alerts");
  assert.match(n.body, /This is a test of the alert channel "ntfy ünïcode"/);
  const title = String(n.headers.title);
  assert.match(title, /^=\?UTF-8\?B\?.+\?=$/, "a non-ASCII title is RFC 2047 encoded");
  assert.equal(Buffer.from(title.slice(10, -2), "base64").toString("utf8"), "Test alert to ntfy ünïcode");
  assert.equal(n.headers.priority, "default");
  assert.equal(n.headers.tags, "information_source,alert.test");

  // The delivery log: filters, a page and its cursor.
  const all = (await h.req("GET", "/api/v1/alerts/deliveries?limit=1")).json;
  assert.equal(all.items.length, 1);
  assert.equal(all.items[0].channel_id, ntfy.channel_id, "newest first");
  const next = (await h.req("GET", `/api/v1/alerts/deliveries?limit=1&cursor=${all.next_cursor}`)).json;
  assert.equal(next.items[0].channel_id, slack.channel_id);
  assert.equal(next.next_cursor, null);
  assert.equal((await h.req("GET", "/api/v1/alerts/deliveries?status=failed")).json.items.length, 0);
  assert.equal((await h.req("GET", "/api/v1/alerts/deliveries?cursor=bogus")).status, 400);
});

test("email goes through a real SMTP server with the channel's user and password; the password is never answered nor logged", async (t) => {
  const password = "smtp-pässword-never-shown-9f3c";
  const mails: Array<{ user: string; from: string; to: string[]; data: string }> = [];
  const smtp = new SMTPServer({
    authOptional: false,
    allowInsecureAuth: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.username === "svc" && auth.password === password) cb(null, { user: "svc" });
      else cb(new Error("Invalid username or password"));
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        mails.push({ user: String(session.user), from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "", to: session.envelope.rcptTo.map((r) => r.address), data: Buffer.concat(chunks).toString("utf8") });
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => smtp.close(() => resolve())));
  const port = (smtp.server.address() as AddressInfo).port;
  const h = await startAlerts(t);
  const sse: string[] = [];
  const publish = h.server.hub.publish.bind(h.server.hub);
  h.server.hub.publish = ((type: string, payload: unknown) => {
    sse.push(`${type} ${JSON.stringify(payload)}`);
    publish(type as never, payload as never);
  }) as typeof h.server.hub.publish;

  const ch = await createChannel(h, { name: "mail", kind: "email", host: "127.0.0.1", port, tls_mode: "none", username: "svc", password, from: "svc@example.org", to: ["ops@example.org", "oncall@example.org"] });
  assert.equal(ch.has_secret, true);
  assert.equal(ch.secret, undefined, "an SMTP password is not answered back");
  const sent = await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`);
  assert.equal(sent.json.status, "delivered", sent.text);
  assert.equal(sent.json.last_http_status, 250);
  assert.equal(mails.length, 1);
  assert.equal(mails[0]?.user, "svc");
  assert.deepEqual(mails[0]?.to, ["ops@example.org", "oncall@example.org"]);
  assert.match(mails[0]?.data ?? "", /Subject: Test alert to mail/);

  const wrong = await h.req("PATCH", `/api/v1/alerts/channels/${ch.channel_id}`, { password: "a wrong one" });
  assert.equal(wrong.status, 200);
  const refused = await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`);
  assert.equal(refused.json.status, "pending");
  assert.match(refused.json.last_error, /SMTP EAUTH/);
  assert.equal(refused.json.last_http_status, 535);

  const answers = [(await h.req("GET", "/api/v1/alerts/channels")).text, (await h.req("GET", `/api/v1/alerts/channels/${ch.channel_id}`)).text, (await h.req("GET", "/api/v1/alerts/deliveries")).text, wrong.text, ...sse];
  for (const text of answers) assert.ok(!text.includes(password) && !text.includes("a wrong one"), "no answer or SSE event carries the password");
  assert.ok(h.logs.length > 0, "the log was captured");
  assert.ok(h.logs.every((line) => !line.includes(password) && !line.includes("a wrong one")), "the password is never logged");
  assert.ok(sse.some((e) => e.startsWith("alert.channel.updated ")), "channel changes are SSE events");
  assert.ok(sse.some((e) => e.startsWith("alert.delivery.updated ") && e.includes('"status":"delivered"')), "deliveries are SSE events");
});
