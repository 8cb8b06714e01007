/**
 * The console's login: error and success, the token kept for the tab, logout, and the
 * home page's counts from `GET /api/v1/system/status` (DESIGN §5, spec §6.5 table
 * `system.status.updated` "Home, system page and global status").
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectAccessible, expectFigure, expectText, login, screenshot, startConsole, storedToken, waitLive } from "./harness.js";

test("console login: a wrong password shows the API's error, the right one opens home with the right counts; logout ends the session", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const a = await h.api("POST", "/api/v1/configs", { name: "alpha", tunnel_protocol: "wireguard", network_cidr: "10.30.0.0/24" });
  await h.api("POST", "/api/v1/configs", { name: "beta", tunnel_protocol: "awg_2", network_cidr: "10.31.0.0/24" });
  for (const name of ["n1", "n2", "n3"]) {
    await h.api("POST", `/api/v1/configs/${a.config_id}/nodes`, { name, mode: "static", public_address: `${name}.example.net`, listen_port: 51820 });
  }

  const page = await h.newPage();
  // Not logged in: any page sends to the login page, which remembers where to go.
  await page.goto("/settings");
  await page.getByRole("heading", { name: "Mesh control" }).waitFor();
  assert.match(page.url(), /\/login\?next=%2Fsettings$/);
  await expectAccessible(page, "login");
  await screenshot(page, "login");

  await page.getByLabel("Password", { exact: true }).fill("not the password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expectText(page.getByRole("alert"), /password/i);
  await screenshot(page, "login-error");
  assert.equal(await storedToken(page), null);

  await login(page);
  assert.equal(new URL(page.url()).pathname, "/");
  assert.match((await storedToken(page)) ?? "", /.{20,}/);
  await expectFigure(page, "Configs", 2);
  await expectFigure(page, "Nodes", 3);
  await expectFigure(page, "Pending syncs", 0);
  await expectFigure(page, "MQTT service", "enabled");
  await expectFigure(page, "Broker connection", "connected");
  // Config cards (spec §6.5 table, config.list.updated: "Home config cards"), each linking to its mesh page.
  await expectText(page.getByRole("article", { name: "alpha" }), /WireGuard · 10\.30\.0\.0\/24/);
  await expectText(page.getByRole("article", { name: "beta" }), /AmneziaWG 2\.0 · 10\.31\.0\.0\/24/);
  assert.equal(await page.getByRole("article", { name: "alpha" }).getByRole("link", { name: "alpha" }).getAttribute("href"), `/configs/${a.config_id}`);
  await waitLive(page);
  await page.getByText("Signed in as admin (owner)", { exact: true }).waitFor();
  await expectAccessible(page, "home");
  await screenshot(page, "home");

  // A reload keeps the session (localStorage, until it expires).
  await page.reload();
  await expectFigure(page, "Configs", 2);

  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByLabel("Password", { exact: true }).waitFor();
  assert.equal(await storedToken(page), null);

  // Another user of the team signs in by name (the field starts at admin).
  await h.api("POST", "/api/v1/users", { username: "vera", password: "a long enough password", role: "viewer" });
  assert.equal(await page.getByLabel("Username").inputValue(), "admin");
  await page.getByLabel("Username").fill("vera");
  await page.getByLabel("Password", { exact: true }).fill("a long enough password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expectFigure(page, "Configs", 2);
  await page.getByText("Signed in as vera (viewer)", { exact: true }).waitFor();
  const me = await fetch(new URL("/api/v1/auth/me", h.baseUrl), { headers: { authorization: `Bearer ${await storedToken(page)}` } });
  assert.equal(((await me.json()) as { user: { username: string } }).user.username, "vera");
});

test("spec §6.5 rule 2: relative times on the page follow the server's clock (system.clock.sync), not the browser's", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  await h.api("POST", "/api/v1/configs", { name: "clocked", tunnel_protocol: "wireguard", network_cidr: "10.70.0.0/24" });
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  const card = page.getByRole("article", { name: "clocked" });
  await expectText(card, /Updated just now/);
  // Five minutes pass on the server's (manual) clock only: its clock-sync frames move the page.
  h.clock.advance(5 * 60_000);
  await expectText(card, /Updated 5 minutes ago/);
});
