/**
 * Safe targets (docs/alerts.md "Safe targets"): internal and metadata addresses are refused on
 * the address the target resolves to at send time, the connection goes to that checked address,
 * and redirects are not followed. A refusal is a failed attempt with its reason in the delivery log.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { refusalReason, systemLookup, type AddressLookup } from "../../src/services/alerts/safe-target.js";
import { createChannel, startAlerts, startReceiver } from "./harness.js";

/** Names the test's resolver answers itself; anything else goes to the system's (`localhost`). */
const NAMES: Record<string, Array<{ address: string; family: number }>> = {
  "metadata.test": [{ address: "169.254.169.254", family: 4 }],
  "lan.test": [{ address: "10.1.2.3", family: 4 }],
  "ula.test": [{ address: "fd12:3456::1", family: 6 }],
  "mixed.test": [{ address: "93.184.216.34", family: 4 }, { address: "192.168.1.10", family: 4 }],
  "pinned.test": [{ address: "127.0.0.1", family: 4 }],
};
const lookup: AddressLookup = async (host) => NAMES[host] ?? systemLookup(host);

test("refused targets: literal internal and metadata addresses, names that resolve to them, by email too: each a failed attempt with the reason, nothing connected", async (t) => {
  const rx = await startReceiver(t);
  const port = new URL(rx.url).port;
  const h = await startAlerts(t, { alertsAllowPrivateTargets: false }, { alerts: { lookup } });
  const table: Array<[string, RegExp]> = [
    [`http://127.0.0.1:${port}/hook`, /127\.0\.0\.1 is a loopback address/],
    [`http://[::1]:${port}/hook`, /::1 is a loopback address/],
    [`http://[::ffff:127.0.0.1]:${port}/hook`, /loopback/],
    [`http://localhost:${port}/hook`, /localhost resolves to .* loopback/],
    ["http://10.0.0.5/", /private \(RFC 1918\)/],
    ["http://172.16.3.4/", /private/],
    ["http://192.168.1.1/", /private/],
    ["http://100.64.0.1/", /carrier-grade NAT/],
    ["http://169.254.169.254/latest/meta-data/", /cloud metadata/],
    ["http://[fd00:ec2::254]/", /cloud metadata/],
    ["http://[fe80::1]/", /link-local/],
    ["http://[fd12::1]/", /unique-local/],
    ["http://224.0.0.1/", /multicast/],
    ["http://0.0.0.0/", /unspecified/],
    ["http://metadata.test/", /metadata\.test resolves to 169\.254\.169\.254 is a cloud metadata address/],
    ["http://lan.test/", /lan\.test resolves to 10\.1\.2\.3/],
    ["http://ula.test/", /unique-local/],
    ["http://mixed.test/", /mixed\.test resolves to 192\.168\.1\.10/],
  ];
  let n = 0;
  for (const [url, reason] of table) {
    const ch = await createChannel(h, { name: `t${n++}`, kind: "webhook", url });
    const sent = await h.req("POST", `/api/v1/alerts/channels/${ch.channel_id}/test`);
    assert.equal(sent.status, 200, sent.text);
    assert.equal(sent.json.attempts, 1, url);
    assert.equal(sent.json.last_http_status, null, url);
    assert.match(sent.json.last_error, /^refused target: /, url);
    assert.match(sent.json.last_error, reason, url);
    assert.equal(sent.json.history[0].error, sent.json.last_error, "the reason is in the delivery log");
  }
  const mail = await createChannel(h, { name: "mail", kind: "email", host: "lan.test", port: 25, tls_mode: "none", from: "svc@example.org", to: ["ops@example.org"] });
  const mailed = await h.req("POST", `/api/v1/alerts/channels/${mail.channel_id}/test`);
  assert.match(mailed.json.last_error, /refused target: lan\.test resolves to 10\.1\.2\.3/);
  assert.equal(rx.received.length, 0, "nothing reached the loopback receiver");
});

test("with SVC_ALERTS_ALLOW_PRIVATE_TARGETS=true loopback is allowed but metadata is not; the connection goes to the address the check saw; a redirect is not followed", async (t) => {
  const rx = await startReceiver(t);
  const port = new URL(rx.url).port;
  const h = await startAlerts(t, { alertsAllowPrivateTargets: true }, { alerts: { lookup } });
  const meta = await createChannel(h, { name: "meta", kind: "webhook", url: "http://metadata.test/" });
  assert.match((await h.req("POST", `/api/v1/alerts/channels/${meta.channel_id}/test`)).json.last_error, /cloud metadata/);

  // pinned.test exists only in the test's resolver: the request reaching the receiver went to the checked address.
  const pinned = await createChannel(h, { name: "pinned", kind: "webhook", url: `http://pinned.test:${port}/hook` });
  assert.equal((await h.req("POST", `/api/v1/alerts/channels/${pinned.channel_id}/test`)).json.status, "delivered");
  assert.equal(rx.received[0]?.headers.host, `pinned.test:${port}`);

  rx.script.push({ status: 302, headers: { location: "http://169.254.169.254/latest/meta-data/" } });
  const redirected = await createChannel(h, { name: "redirect", kind: "webhook", url: rx.url });
  const sent = await h.req("POST", `/api/v1/alerts/channels/${redirected.channel_id}/test`);
  assert.equal(sent.json.status, "pending", "a redirect is a failed attempt");
  assert.equal(sent.json.last_http_status, 302);
  assert.match(sent.json.last_error, /redirect to http:\/\/169\.254\.169\.254\/latest\/meta-data\/ not followed/);
  assert.equal(rx.received.length, 2, "one request for the redirect, none followed");
});

test("refusalReason: the ranges by address, IPv4-mapped and NAT64 addresses judged by their IPv4 address, public addresses allowed", () => {
  for (const ip of ["93.184.216.34", "2606:4700::1111", "8.8.8.8"]) assert.equal(refusalReason(ip, false), undefined, ip);
  for (const ip of ["127.0.0.1", "10.0.0.1", "::1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "fec0::1", "255.255.255.255", "240.0.0.1"]) assert.ok(refusalReason(ip, false), ip);
  assert.equal(refusalReason("10.0.0.1", true), undefined, "private allowed when asked");
  assert.match(refusalReason("169.254.169.254", true) ?? "", /metadata/, "metadata never");
  assert.match(refusalReason("::ffff:169.254.169.254", true) ?? "", /metadata/);
  assert.match(refusalReason("ff02::1", true) ?? "", /multicast/);
});
