/**
 * Hubs in the console (README "Hubs: meshes behind NAT"): the add-node form's hub checkbox
 * (refused without a public address, with the backend's reason), and the mesh page's pair list
 * saying per pair how its packets travel, "direct" or "via <hub name>", exactly as the backend's
 * `route` and `hub_node_id` say (spec §6.5 rule 7: the console derives nothing). The real service
 * in-process, Debian's Chromium.
 */
import test from "node:test";
import { expectAccessible, expectText, login, screenshot, startConsole } from "./harness.js";

test("the mesh page says per pair 'direct' or 'via <hub>'; a hub made in the add-node form turns broken pairs behind NAT into pairs via it", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "home", tunnel_protocol: "wireguard", network_cidr: "10.63.0.0/24" });
  for (const name of ["ana", "ben"]) {
    h.clock.advance(1);
    await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name, mode: "static" });
  }
  h.clock.advance(1);
  await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "nas", mode: "static", public_address: "198.51.100.9" });

  const page = await h.newPage();
  await login(page);
  await page.goto(`/configs/${cfg.config_id}`);
  const pairs = page.getByRole("list", { name: "Pairs" });
  const pair = (a: string, b: string) => pairs.getByRole("listitem").filter({ hasText: `${a} ↔ ${b}` });
  await expectText(pair("ana", "ben"), /broken/);
  await expectText(pair("ana", "nas"), /ok\s*direct/);

  // The hub checkbox without a public address: the backend's refusal, in words.
  await page.locator("summary").filter({ hasText: "Add a node" }).click();
  const form = page.getByRole("form", { name: "Add a node" });
  await form.getByLabel("Node name").fill("gateway");
  await form.getByLabel(/^Hub/).check();
  await form.getByRole("button", { name: "Add node" }).click();
  await expectText(form.getByRole("alert"), /hub needs a public address/);

  await form.getByLabel("Public address").fill("203.0.113.1");
  await form.getByRole("button", { name: "Add node" }).click();
  await expectText(form.getByRole("status"), "Node gateway added.");
  // Live: the pair of the two nodes behind NAT now goes through the hub; the rest are direct.
  await expectText(pair("ana", "ben"), /ok\s*via gateway/);
  await expectText(pair("ana", "gateway"), /ok\s*direct/);
  await expectText(pair("ben", "nas"), /ok\s*direct/);
  await page.getByLabel("Filter pairs").fill("via");
  await expectText(page.getByRole("list", { name: "Pairs" }), /ana ↔ ben\s*ok\s*via gateway/);
  await expectText(pairs.getByRole("listitem").first(), /ana ↔ ben/);
  await page.getByLabel("Filter pairs").fill("");
  await pairs.scrollIntoViewIfNeeded();
  await expectAccessible(page, "mesh pairs with a hub");
  await screenshot(page, "mesh-hub-pairs");
});
