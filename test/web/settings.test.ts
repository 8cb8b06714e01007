/**
 * Settings with MQTT services switched off (spec §1.7 bullet 7):
 * the MQTT layout stays, its controls disabled, with the reason on hover and focus.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectAccessible, expectFigure, expectText, login, screenshot, startConsole } from "./harness.js";

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
