/**
 * The app shell's routes (issue 12): a deep link survives login and reload (the backend's SPA
 * fallback serves index.html for it, the router opens the page, its lazily loaded code passes the
 * CSP), the main navigation marks the current page, unknown paths say so.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectAccessible, startConsole } from "./harness.js";

test("issue 12: a deep link to a node page opens it after login and after a reload; navigation marks the current page; an unknown path says not found", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  const blocked: string[] = [];
  page.on("console", (msg) => {
    if (/Content Security Policy/i.test(msg.text())) blocked.push(msg.text());
  });
  await page.goto("/configs/cfg-a/nodes/node-b");
  await page.getByLabel("Admin password").waitFor();
  assert.match(page.url(), /\/login\?next=%2Fconfigs%2Fcfg-a%2Fnodes%2Fnode-b$/);
  await page.getByLabel("Admin password").fill("correct horse battery staple");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Node node-b", level: 1 }).waitFor();
  assert.equal(new URL(page.url()).pathname, "/configs/cfg-a/nodes/node-b");
  await page.reload();
  await page.getByRole("heading", { name: "Node node-b", level: 1 }).waitFor();
  await page.getByRole("link", { name: "Back to the config" }).click();
  await page.getByRole("heading", { name: "Config cfg-a", level: 1 }).waitFor();

  const nav = page.getByRole("navigation", { name: "Main" });
  await nav.getByRole("link", { name: "Backups" }).click();
  await page.getByRole("heading", { name: "Backups", level: 1 }).waitFor();
  assert.equal(await nav.getByRole("link", { name: "Backups" }).getAttribute("aria-current"), "page");
  assert.equal(await nav.getByRole("link", { name: "Home" }).getAttribute("aria-current"), null);

  await page.goto("/no/such/page");
  await page.getByRole("heading", { name: "Page not found", level: 1 }).waitFor();
  await expectAccessible(page, "not found");
  assert.deepEqual(blocked, [], "nothing blocked by the Content-Security-Policy");
});
