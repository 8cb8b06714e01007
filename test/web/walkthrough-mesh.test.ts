/**
 * The configs and mesh pages as a new operator meets them, at 1280 px and on a 390 px touch
 * phone: opening a node from the table and the topology, bulk actions that count and offer what
 * applies, form errors in the form's own words, what the service normalised or stored, keyboard
 * order and focus, and one narrow-width layout (stacked cards) for every table. The real service
 * in-process (SQLite file, embedded aedes on port 0), Debian's Chromium.
 */
import assert from "node:assert/strict";
import test from "node:test";
import type { Locator, Page } from "playwright-core";
import { expectAccessible, expectText, login, screenshot, startConsole, UI_TIMEOUT_MS, VIEWPORTS, waitLive, type ConsoleHarness } from "./harness.js";

/** A logged-in page on a phone: 390×844, touch input (taps are real touch events), mobile viewport. */
async function phonePage(h: ConsoleHarness): Promise<Page> {
  const context = await h.browser.newContext({ baseURL: h.baseUrl, viewport: VIEWPORTS.phone, hasTouch: true, isMobile: true, colorScheme: "light" });
  context.setDefaultTimeout(UI_TIMEOUT_MS);
  const page = await context.newPage();
  page.on("pageerror", (err) => process.stderr.write(`[page error] ${err.stack ?? err.message}\n`));
  await login(page);
  return page;
}

/** Waits until no `.table-wrap` on the page scrolls sideways; fails with `message`. */
async function expectNoSidewaysScroll(page: Page, message: string): Promise<void> {
  try {
    await page.waitForFunction(
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- runs in the page (DOM types are not in the Node typecheck)
      () => [...(globalThis as any).document.querySelectorAll(".table-wrap")].every((w: any) => w.scrollWidth <= w.clientWidth + 1),
      undefined,
      { timeout: UI_TIMEOUT_MS },
    );
  } catch {
    assert.fail(message);
  }
}

/** The accessible text of the focused element (its aria-label, else its text), or `BODY`. */
async function focusedName(page: Page): Promise<string> {
  return page.evaluate<string>(
    "(() => { const el = document.activeElement; if (!el || el === document.body) return 'BODY'; return el.getAttribute('aria-label') ?? el.textContent?.trim() ?? el.tagName; })()",
  );
}

/** A config with nodes (static unless said, paired with each other), listed in the order given; their ids by name. */
async function meshWith(h: ConsoleHarness, name: string, cidr: string, nodes: Array<{ name: string; mode?: "static" | "dynamic" }>) {
  const cfg = await h.api("POST", "/api/v1/configs", { name, tunnel_protocol: "wireguard", network_cidr: cidr });
  const ids: Record<string, string> = {};
  for (const n of nodes) {
    h.clock.advance(1); // creation order is list order
    const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: n.name, mode: n.mode ?? "static", public_address: `${n.name}.example.net` });
    ids[n.name] = node.node_id;
  }
  return { configId: cfg.config_id as string, ids };
}

/** Right edge (px) of `locator`'s box; fails when it has none. */
async function rightEdge(locator: Locator): Promise<number> {
  const box = await locator.boundingBox();
  assert.ok(box, `${String(locator)} is laid out`);
  return box.x + box.width;
}

test("spec §6.5 (node pages reachable from the mesh page): a tap on a node's name opens its page on a 390 px touch phone, the tooltip of its last transition never takes the tap; topology nodes open their page on click, tap and Enter", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const { configId, ids } = await meshWith(h, "lab", "10.70.0.0/24", [{ name: "n1" }, { name: "n2" }]);
  const nodeUrl = (id: string | undefined) => new RegExp(`/configs/${configId}/nodes/${id}$`);

  const phone = await phonePage(h);
  await waitLive(phone);
  await phone.goto(`/configs/${configId}`);
  const link = phone.getByRole("table").getByRole("link", { name: "n2", exact: true });
  // The last transitions are loaded: the link is described by its tooltip.
  await phone.locator('a[aria-describedby^="last-"]').first().waitFor({ state: "attached" });
  await link.tap();
  await phone.waitForURL(nodeUrl(ids["n2"]));
  await expectText(phone.getByRole("heading", { level: 1 }), "n2");

  // The topology on the phone: a tap on a node opens it.
  await phone.goto(`/configs/${configId}?view=topology`);
  await phone.getByRole("figure", { name: "Topology" }).getByRole("link", { name: /^Node n1 / }).tap();
  await phone.waitForURL(nodeUrl(ids["n1"]));

  // At 1280: a click on a drawn node, and Enter on a focused one.
  const page = await h.newPage();
  await login(page);
  await page.goto(`/configs/${configId}?view=topology`);
  const figure = page.getByRole("figure", { name: "Topology" });
  await figure.getByRole("link", { name: /^Node n1 / }).click();
  await page.waitForURL(nodeUrl(ids["n1"]));
  await page.goBack();
  await figure.getByRole("link", { name: /^Node n2 / }).focus();
  await page.keyboard.press("Enter");
  await page.waitForURL(nodeUrl(ids["n2"]));
  await page.goBack();
  await expectAccessible(page, "mesh-topology-links");
  await screenshot(page, "walkthrough-mesh-topology");

  // Keyboard focus on a name still shows its last transition (beside it; under it on a phone).
  await page.goto(`/configs/${configId}`);
  await page.getByRole("table").getByRole("link", { name: "n1", exact: true }).focus();
  await page.getByRole("tooltip").waitFor({ state: "visible" });
  await screenshot(page, "walkthrough-mesh-tip");
});

test("deleting one selected node says it deleted 1 node, counted from what was asked, even when a live update empties the selection before the count is taken", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const { configId, ids } = await meshWith(h, "lab", "10.71.0.0/24", [{ name: "n1" }, { name: "n2" }, { name: "n3" }]);
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${configId}`);
  const table = page.getByRole("table");
  const result = page.getByRole("status").filter({ hasText: /^Deleted/ });
  await page.getByRole("checkbox", { name: "Select n1" }).check();
  await page.getByRole("button", { name: "Delete selected" }).click();
  await page.getByRole("dialog", { name: "Delete 1 node?" }).getByRole("button", { name: "Delete nodes" }).click();
  await expectText(result, "Deleted 1 node.");
  await table.getByRole("link", { name: "n1", exact: true }).waitFor({ state: "detached" });

  // Another operator deletes n2 while its confirmation is open: the live update takes it out of
  // the table and the selection; the dialog and the count still speak of what was asked.
  await page.getByRole("checkbox", { name: "Select n2" }).check();
  await page.getByRole("button", { name: "Delete selected" }).click();
  const dialog = page.getByRole("dialog", { name: "Delete 1 node?" });
  await dialog.waitFor();
  await h.api("DELETE", `/api/v1/configs/${configId}/nodes/${ids["n2"]}`);
  await table.getByRole("link", { name: "n2", exact: true }).waitFor({ state: "detached" });
  await expectText(dialog, /n2 will be deleted/);
  await dialog.getByRole("button", { name: "Delete nodes" }).click();
  await expectText(result, "Deleted 1 node.");
  assert.deepEqual((await h.api("GET", `/api/v1/configs/${configId}/nodes`)).nodes.map((n: { name: string }) => n.name), ["n3"]);
});

test("spec §2.2, §2.3: form errors name the field in the form's words and go when the form changes; names stop at the protocol's 64 characters; a network given by a host address says what was saved; a listen port without a public address is shown", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto("/configs");
  assert.equal(await page.getByLabel("Name", { exact: true }).getAttribute("maxlength"), "64", "the config name field stops at the protocol's limit");
  await page.getByLabel("Name", { exact: true }).fill("lab");
  await page.getByLabel("Network CIDR").fill("10.72.0.0/33");
  await page.getByRole("button", { name: "Create config" }).click();
  await expectText(page.getByRole("alert"), /^Network CIDR "10\.72\.0\.0\/33" is invalid: /);
  // Editing the form clears the error it no longer describes.
  await page.getByLabel("Network CIDR").fill("10.72.0.5/24");
  await page.getByRole("alert").waitFor({ state: "detached" });

  // 10.72.0.5/24 is a host address: the service keeps the network; the page says so.
  await page.getByRole("button", { name: "Create config" }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "lab");
  await expectText(page.getByRole("status").filter({ hasText: /saved as/ }), /10\.72\.0\.5\/24 .*saved as 10\.72\.0\.0\/24/);

  // Add a node: the name field has the protocol's limit; an error names the field by its label.
  assert.equal(await page.getByLabel("Node name").getAttribute("maxlength"), "64", "the node name field stops at the protocol's limit");
  await page.getByLabel("Node name").fill("n1");
  await page.getByLabel("Public address").fill("not a host!");
  await page.getByRole("button", { name: "Add node" }).click();
  const alert = page.getByRole("alert");
  await expectText(alert, "Public address: must be an IPv4 address, an IPv6 address or a host name");
  assert.equal(await page.getByLabel("Public address").getAttribute("aria-invalid"), "true");
  await page.getByLabel("Public address").fill("");
  await alert.waitFor({ state: "detached" });

  // A listen port without a public address is kept; the table shows it.
  await page.getByLabel("Listen port", { exact: true }).fill("51821");
  await page.getByRole("button", { name: "Add node" }).click();
  await expectText(page.getByRole("status").filter({ hasText: /^Node / }), "Node n1 added.");
  const row = page.getByRole("table").getByRole("row").filter({ has: page.getByRole("link", { name: "n1", exact: true }) });
  await expectText(row, /none · port 51821/);

  // A second error replaces the first: one alert, the newest.
  await page.getByLabel("Node name").fill("n1");
  await page.getByRole("button", { name: "Add node" }).click();
  await expectText(alert, /^Node name: a node named "n1" already exists/);
  assert.equal(await alert.count(), 1);
  await expectAccessible(page, "mesh-form-errors");
  await screenshot(page, "walkthrough-mesh-errors");
});

test("spec §1.5 (config pushes go to dynamic nodes): bulk push is offered only for a selection with dynamic nodes and says how many static ones it skips; an empty config opens its add-node form", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const empty = await h.api("POST", "/api/v1/configs", { name: "empty", tunnel_protocol: "wireguard", network_cidr: "10.73.0.0/24" });
  const { configId } = await meshWith(h, "mixed", "10.74.0.0/24", [{ name: "s1" }, { name: "d1", mode: "dynamic" }]);
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${empty.config_id}`);
  await page.getByText("No nodes yet. Add the first one above.").waitFor();
  await page.getByLabel("Node name").waitFor({ state: "visible" });

  await page.goto(`/configs/${configId}`);
  await page.getByRole("checkbox", { name: "Select s1" }).check();
  const bulk = page.getByRole("group", { name: "Bulk actions" });
  await expectText(bulk, /1 selected/);
  assert.equal(await bulk.getByRole("button", { name: /^Push config/ }).count(), 0, "no push for a static-only selection");
  await page.getByRole("checkbox", { name: "Select d1" }).check();
  await bulk.getByRole("button", { name: "Push config to 1 dynamic node" }).waitFor();
  await expectText(bulk, /1 static node skipped/);
  await screenshot(page, "walkthrough-mesh-bulk");
});

test("keyboard: after Create download link the focus is on the new link, not on the page; the bulk actions come after the rows they act on", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const { configId, ids } = await meshWith(h, "lab", "10.75.0.0/24", [{ name: "n1" }, { name: "n2" }]);
  const page = await h.newPage();
  await login(page);
  await page.goto(`/configs/${configId}/nodes/${ids["n1"]}`);
  await page.getByRole("button", { name: "Create download link" }).focus();
  await page.keyboard.press("Enter");
  await page.getByRole("link", { name: /^Download .*\.conf$/ }).waitFor();
  await page.locator("a:focus").waitFor().catch(async () => assert.fail(`the focus is on the new download link, not on ${await focusedName(page)}`));
  assert.match(await focusedName(page), /^Download .*\.conf$/);

  await page.goto(`/configs/${configId}`);
  await page.getByRole("checkbox", { name: "Select n2" }).check();
  await page.getByRole("table").getByRole("link", { name: "n2", exact: true }).focus();
  await page.keyboard.press("Tab");
  assert.equal(await focusedName(page), "Delete selected", "Tab from the last row goes to the bulk actions");
});

test("phones: the configs table and the nodes table are stacked cards at 390 px, nothing scrolls sideways and every action is on screen", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const { configId } = await meshWith(h, "lab-with-a-long-name", "10.76.0.0/24", [{ name: "gateway-frankfurt" }, { name: "laptop-anna" }]);
  const page = await phonePage(h);
  await waitLive(page);
  await page.goto("/configs");
  const del = page.getByRole("button", { name: "Delete config lab-with-a-long-name" });
  await del.waitFor();
  assert.ok((await rightEdge(del)) <= VIEWPORTS.phone.width, "Delete is on screen");
  await expectNoSidewaysScroll(page, "the configs table does not scroll sideways");
  await expectAccessible(page, "configs-phone");
  await screenshot(page, "walkthrough-configs");

  await page.goto(`/configs/${configId}`);
  const link = page.getByRole("table").getByRole("link", { name: "laptop-anna", exact: true });
  await link.waitFor();
  await expectNoSidewaysScroll(page, "the nodes table does not scroll sideways");
  const row = page.getByRole("table").getByRole("row").filter({ has: page.getByRole("link", { name: "laptop-anna", exact: true }) });
  assert.ok((await rightEdge(row.getByText(/^10\.76\.0\.\d+$/))) <= VIEWPORTS.phone.width, "the tunnel address is on screen");
  await page.getByRole("checkbox", { name: "Select all shown nodes" }).tap();
  await expectText(page.getByRole("group", { name: "Bulk actions" }), /2 selected/);
  await expectAccessible(page, "mesh-phone");
  await screenshot(page, "walkthrough-mesh-phone");
});
