/**
 * The app shell's routes: a deep link survives login and reload (the backend's SPA
 * fallback serves index.html for it, the router opens the page, its lazily loaded code passes the
 * CSP), the main navigation marks the current page, unknown paths say so.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectAccessible, expectFigure, login, startConsole, waitLive } from "./harness.js";

test("a deep link to a node page opens it after login and after a reload; navigation marks the current page; an unknown path says not found", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  const blocked: string[] = [];
  page.on("console", (msg) => {
    if (/Content Security Policy/i.test(msg.text())) blocked.push(msg.text());
  });
  const cfg = await h.api("POST", "/api/v1/configs", { name: "cfg-a", tunnel_protocol: "wireguard", network_cidr: "10.61.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "node-b", mode: "static", public_address: "b.example.net", listen_port: 51820 });
  const path = `/configs/${cfg.config_id}/nodes/${node.node_id}`;
  await page.goto(path);
  await page.getByLabel("Password", { exact: true }).waitFor();
  assert.equal(new URL(page.url()).searchParams.get("next"), path);
  await page.getByLabel("Password", { exact: true }).fill("correct horse battery staple");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "node-b", level: 1 }).waitFor();
  assert.equal(new URL(page.url()).pathname, path);
  await page.reload();
  await page.getByRole("heading", { name: "node-b", level: 1 }).waitFor();
  await page.getByRole("link", { name: "cfg-a" }).click();
  await page.getByRole("heading", { name: "cfg-a", level: 1 }).waitFor();

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

test("spec §6.5 rule 7: a page opened again shows what changed while another page was on screen (Home's counts after a config was made while Backups was open)", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await expectFigure(page, "Configs", 0);
  const nav = page.getByRole("navigation", { name: "Main" });
  await nav.getByRole("link", { name: "Backups" }).click();
  await page.getByRole("heading", { name: "Backups", level: 1 }).waitFor();
  // A config made elsewhere: config.list.updated … system.status.updated (Configs 1) on the stream.
  await h.api("POST", "/api/v1/configs", { name: "made-meanwhile", tunnel_protocol: "wireguard", network_cidr: "10.62.0.0/24" });
  // Then a snapshot, whose one frame (snapshot.list.updated) comes after that status frame: once
  // its row is on screen, the status frame has reached the page while Home was not mounted.
  await h.api("POST", "/api/v1/backups");
  await page.getByRole("table", { name: "Snapshots" }).getByRole("row").nth(1).waitFor();
  await nav.getByRole("link", { name: "Home" }).click();
  await expectFigure(page, "Configs", 1);
});
