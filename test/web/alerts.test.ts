/**
 * The Alerts page (docs/alerts.md, docs/console.md): an admin creates a webhook channel against a
 * real HTTP receiver on loopback, sees its signing secret once, presses Test and sees the
 * receiver's answer; a receiver answering 503 shows a pending delivery with the failed attempt
 * in the log, which turns delivered live when the retry succeeds; email channels show their
 * SMTP target without the password; disable, edit, rotate, delete; the log's filters live in the
 * URL and older deliveries load by cursor. What a viewer sees is walked by roles.test.ts.
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

test("Alerts page: a webhook channel's secret once, Test against a real receiver (200, then 503 retried live), the delivery log with attempts, filters and pages; email, disable, edit, rotate, delete", { timeout: 60_000 }, async (t) => {
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

  // Older deliveries load by cursor: 50 a page.
  const opsId = ((await h.api("GET", "/api/v1/alerts/channels")).channels as Array<{ channel_id: string; name: string }>).find((c) => c.name === "ops hook")?.channel_id;
  assert.ok(opsId);
  for (let i = 0; i < 50; i++) await h.api("POST", `/api/v1/alerts/channels/${opsId}/test`);
  await page.getByRole("button", { name: "Load older deliveries" }).click();
  await expectText(log.getByRole("row").nth(51), /ops hook/);
  assert.equal(await log.getByRole("row").count(), 52, "the header and 51 deliveries");
  assert.equal(await page.getByRole("button", { name: "Load older deliveries" }).count(), 0);
});
