/**
 * Lists for big fleets, in the console: the mesh page's nodes table loads the
 * node list page by page with the server's cursor as the user scrolls, sends its filters to the
 * server, and shows the server's counts (spec §6.5 rule 7: the console derives no state). The
 * real service in-process (SQLite file, embedded aedes on port 0), Debian's Chromium.
 */
import assert from "node:assert/strict";
import test from "node:test";
import type { Request } from "playwright-core";
import { expectAccessible, expectText, login, screenshot, startConsole } from "./harness.js";

const NODES = 230; // more than two pages of 100

test("a config with more nodes than one page loads the next page with the cursor on scroll; filters go to the server; counts are the server's", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "fleet", tunnel_protocol: "wireguard", network_cidr: "10.62.0.0/16" });
  for (let i = 0; i < NODES; i++) {
    h.clock.advance(1); // creation order is list order
    // Every 50th node is dynamic: the first one on the third page.
    const mode = i % 50 === 49 ? "dynamic" : "static";
    await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: `n-${String(i).padStart(3, "0")}`, mode, auto_pair: false });
  }

  const page = await h.newPage();
  const lists: URL[] = [];
  page.on("request", (req: Request) => {
    const url = new URL(req.url());
    if (url.pathname === `/api/v1/configs/${cfg.config_id}/nodes`) lists.push(url);
  });
  await login(page);
  await page.goto(`/configs/${cfg.config_id}`);
  const table = page.getByRole("table");
  await table.getByRole("link", { name: "n-000", exact: true }).waitFor();
  // The server's counts, though only one page is loaded.
  await expectText(page.getByRole("status").filter({ hasText: /nodes/ }), `${NODES} nodes`);
  // 226 static nodes have no agent: they are not counted offline (the 4 unbound dynamic nodes are).
  await expectText(page.getByLabel("Nodes by state"), /offline 4 · static \(no agent\) 226 · latest 0 · pending 4$/);
  assert.equal(await table.getAttribute("aria-rowcount"), String(NODES + 1), "the table says how many rows there are in all");
  assert.ok(lists.length >= 1);
  assert.ok(lists.every((u) => u.searchParams.get("limit") === "100" && !u.searchParams.has("cursor")), `first page only: ${lists.join(" ")}`);
  assert.equal(await table.getByRole("link", { name: "n-150", exact: true }).count(), 0, "row 151 is not loaded yet");

  // Scrolling down loads the next pages with the cursor the server gave.
  const scroller = page.getByLabel("Nodes table, scrollable");
  const last = table.getByRole("link", { name: `n-${NODES - 1}`, exact: true });
  const caption = table.locator("caption");
  await expectText(caption, `Nodes (100 loaded of ${NODES})`);
  // Each scroll to the end loads more (one page, or two when the first lands while the view is
  // still at the end: on a slow machine that happens), until every row is loaded.
  for (let loaded = 100, scrolls = 0; loaded < NODES; scrolls++) {
    assert.ok(scrolls < 3, `all ${NODES} rows load within 3 scrolls (${loaded} loaded)`);
    await scroller.evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
    await expectText(caption, new RegExp(`^\\s*Nodes \\((?!${loaded} )(200|${NODES}) loaded of ${NODES}\\)\\s*$`));
    loaded = Number(/\((\d+) loaded/.exec(await caption.innerText())?.[1]);
  }
  await scroller.evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
  await last.waitFor();
  const cursors = lists.map((u) => u.searchParams.get("cursor")).filter((c): c is string => c !== null);
  assert.equal(new Set(cursors).size, 2, `two more pages, each asked once with its cursor: ${lists.join(" ")}`);
  await screenshot(page, "mesh-pages-scrolled");

  // A filter goes to the server: the dynamic nodes, most of them beyond what the first page held.
  const before = lists.length;
  await page.getByLabel("Mode", { exact: true }).selectOption("dynamic");
  await expectText(page.getByRole("status").filter({ hasText: /nodes/ }), `4 of ${NODES} nodes match`);
  await expectText(table.getByRole("rowheader").last(), /n-199/);
  const filtered = lists.slice(before);
  assert.ok(filtered.some((u) => u.searchParams.get("mode") === "dynamic" && !u.searchParams.has("cursor")), filtered.join(" "));
  assert.deepEqual(await table.getByRole("rowheader").allInnerTexts().then((xs) => xs.map((x) => x.trim())), ["n-049", "n-099", "n-149", "n-199"]);
  // The text search too, after typing stops.
  await page.getByLabel("Search nodes").fill("n-22");
  await expectText(page.getByRole("status").filter({ hasText: /nodes/ }), `0 of ${NODES} nodes match`);
  assert.ok(lists.some((u) => u.searchParams.get("q") === "n-22" && u.searchParams.get("mode") === "dynamic"), lists.slice(before).join(" "));
  await page.getByLabel("Mode", { exact: true }).selectOption("");
  await expectText(page.getByRole("status").filter({ hasText: /nodes/ }), `10 of ${NODES} nodes match`);
  await expectAccessible(page, "mesh-pages");
  await screenshot(page, "mesh-pages-filtered");
});
