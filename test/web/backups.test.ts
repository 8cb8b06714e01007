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
  // The button the keyboard was on is replaced by the link: the focus moves to it, not to the page.
  await page.locator(`a:focus[aria-label="Download ${original}"]`).waitFor();
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
  await page.getByLabel("Snapshot file (.zip or .zip.enc)").setInputFiles({ name: `${original}.zip`, mimeType: "application/zip", buffer: zip });
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

test("spec §2.4: the backups page says what a snapshot holds; an encrypted export imports and restores only with its passphrase; the restore names the dynamic nodes that must bind again and reports success", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "office", tunnel_protocol: "wireguard", network_cidr: "10.41.0.0/24" });
  const nodesPath = `/api/v1/configs/${cfg.config_id}/nodes`;
  await h.api("POST", nodesPath, { name: "gateway", mode: "static", public_address: "gw.example.net", listen_port: 51820 });
  for (const name of ["laptop-1", "laptop-2"]) await h.api("POST", nodesPath, { name, mode: "dynamic" });
  const names = async () => ((await h.api("GET", nodesPath)).nodes as Array<{ name: string }>).map((n) => n.name).sort();
  const passphrase = "plum orchard under seventeen lanterns";

  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Backups" }).click();
  const main = page.locator("main");
  // What a snapshot holds, what it does not, and how to keep it safe.
  await expectText(main, /every node's WireGuard private key/);
  await expectText(main, /not in a snapshot/i);
  await expectText(main, /admin password/);
  await expectText(main, /encrypt/i);
  assert.doesNotMatch(await main.innerText(), /without secrets/, "the page no longer says snapshots hold no secrets");

  // Create, encrypted: the two passphrase fields must agree.
  await page.getByLabel("Passphrase (optional)").fill(passphrase);
  await page.getByLabel("Repeat the passphrase").fill(`${passphrase}!`);
  await page.getByRole("button", { name: "Create encrypted snapshot" }).click();
  await expectText(page.getByRole("alert").filter({ hasText: "do not match" }), /The passphrases do not match/);
  await page.getByLabel("Repeat the passphrase").fill(passphrase);
  await page.getByRole("button", { name: "Create encrypted snapshot" }).click();
  const table = page.getByRole("table", { name: "Snapshots" });
  await table.getByRole("row").nth(1).waitFor();
  const original = (await table.getByRole("rowheader").first().innerText()).trim();
  await expectText(table.getByRole("row").nth(1), /Encrypted/);
  await expectText(table.getByRole("row").nth(1), /3 nodes \(2 dynamic\)/);
  assert.equal(await page.getByLabel("Passphrase (optional)").inputValue(), "", "the passphrase is not kept in the form");
  await expectAccessible(page, "backups-encrypted");
  await screenshot(page, "backups-encrypted");

  // The download token link (spec §2.1) serves the encrypted file.
  await page.getByRole("button", { name: `Get a download link for ${original}` }).click();
  const link = page.getByRole("link", { name: `Download ${original}` });
  assert.equal(await link.getAttribute("download"), `${original}.zip.enc`);
  const res = await fetch(new URL((await link.getAttribute("href")) ?? "", h.baseUrl));
  assert.equal(res.status, 200);
  const file = Buffer.from(await res.arrayBuffer());
  assert.equal(file.subarray(0, 8).toString("latin1"), "SVCSNAPE", "an encrypted snapshot file");

  // Change the state, then import the file: a wrong passphrase is refused with a clear message.
  const gateway = ((await h.api("GET", nodesPath)).nodes as Array<{ name: string; node_id: string }>).find((n) => n.name === "gateway");
  await h.api("DELETE", `${nodesPath}/${gateway?.node_id ?? ""}`);
  assert.deepEqual(await names(), ["laptop-1", "laptop-2"]);
  await page.getByLabel("Snapshot file (.zip or .zip.enc)").setInputFiles({ name: `${original}.zip.enc`, mimeType: "application/octet-stream", buffer: file });
  await page.getByLabel("Passphrase (for an encrypted file)").fill("not the passphrase");
  await page.getByRole("button", { name: "Import snapshot" }).click();
  await expectText(page.getByRole("alert").filter({ hasText: "passphrase" }), /passphrase does not open this encrypted snapshot/);
  await screenshot(page, "backups-import-wrong-passphrase");
  await page.getByLabel("Passphrase (for an encrypted file)").fill(passphrase);
  await page.getByRole("button", { name: "Import snapshot" }).click();
  const importedStatus = page.getByRole("status").filter({ hasText: "Imported as" });
  await expectText(importedStatus, /Imported as snap/);
  const imported = (await importedStatus.innerText()).match(/Imported as (\S+)\./)?.[1];
  assert.ok(imported !== undefined && imported !== original);
  await table.getByRole("rowheader", { name: imported }).waitFor();

  // Restore: the confirmation names the dynamic nodes that must bind again and asks for the passphrase.
  await page.getByRole("button", { name: `Restore ${imported}` }).click();
  const dialog = page.getByRole("dialog", { name: `Restore ${imported}?` });
  await dialog.waitFor();
  await expectText(dialog, /Its 2 dynamic nodes must bind again/);
  await expectText(dialog, /svcctl bind/);
  await dialog.getByLabel("Passphrase").fill("not the passphrase");
  await dialog.getByRole("button", { name: "Restore this snapshot" }).click();
  await expectText(dialog.getByRole("alert"), /passphrase does not open this encrypted snapshot/);
  assert.deepEqual(await names(), ["laptop-1", "laptop-2"], "a wrong passphrase changes nothing");
  await expectAccessible(page, "backups-restore-encrypted");
  await screenshot(page, "backups-restore-encrypted");
  await dialog.getByLabel("Passphrase").fill(passphrase);
  await dialog.getByRole("button", { name: "Restore this snapshot" }).click();
  await dialog.waitFor({ state: "hidden" });
  const restored = page.getByRole("status").filter({ hasText: "Restored" });
  await expectText(restored, new RegExp(`Restored ${imported}: 1 config, 3 nodes\\. 2 dynamic nodes must bind again`));
  assert.deepEqual(await names(), ["gateway", "laptop-1", "laptop-2"]);
  await screenshot(page, "backups-restored");
});

test("spec §2.4: restoring an unencrypted snapshot asks no passphrase, says when no node must bind again, and reports success", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "static-only", tunnel_protocol: "wireguard", network_cidr: "10.42.0.0/24" });
  await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "s1", mode: "static", public_address: "s1.example.net", listen_port: 51820 });
  const snap = await h.api("POST", "/api/v1/backups", {});
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Backups" }).click();
  await expectText(page.getByRole("table", { name: "Snapshots" }).getByRole("row").nth(1), /Not encrypted/);
  await page.getByRole("button", { name: `Restore ${snap.snapshot_id}` }).click();
  const dialog = page.getByRole("dialog", { name: `Restore ${snap.snapshot_id}?` });
  await dialog.waitFor();
  await expectText(dialog, /It holds no dynamic node/);
  assert.equal(await dialog.getByLabel("Passphrase").count(), 0);
  await screenshot(page, "backups-restore-confirm-plain");
  await dialog.getByRole("button", { name: "Restore this snapshot" }).click();
  await dialog.waitFor({ state: "hidden" });
  await expectText(page.getByRole("status").filter({ hasText: "Restored" }), new RegExp(`Restored ${snap.snapshot_id}: 1 config, 1 node\\. No node must bind again\\.`));
});
