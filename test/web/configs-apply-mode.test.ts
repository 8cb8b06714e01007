/**
 * The configs page offers how pushes are applied on running hosts (apply_mode: restart, the
 * spec's default, or hitless) when a config is created and when it is edited, each choice with
 * its one-line why. The real service in-process, Debian's Chromium; axe checks and screenshots.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectAccessible, expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

const RESTART_WHY = /^Spec behaviour: the host stops, rewrites and restarts its interface, briefly dropping every tunnel\.$/;
const HITLESS_WHY = /^Peers change on the running interface; other tunnels stay up/;

test("configs: a config is created hitless and edited back to restart; the table shows how each applies pushes, the form says why", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.getByRole("link", { name: "Configs", exact: true }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "Configs");

  // Create: restart by default, with its why; hitless chosen, with its why.
  const create = page.getByRole("form", { name: "New config" });
  const mode = create.getByLabel("Apply pushes");
  assert.equal(await mode.inputValue(), "restart");
  await expectText(create.getByText(RESTART_WHY), RESTART_WHY);
  await mode.selectOption("hitless");
  await expectText(create.locator("#create-config-why"), HITLESS_WHY);
  assert.equal(await mode.getAttribute("aria-describedby"), "create-config-why", "the why describes the select");
  await screenshot(page, "configs-apply-mode-create");
  await create.getByLabel("Name", { exact: true }).fill("live");
  await create.getByLabel("Network CIDR").fill("10.61.0.0/24");
  await create.getByRole("button", { name: "Create config" }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "live");
  const configs = (await h.api("GET", "/api/v1/configs")) as { configs: Array<{ config_id: string; name: string; apply_mode: string }> };
  const live = configs.configs.find((c) => c.name === "live");
  assert.equal(live?.apply_mode, "hitless", "created as chosen");

  // The list shows the mode; Edit changes it.
  await page.goto("/configs");
  const row = page.getByRole("row").filter({ has: page.getByRole("link", { name: "live", exact: true }) });
  await expectText(row.getByRole("cell").nth(2), "hitless");
  await page.getByRole("button", { name: "Edit config live" }).click();
  const dialog = page.getByRole("dialog", { name: "Edit config live" });
  const editMode = dialog.getByLabel("Apply pushes");
  assert.equal(await editMode.inputValue(), "hitless");
  await expectText(dialog.getByText(HITLESS_WHY), HITLESS_WHY);
  await expectAccessible(page, "configs edit dialog");
  await screenshot(page, "configs-apply-mode");
  await editMode.selectOption("restart");
  await expectText(dialog.getByText(RESTART_WHY), RESTART_WHY);
  await dialog.getByRole("button", { name: "Save config" }).click();
  await dialog.waitFor({ state: "hidden" });
  await expectText(row.getByRole("cell").nth(2), "restart");
  const after = (await h.api("GET", `/api/v1/configs/${live?.config_id ?? ""}`)) as { apply_mode: string; name: string };
  assert.deepEqual([after.name, after.apply_mode], ["live", "restart"]);
});
