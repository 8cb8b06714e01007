/**
 * Settings with MQTT services switched off (spec §1.7 bullet 7):
 * the MQTT layout stays, its controls disabled, with the reason on hover and focus. The public
 * URL hosts are told (`GET, PUT /api/v1/settings/server`) and the warning of every page that
 * hands out a command for another host while it is loopback.
 */
import assert from "node:assert/strict";
import test from "node:test";
import type { Page } from "playwright-core";
import { expectAccessible, expectFigure, expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

test("spec §1.7 bullet 7: with MQTT off, Settings keeps the MQTT form with every control disabled and the reason attached; home says disabled", async (t) => {
  const h = await startConsole(t, { mqttEnabled: false });
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await expectFigure(page, "MQTT service", "disabled");
  await expectFigure(page, "Broker", "disabled");
  await page.getByRole("link", { name: "Settings" }).click();
  await page.getByRole("heading", { name: "MQTT" }).waitFor();
  const reason = /MQTT services are disabled/;
  for (const control of [
    page.getByLabel(/Public host/),
    page.getByLabel(/Public port/).first(),
    page.getByLabel(/Public TLS port/),
    page.getByRole("button", { name: "Save MQTT settings" }),
    page.getByRole("button", { name: "Use environment values" }),
  ]) {
    assert.equal(await control.isDisabled(), true, String(control));
    assert.match((await control.getAttribute("title")) ?? "", reason, String(control));
    // The reason is also the control's accessible description (for keyboard and screen readers).
    const describedBy = (await control.getAttribute("aria-describedby")) ?? "";
    assert.match(await page.locator(`#${describedBy}`).innerText(), reason);
  }
  await expectAccessible(page, "settings (MQTT off)");
  await screenshot(page, "settings-mqtt-off");
});

test("going back to the environment's MQTT values asks first (a dialog Escape cancels) and then shows the environment as the source", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  await h.api("PUT", "/api/v1/settings/mqtt", { public_host: "override.example.org" });
  const page = await h.newPage();
  await login(page);
  await page.getByRole("link", { name: "Settings" }).click();
  const host = page.getByLabel(/Public host/);
  await host.and(page.locator('[value="override.example.org"]')).waitFor();
  assert.match(await page.locator('label[for="public_host"]').innerText(), /\(settings\)/);

  await page.getByRole("button", { name: "Use environment values" }).click();
  const dialog = page.getByRole("dialog", { name: "Use the environment's values?" });
  await dialog.waitFor();
  await expectAccessible(page, "settings reset dialog");
  await screenshot(page, "settings-reset-dialog");
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "hidden" });
  assert.equal((await h.api("GET", "/api/v1/settings/mqtt")).public_host, "override.example.org", "cancel changes nothing");

  await page.getByRole("button", { name: "Use environment values" }).click();
  await dialog.getByRole("button", { name: "Use environment values" }).click();
  await dialog.waitFor({ state: "hidden" });
  await expectText(page.locator('label[for="public_host"]'), /\(environment\)/);
  assert.equal((await h.api("GET", "/api/v1/settings/mqtt")).sources.public_host, "environment");
});

/** The warning every page that hands out a command for another host shows while the public URL is loopback. */
const warningOf = (page: Page) => page.getByRole("note", { name: "Public URL warning" });

test("the public URL: a loopback default is warned about on the node initialization page, a static node's download and the config package; set in Settings (a bad URL refused with the rule), the open node page drops the warning live and the bind command carries it", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "edge-net", tunnel_protocol: "wireguard", network_cidr: "10.60.0.0/24" });
  const dynamic = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "edge-1", mode: "dynamic" });
  const fixed = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "gw", mode: "static", public_address: "192.0.2.1", listen_port: 51820 });
  const page = await h.newPage();
  await login(page);
  await waitLive(page);

  for (const [path, heading] of [[`/configs/${cfg.config_id}/nodes/${fixed.node_id}`, "gw"], [`/configs/${cfg.config_id}`, "edge-net"]] as const) {
    await page.goto(path);
    await expectText(page.getByRole("heading", { level: 1 }), heading);
    await expectText(warningOf(page), /Hosts will be told to reach http:\/\/localhost:8080/);
  }
  await page.goto(`/configs/${cfg.config_id}/nodes/${dynamic.node_id}`);
  await page.getByRole("heading", { name: "3. Bind the client" }).waitFor();
  const warning = warningOf(page);
  await expectText(warning, /Hosts will be told to reach http:\/\/localhost:8080, a loopback address/);
  assert.equal(await warning.getByRole("link", { name: "Set the public URL" }).getAttribute("href"), "/settings#public-url");
  await expectAccessible(page, "node initialization with the public URL warning");
  await screenshot(page, "node-init-public-url-warning");

  // Settings in a second tab of the same browser; the node page stays open in the first.
  const settings = await page.context().newPage();
  await settings.goto("/settings");
  const field = settings.getByRole("textbox", { name: /^Public URL/ });
  await field.and(settings.locator('[value="http://localhost:8080"]')).waitFor();
  await expectText(settings.locator('label[for="public_url"]'), /\(default\)/);
  await expectText(settings.locator("#public-url .form-error"), /http:\/\/localhost:8080 is a loopback address/);
  await field.fill("https://mesh.example.com/console");
  await settings.getByRole("button", { name: "Save public URL" }).click();
  await expectText(settings.getByRole("alert"), /without a path, query or fragment/);
  assert.equal((await h.api("GET", "/api/v1/settings/server")).source, "default", "nothing stored");

  await field.fill("https://mesh.example.com/");
  await settings.getByRole("button", { name: "Save public URL" }).click();
  await expectText(settings.getByRole("status").filter({ hasText: "Saved" }), /carry https:\/\/mesh\.example\.com;/);
  await expectText(settings.locator('label[for="public_url"]'), /\(set here\)/);
  assert.equal(await settings.getByRole("alert").count(), 0, "the earlier error is gone");
  await settings.getByLabel(/Public host/).and(settings.locator('[value="mesh.example.com"]')).waitFor();
  await expectAccessible(settings, "settings with a public URL");
  await screenshot(settings, "settings-public-url");

  // settings.server.updated reached the first tab: its warning is gone, and the bind command names the URL.
  await warning.waitFor({ state: "detached" });
  await page.getByRole("button", { name: "Generate bind command" }).click();
  await expectText(page.getByLabel("Bind command", { exact: true }), /^cd svc-client && sudo \.\/svcctl bind --server https:\/\/mesh\.example\.com --token \S+$/);

  await settings.getByRole("button", { name: "Use the default" }).click();
  await expectText(settings.locator('label[for="public_url"]'), /\(default\)/);
  await expectText(warningOf(page), /http:\/\/localhost:8080/);
});

test("with SVC_PUBLIC_URL set, Settings shows its value read-only and says the environment sets it; the warning says which variable to change", async (t) => {
  const h = await startConsole(t, { publicUrl: "http://127.0.0.1:8080", publicUrlSource: "environment" });
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "edge-net", tunnel_protocol: "wireguard", network_cidr: "10.61.0.0/24" });
  const dynamic = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "edge-1", mode: "dynamic" });
  const page = await h.newPage();
  await login(page);
  await page.goto("/settings");
  const field = page.getByRole("textbox", { name: /^Public URL/ });
  await field.and(page.locator('[value="http://127.0.0.1:8080"]')).waitFor();
  assert.equal(await field.isDisabled(), true);
  assert.equal(await page.getByRole("button", { name: "Save public URL" }).isDisabled(), true);
  await expectText(page.locator('label[for="public_url"]'), /\(set by SVC_PUBLIC_URL\)/);
  await expectText(page.locator("#public-url-env"), /SVC_PUBLIC_URL sets the public URL; it wins over this page/);
  await screenshot(page, "settings-public-url-env");
  await page.goto(`/configs/${cfg.config_id}/nodes/${dynamic.node_id}`);
  await expectText(warningOf(page), /SVC_PUBLIC_URL sets it: change that variable/);
});
