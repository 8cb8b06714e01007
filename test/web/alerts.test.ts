/**
 * The Alerts page (docs/alerts.md, docs/console.md): an admin creates a webhook channel against a
 * real HTTP receiver on loopback, sees its signing secret once, presses Test and sees the
 * receiver's answer; a receiver answering 503 shows a pending delivery with the failed attempt
 * in the log, which turns delivered live when the retry succeeds; email channels show their
 * SMTP target without the password; disable, edit, rotate, delete; the log's filters live in the
 * URL and older deliveries load by cursor; rules (event in words, hold-off, scope, channels by
 * name) made here or elsewhere show live, a taken name is refused in words, edit, disable, delete. What a viewer sees is walked by roles.test.ts.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { Webhook } from "standardwebhooks";
import { startReceiver } from "../alerts/harness.js";
import type { Locator } from "playwright-core";
import { clipboardText, expectAccessible, expectText, login, screenshot, startConsole, VIEWPORTS, waitLive } from "./harness.js";

/** Waits until a delivery row's cells from Status on (Status, Attempts, Last HTTP status, Last error, Next attempt) show `expected`. */
async function expectCells(row: Locator, expected: string[]): Promise<void> {
  for (const [i, text] of expected.entries()) await expectText(row.getByRole("cell").nth(3 + i), text);
}

test("Alerts page: a webhook channel's secret once, Test against a real receiver (200, then 503 retried live), the delivery log with attempts, filters and pages; email, disable, edit, rotate, delete; rules made, shown live, edited, disabled, deleted", { timeout: 60_000 }, async (t) => {
  const ok = await startReceiver(t);
  const flaky = await startReceiver(t);
  const h = await startConsole(t, { alertsAllowPrivateTargets: true, alertsRetryScheduleMs: [1000, 2000, 5000] });
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Alerts", exact: true }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "Alerts");
  await page.getByText("No channels yet").waitFor();

  // A webhook channel: its signing secret is shown once, with Copy.
  await page.getByLabel("Name", { exact: true }).fill("ops hook");
  await page.getByLabel("Receiver URL").fill(ok.url);
  await page.getByRole("button", { name: "Create channel" }).click();
  const shown = page.getByLabel("Webhook signing secret");
  await expectText(shown, /^whsec_[A-Za-z0-9+/]{43}=$/);
  const secret = (await shown.innerText()).trim();
  await page.getByRole("button", { name: "Copy signing secret" }).click();
  assert.equal(await clipboardText(page), secret);
  const channels = page.getByRole("table", { name: "Alert channels" });
  const row = (name: string) => channels.getByRole("row").filter({ has: page.getByRole("rowheader", { name, exact: true }) });
  await expectText(row("ops hook").getByRole("cell").nth(1), ok.url);
  await page.getByRole("button", { name: "Done, I have copied it" }).click();
  await shown.waitFor({ state: "detached" });
  await page.reload();
  await row("ops hook").waitFor();
  assert.ok(!(await page.locator("body").innerText()).includes(secret.slice(6)), "the secret is never shown again");

  // Test: one signed POST reaches the receiver; the page shows its outcome and the log its row.
  await page.getByRole("button", { name: "Test ops hook" }).click();
  await expectText(page.getByRole("status", { name: "Test of ops hook" }), /^Test alert: delivered HTTP 200$/);
  const got = ok.received[0];
  assert.ok(got, "the receiver got the test alert");
  const id = String(got.headers["webhook-id"]);
  const at = new Date(Number(got.headers["webhook-timestamp"]) * 1000);
  assert.equal(got.headers["webhook-signature"], new Webhook(secret).sign(id, at, got.body), "signed with the secret the page showed");
  const log = page.getByRole("table", { name: "Alert deliveries, newest first" });
  const delivery = (channel: string) => log.getByRole("row").filter({ has: page.getByRole("cell", { name: channel, exact: true }) });
  await expectCells(delivery("ops hook").first(), ["delivered", "1", "200", "—", "—"]);

  // A channel made elsewhere appears live; its receiver answers 503: the attempt is in the log, pending.
  flaky.script.push({ status: 503 });
  await h.api("POST", "/api/v1/alerts/channels", { name: "flaky hook", kind: "webhook", url: flaky.url });
  await page.getByRole("button", { name: "Test flaky hook" }).click();
  await expectText(page.getByRole("status", { name: "Test of flaky hook" }), /^Test alert: pending HTTP 503 — HTTP 503 Service Unavailable — retrying just now$/);
  await expectText(row("flaky hook").getByRole("cell").nth(3), /ago|just now/);
  await expectCells(delivery("flaky hook"), ["pending", "1", "503", "HTTP 503 Service Unavailable", "just now"]);
  await delivery("flaky hook").getByRole("button", { name: /^Attempt history of alert\.test to flaky hook/ }).click();
  const attempts = page.getByRole("list", { name: /^Attempts of msg/ });
  await expectText(attempts.getByRole("listitem").first(), /^#1 just now · HTTP 503 · \d+ ms · HTTP 503 Service Unavailable$/);

  // Email: the SMTP target without its password.
  await page.getByLabel("Name", { exact: true }).fill("on-call mail");
  await page.getByLabel("Kind", { exact: true }).selectOption("email");
  await page.getByLabel("SMTP host").fill("127.0.0.1");
  await page.getByLabel("Port", { exact: true }).fill("2525");
  await page.getByLabel("TLS", { exact: true }).selectOption("none");
  await page.getByLabel("SMTP username").fill("alerts");
  await page.getByLabel("SMTP password").fill("smtp pass phrase");
  await page.getByLabel("From", { exact: true }).fill("alerts@example.com");
  await page.getByLabel("To", { exact: true }).fill("ops@example.com, lead@example.com");
  await page.getByRole("button", { name: "Create channel" }).click();
  await expectText(row("on-call mail").getByRole("cell").nth(1), "alerts@example.com → ops@example.com, lead@example.com via 127.0.0.1:2525 (none) as alerts");
  assert.ok(!(await page.locator("body").innerText()).includes("smtp pass phrase"));
  await page.getByRole("button", { name: "Disable on-call mail" }).click();
  await expectText(row("on-call mail").getByRole("cell").nth(2), /^disabled disabled by an admin \(since (just now|\d+ seconds? ago)\)$/);

  // Rules: one made here (event, hold-off, scope, channels), one made elsewhere appears live.
  const cfg = await h.api("POST", "/api/v1/configs", { name: "lab", tunnel_protocol: "wireguard", network_cidr: "10.77.0.0/24" });
  const rules = page.getByRole("table", { name: "Alert rules" });
  const rule = (name: string) => rules.getByRole("row").filter({ has: page.getByRole("rowheader", { name, exact: true }) });
  const cells = async (name: string, expected: string[]) => {
    for (const [i, text] of expected.entries()) await expectText(rule(name).getByRole("cell").nth(i), text);
  };
  await page.getByText("No rules yet").waitFor();
  await page.getByLabel("Rule name").fill("lab nodes down");
  await page.getByLabel("When", { exact: true }).selectOption("node.offline");
  await page.getByLabel("Hold-off (seconds)").fill("30");
  await page.getByLabel("Config", { exact: true }).selectOption({ label: "lab" });
  await page.getByLabel("Tag", { exact: true }).fill("edge");
  await page.getByRole("group", { name: "Send to" }).getByLabel("ops hook").check();
  await page.getByRole("group", { name: "Send to" }).getByLabel("flaky hook").check();
  await page.getByRole("button", { name: "Create rule" }).click();
  await cells("lab nodes down", ["a node goes offline (node.offline)", "30 s", "config lab, tag edge", "ops hook, flaky hook", "enabled"]);
  const channelIds = new Map(((await h.api("GET", "/api/v1/alerts/channels")).channels as Array<{ channel_id: string; name: string }>).map((c) => [c.name, c.channel_id]));
  const made = ((await h.api("GET", "/api/v1/alerts/rules")).rules as Array<Record<string, unknown>>)[0];
  assert.deepEqual([made?.["event"], made?.["for_s"], made?.["scope"], made?.["channel_ids"]], ["node.offline", 30, { config_id: cfg.config_id, tag: "edge" }, [channelIds.get("ops hook"), channelIds.get("flaky hook")]]);
  const opsId = channelIds.get("ops hook");
  assert.ok(opsId);
  await h.api("POST", "/api/v1/alerts/rules", { name: "broker link lost", event: "broker.disconnected", channel_ids: [opsId] });
  await cells("broker link lost", ["the service loses its MQTT broker (broker.disconnected)", "none", "the service's broker link", "ops hook", "enabled"]);
  await expectText(rules.getByRole("rowheader").first(), "broker link lost");

  await expectAccessible(page, "alerts");
  await screenshot(page, "alerts");
  // On a phone the tables are stacked cards: nothing scrolls sideways.
  await page.setViewportSize(VIEWPORTS.phone);
  const sideways = await page.evaluate<string[]>(
    `[document.documentElement, ...document.querySelectorAll(".table-wrap")].filter((el) => el.scrollWidth > el.clientWidth + 1).map((el) => el.className || el.tagName)`,
  );
  assert.deepEqual(sideways, [], "nothing scrolls sideways at 390 px");
  await page.setViewportSize(VIEWPORTS.desktop);

  // Live: the retry (1 s on the service's clock) finds the receiver answering 200.
  h.clock.advance(1_500);
  await expectCells(delivery("flaky hook"), ["delivered", "2", "200", "—", "—"]);
  await expectText(attempts.getByRole("listitem").nth(1), /^#2 (just now|\d+ seconds? ago) · HTTP 200 · \d+ ms$/);
  await expectText(row("flaky hook").getByRole("cell").nth(3), "not failing");
  assert.equal(flaky.received.length, 2);
  assert.equal(flaky.received[1]?.headers["webhook-id"], flaky.received[0]?.headers["webhook-id"], "the retry carries the same webhook-id");

  // Filters live in the URL.
  await page.getByLabel("Status", { exact: true }).selectOption("pending");
  await page.waitForURL(/[?&]status=pending/);
  await page.getByText("No deliveries match these filters").waitFor();
  await page.getByLabel("Status", { exact: true }).selectOption("delivered");
  await page.getByLabel("Channel", { exact: true }).selectOption({ label: "flaky hook" });
  await page.reload();
  await expectCells(delivery("flaky hook"), ["delivered"]);
  assert.equal(await delivery("ops hook").count(), 0);
  await page.getByLabel("Channel", { exact: true }).selectOption("");
  await page.getByLabel("Status", { exact: true }).selectOption("");

  // Edit, rotate (the new secret once; the old one still signs for a day), delete.
  await page.getByRole("button", { name: "Edit flaky hook" }).click();
  await page.getByLabel("Name", { exact: true }).fill("flaky receiver");
  await page.getByRole("button", { name: "Save channel" }).click();
  await row("flaky receiver").waitFor();
  await expectText(rule("lab nodes down").getByRole("cell").nth(3), "ops hook, flaky receiver");
  await page.getByRole("button", { name: "Rotate the secret of ops hook" }).click();
  await page.getByRole("dialog", { name: "Rotate the signing secret of ops hook?" }).getByRole("button", { name: "Rotate secret" }).click();
  await expectText(shown, /^whsec_/);
  assert.notEqual((await shown.innerText()).trim(), secret);
  await expectText(row("ops hook").getByRole("cell").nth(2), /previous secret signs until (in 24 hours|tomorrow)$/);
  await page.getByRole("button", { name: "Done, I have copied it" }).click();
  await page.getByRole("button", { name: "Delete flaky receiver" }).click();
  await page.getByRole("dialog", { name: "Delete channel flaky receiver?" }).getByRole("button", { name: "Delete channel" }).click();
  await row("flaky receiver").waitFor({ state: "detached" });
  await delivery("flaky receiver").waitFor({ state: "detached" });

  // A rule names its channels by their names, live: renamed, then deleted (it leaves the rule).
  await expectText(rule("lab nodes down").getByRole("cell").nth(3), "ops hook");

  // A taken name is refused next to the form, in words; editing the name clears it.
  await page.getByLabel("Rule name").fill("broker link lost");
  await page.getByRole("group", { name: "Send to" }).getByLabel("ops hook").check();
  await page.getByRole("button", { name: "Create rule" }).click();
  const refusal = page.getByRole("form", { name: "New rule" }).getByRole("alert");
  await expectText(refusal, "An alert rule named broker link lost exists");
  await page.getByLabel("Rule name").fill("broker link lost again");
  await refusal.waitFor({ state: "detached" });

  // Edit (the form fills with the rule), disable, delete.
  await page.getByRole("button", { name: "Edit rule lab nodes down" }).click();
  await expectText(page.getByRole("heading", { name: /^Edit rule/ }), "Edit rule “lab nodes down”");
  assert.equal(await page.getByLabel("Tag", { exact: true }).inputValue(), "edge");
  await page.getByLabel("Hold-off (seconds)").fill("120");
  await page.getByRole("button", { name: "Save rule" }).click();
  await expectText(rule("lab nodes down").getByRole("cell").nth(1), "120 s");
  await page.getByRole("heading", { name: "New rule" }).waitFor();
  await page.getByRole("button", { name: "Disable rule lab nodes down" }).click();
  await expectText(rule("lab nodes down").getByRole("cell").nth(4), "disabled");
  await page.getByRole("button", { name: "Delete rule lab nodes down" }).click();
  await page.getByRole("dialog", { name: "Delete rule lab nodes down?" }).getByRole("button", { name: "Delete rule" }).click();
  await rule("lab nodes down").waitFor({ state: "detached" });
  assert.deepEqual(((await h.api("GET", "/api/v1/alerts/rules")).rules as Array<{ name: string }>).map((r) => r.name), ["broker link lost"]);

  // Older deliveries load by cursor: 50 a page.
  for (let i = 0; i < 50; i++) await h.api("POST", `/api/v1/alerts/channels/${opsId}/test`);
  await page.getByRole("button", { name: "Load older deliveries" }).click();
  await expectText(log.getByRole("row").nth(51), /ops hook/);
  assert.equal(await log.getByRole("row").count(), 52, "the header and 51 deliveries");
  assert.equal(await page.getByRole("button", { name: "Load older deliveries" }).count(), 0);
});
