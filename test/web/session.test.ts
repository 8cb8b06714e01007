/**
 * The console's session and its one SSE connection (spec §6.5 rule 3): reconnect with
 * `Last-Event-ID` and a visible indicator, a session ended elsewhere returns to login, and the
 * app shell used with the keyboard alone (light/dark toggle included).
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectFigure, expectText, login, screenshot, startConsole, storedToken, waitLive } from "./harness.js";

test("spec §6.5 rule 3: a dropped stream shows Reconnecting…, comes back by itself with Last-Event-ID, and the page catches up without a reload", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  // Records what each stream opened with (the hub is real; this only watches its argument).
  const lastEventIds: Array<string | undefined> = [];
  const attach = h.server.hub.attach.bind(h.server.hub);
  h.server.hub.attach = (res, lastEventId, opts) => {
    lastEventIds.push(lastEventId);
    return attach(res, lastEventId, opts);
  };
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.evaluate('document.body.dataset["noReload"] = "1"');
  assert.equal(lastEventIds.length, 1, "one shared connection");
  await h.api("POST", "/api/v1/configs", { name: "before", tunnel_protocol: "wireguard", network_cidr: "10.50.0.0/24" });
  await expectFigure(page, "Configs", 1);

  // The stream ends (as at a server restart): the indicator says so, then the tab reconnects.
  const session = await h.server.auth.session(await storedToken(page) ?? "");
  assert.equal(h.server.hub.endSession(session.key), 1);
  await page.locator('[data-status="reconnecting"]').waitFor();
  await expectText(page.getByRole("status").filter({ hasText: "Reconnecting" }), "Reconnecting…");
  await screenshot(page, "home-reconnecting");
  await h.api("POST", "/api/v1/configs", { name: "while-away", tunnel_protocol: "wireguard", network_cidr: "10.51.0.0/24" });
  await waitLive(page);
  await expectFigure(page, "Configs", 2);
  assert.equal(lastEventIds.length, 2, "one reconnect, still one connection");
  assert.match(lastEventIds[1] ?? "", /^\d+$/, "the reconnect sent the id of the last frame it read");
  assert.equal(await page.evaluate('document.body.dataset["noReload"]'), "1");
});

test("a session ended elsewhere (logout through the API) sends the tab back to login without a reload", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  const token = await storedToken(page);
  const res = await fetch(new URL("/api/v1/auth/logout", h.baseUrl), { method: "POST", headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.status, 204);
  // The hub ends the stream; the reconnect answers 401; the console forgets the token.
  await page.getByLabel("Password", { exact: true }).waitFor();
  assert.equal(await storedToken(page), null);
});

test("keyboard alone: sign in, skip to content, move between pages, switch light/dark (kept over a reload)", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  await page.goto("/");
  await page.getByLabel("Password", { exact: true }).waitFor();
  // The password field has focus on arrival.
  await page.keyboard.type("correct horse battery staple");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "System", level: 1 }).waitFor();

  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate("document.activeElement?.textContent"), "Skip to content");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate("document.activeElement?.id"), "main");

  // Tab from the top to the Settings link, then Enter.
  await page.evaluate("document.activeElement?.blur()");
  let found = false;
  for (let i = 0; i < 10 && !found; i++) {
    await page.keyboard.press("Tab");
    found = (await page.evaluate("document.activeElement?.textContent")) === "Settings";
  }
  assert.ok(found, "the Settings link is reachable with Tab");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Settings", level: 1 }).waitFor();
  // The new page takes the focus and names the tab.
  await page.waitForFunction('document.activeElement?.id === "main"');
  assert.equal(await page.title(), "Settings · Mesh control");

  // The theme toggle: system → light → dark, on <html data-theme>, kept in localStorage.
  const toggle = page.getByRole("button", { name: /^Theme: / });
  assert.equal((await toggle.innerText()).trim(), "◐ Theme: Auto");
  await toggle.focus();
  await page.keyboard.press("Enter");
  await page.getByRole("button", { name: "Theme: Light" }).waitFor();
  assert.equal(await page.evaluate("document.documentElement.dataset.theme"), "light");
  await page.keyboard.press("Enter");
  await page.getByRole("button", { name: "Theme: Dark" }).waitFor();
  assert.equal(await page.evaluate("document.documentElement.dataset.theme"), "dark");
  // Dark wins over a light system preference.
  const bg = await page.evaluate("getComputedStyle(document.body).backgroundColor");
  assert.equal(bg, "rgb(13, 17, 23)");
  await page.reload();
  await page.getByRole("button", { name: "Theme: Dark" }).waitFor();
  await page.getByRole("button", { name: "Theme: Dark" }).press("Enter");
  await page.getByRole("button", { name: "Theme: Auto" }).waitFor();
  assert.equal(await page.evaluate("document.documentElement.dataset.theme ?? null"), null);
});

test("a 401 from a REST call (the SSE stream held back) also returns to login, keeping the page asked for", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  // A token the service does not know, as after a restart with a new database.
  await page.addInitScript('localStorage.setItem("svc.session", JSON.stringify({ access_token: "stale-token-from-before", expires_at: "2999-01-01T00:00:00.000Z" }))');
  // Only REST answers this time: the stream request never reaches the service.
  await page.route("**/api/v1/events/stream", (route) => route.abort());
  await page.goto("/settings");
  await page.getByLabel("Password", { exact: true }).waitFor();
  assert.match(page.url(), /\/login\?next=%2Fsettings$/);
  assert.equal(await storedToken(page), null);
});

test("an API error shows its message with Retry, and Retry loads the page (shared loading/error states)", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await page.route("**/api/v1/settings/mqtt", (route) =>
    route.fulfill({
      status: 503,
      contentType: "application/json",
      body: JSON.stringify({ error: { code: "SERVICE_UNAVAILABLE", message: "the broker settings are unavailable right now" } }),
    }),
  );
  await page.getByRole("link", { name: "Settings" }).click();
  // Queries retry a 5xx twice before showing it.
  await expectText(page.getByRole("alert"), /the broker settings are unavailable right now/);
  await page.unroute("**/api/v1/settings/mqtt");
  await page.getByRole("alert").getByRole("button", { name: "Retry" }).click();
  await page.getByLabel(/Public host/).waitFor();
  assert.equal(await page.getByRole("alert").count(), 0);
});

test("one session for the browser's tabs: a new tab opens logged in, a logout in one tab returns the other to login without a reload, an expired session is not used", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const first = await h.newPage();
  await login(first);
  await waitLive(first);

  const second = await first.context().newPage();
  await second.goto("/settings");
  await second.getByRole("heading", { name: "Settings", level: 1 }).waitFor();
  await waitLive(second);
  assert.equal(await second.getByLabel("Password", { exact: true }).count(), 0, "no password asked");
  assert.equal(await storedToken(second), await storedToken(first));
  await second.evaluate('document.body.dataset["noReload"] = "1"');

  await first.getByRole("button", { name: "Sign out" }).click();
  await first.getByLabel("Password", { exact: true }).waitFor();
  // The storage event: the second tab follows at once, no request needed.
  await second.getByLabel("Password", { exact: true }).waitFor();
  assert.equal(await second.evaluate('document.body.dataset["noReload"]'), "1", "not reloaded");
  assert.equal(await storedToken(second), null);

  // A kept session past its expiry is dropped, not sent.
  const session = await first.context().newPage();
  await session.goto("/login");
  await session.evaluate('localStorage.setItem("svc.session", JSON.stringify({ access_token: "expired-token", expires_at: "2000-01-01T00:00:00.000Z" }))');
  await session.goto("/settings");
  await session.getByLabel("Password", { exact: true }).waitFor();
  assert.equal(await session.evaluate('localStorage.getItem("svc.session")'), null);
});
