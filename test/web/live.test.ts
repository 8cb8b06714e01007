/**
 * A second browser context sees the first one's changes live, over
 * the one shared SSE connection of each tab (spec §6.5 rule 3), without a reload: home counts
 * patched by `system.status.updated`, the MQTT settings form by `settings.mqtt.updated`
 * (spec §6.5 table). Also: the Settings page (DESIGN §5 `GET, PUT /api/v1/settings/mqtt`).
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectAccessible, expectFigure, expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

test("spec §6.5 rule 3: a second browser context sees a config created elsewhere and the first context's settings change live, without a reload", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const first = await h.newPage();
  const second = await h.newPage({ colorScheme: "dark" });
  await login(first);
  await login(second);
  await waitLive(first);
  await waitLive(second);
  await expectFigure(second, "Configs", 0);
  await second.getByText("No configs yet.").waitFor();
  // Marks the document: a reload would lose it.
  await second.evaluate('document.body.dataset["noReload"] = "1"');

  // A config created through the API (no page did it): both homes count it.
  await h.api("POST", "/api/v1/configs", { name: "live", tunnel_protocol: "wireguard", network_cidr: "10.40.0.0/24" });
  await expectFigure(first, "Configs", 1);
  await expectFigure(second, "Configs", 1);
  await expectText(second.getByRole("article", { name: "live" }), /WireGuard · 10\.40\.0\.0\/24/);
  await expectText(second.getByRole("article", { name: "live" }), /Updated just now/);

  // The first operator changes the MQTT public host on the Settings page; the second one, on the
  // same page, sees the new value and its source without reloading.
  await first.getByRole("link", { name: "Settings" }).click();
  await second.getByRole("link", { name: "Settings" }).click();
  await first.getByLabel(/Public host/).waitFor();
  await expectText(second.getByRole("group", { name: "Public broker address" }).getByText("(environment)").first(), "(environment)");
  await first.getByLabel(/Public host/).fill("mqtt.example.org");
  await first.getByRole("button", { name: "Save MQTT settings" }).click();
  await expectText(first.getByRole("status").filter({ hasText: "Saved." }), "Saved.");
  await second.getByLabel(/Public host/).and(second.locator('[value="mqtt.example.org"]')).waitFor();
  assert.equal(await second.getByLabel(/Public host/).inputValue(), "mqtt.example.org");
  assert.equal(await second.evaluate('document.body.dataset["noReload"]'), "1");
  // The version card: the server version and the release download base (spec §4 rules 2/5).
  await expectText(first.getByRole("region", { name: "Version" }), /Server version\s*0\.\d+\.\d+/);
  await expectText(first.getByRole("region", { name: "Version" }), /Client releases\s*https:\/\/github\.com\/svc-mesh\/svc\/releases\/download/);
  await expectAccessible(first, "settings");
  await screenshot(first, "settings");

  // A value the API refuses shows the API's message on the page.
  await first.getByLabel(/Public host/).fill("not a host name!");
  await first.getByRole("button", { name: "Save MQTT settings" }).click();
  await expectText(first.getByRole("alert"), /public_host/);
});
