/**
 * The backups page: create a snapshot, download it through the page's token
 * link, import that file, restore it; the views refresh and the node list returns to the earlier
 * state. Axe (light and dark) and screenshots of the page.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectAccessible, expectFigure, expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

test("spec §6.5 rule 7, §2.4: backups page creates a snapshot, downloads it by token link, imports that file and restores it; the node list returns to the earlier state", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "keep", tunnel_protocol: "wireguard", network_cidr: "10.40.0.0/24" });
  const nodesPath = `/api/v1/configs/${cfg.config_id}/nodes`;
  for (const name of ["n1", "n2"]) await h.api("POST", nodesPath, { name, mode: "static", public_address: `${name}.example.net`, listen_port: 51820 });
  const names = async () => ((await h.api("GET", nodesPath)).nodes as Array<{ name: string }>).map((n) => n.name).sort();
  assert.deepEqual(await names(), ["n1", "n2"]);

  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Backups" }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "Backups");
  await expectText(page.locator("main"), /No snapshots yet/);
  await expectAccessible(page, "backups-empty");
  await screenshot(page, "backups-empty");

  // Create: the row appears (snapshot.list.updated / the create answer).
  await page.getByRole("button", { name: "Create snapshot" }).click();
  const table = page.getByRole("table", { name: "Snapshots" });
  await table.getByRole("row").nth(1).waitFor();
  const original = (await table.getByRole("rowheader").first().innerText()).trim();
  assert.match(original, /^snap/);

  // Download: a token link that works without the admin session (spec §2.1, §3.7).
  await page.getByRole("button", { name: `Get a download link for ${original}` }).click();
  const link = page.getByRole("link", { name: `Download ${original}` });
  const href = await link.getAttribute("href");
  assert.match(href ?? "", /^\/api\/v1\/backups\/export\/.+\?download_token=/);
  const res = await fetch(new URL(href!, h.baseUrl));
  assert.equal(res.status, 200);
  const zip = Buffer.from(await res.arrayBuffer());
  assert.equal(zip.subarray(0, 2).toString("latin1"), "PK", "a zip file");

  // The state changes after the snapshot: two nodes added, one deleted.
  for (const name of ["n3", "n4"]) await h.api("POST", nodesPath, { name, mode: "static", public_address: `${name}.example.net`, listen_port: 51820 });
  const n1 = ((await h.api("GET", nodesPath)).nodes as Array<{ name: string; node_id: string }>).find((n) => n.name === "n1")!;
  await h.api("DELETE", `${nodesPath}/${n1.node_id}`);
  assert.deepEqual(await names(), ["n2", "n3", "n4"]);
  // Home read afresh (a reload) counts 3; the restore must change what it shows without one.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Home" }).click();
  await page.reload();
  await expectFigure(page, "Nodes", 3);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Backups" }).click();

  // Import the downloaded file: a second snapshot appears.
  await page.getByLabel("Snapshot file (.zip)").setInputFiles({ name: `${original}.zip`, mimeType: "application/zip", buffer: zip });
  await page.getByRole("button", { name: "Import snapshot" }).click();
  await expectText(page.getByRole("status").filter({ hasText: "Imported as" }), /Imported as snap/);
  const imported = (await page.getByRole("status").filter({ hasText: "Imported as" }).innerText()).match(/Imported as (\S+)\./)?.[1];
  assert.ok(imported !== undefined && imported !== original);
  await table.getByRole("rowheader", { name: imported }).waitFor();
  assert.equal(await table.getByRole("rowheader").count(), 2);
  await expectAccessible(page, "backups");
  await screenshot(page, "backups");

  // Restore the imported one, behind a confirmation.
  await page.getByRole("button", { name: `Restore ${imported}` }).click();
  const dialog = page.getByRole("dialog", { name: `Restore ${imported}?` });
  await dialog.waitFor();
  await screenshot(page, "backups-restore-confirm");
  await dialog.getByRole("button", { name: "Restore this snapshot" }).click();
  await dialog.waitFor({ state: "hidden" });
  assert.deepEqual(await names(), ["n1", "n2"]);

  // The views refresh without a reload: home counts the restored nodes.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Home" }).click();
  await expectFigure(page, "Nodes", 2);

  // Delete, behind a confirmation.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Backups" }).click();
  await page.getByRole("button", { name: `Delete ${original}` }).click();
  await page.getByRole("dialog", { name: `Delete ${original}?` }).getByRole("button", { name: "Delete this snapshot" }).click();
  await table.getByRole("rowheader", { name: original }).waitFor({ state: "detached" });
  assert.equal(await table.getByRole("rowheader").count(), 1);
});
