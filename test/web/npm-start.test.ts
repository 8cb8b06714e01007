/**
 * The README's first command: `npm start` builds the console when needed
 * (prestart, scripts/build-web.ts) and serves the login page at `/`.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { chromium } from "playwright-core";
import { findOnPath, requireSystem } from "../helpers/system.js";
import { startService } from "../helpers/service.js";

test("`npm start` serves the console: / in Chromium shows the login page, whose password opens home", { timeout: 120_000 }, async (t) => {
  if (!requireSystem(t, { binaries: ["chromium", "npm"] })) return;
  const service = await startService();
  t.after(() => service.stop());
  const html = await fetch(new URL("/", service.baseUrl));
  assert.equal(html.status, 200);
  assert.match(html.headers.get("content-type") ?? "", /^text\/html/);
  assert.match(html.headers.get("content-security-policy") ?? "", /default-src 'self'/);

  const browser = await chromium.launch({
    executablePath: findOnPath("chromium") ?? "/usr/bin/chromium",
    headless: true,
    args: process.getuid?.() === 0 ? ["--no-sandbox"] : [],
  });
  t.after(() => browser.close());
  const page = await browser.newPage();
  page.setDefaultTimeout(10_000);
  await page.goto(service.baseUrl + "/");
  await page.getByLabel("Password", { exact: true }).fill(service.adminPassword);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "System", level: 1 }).waitFor();
});
