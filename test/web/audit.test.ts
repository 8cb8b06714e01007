/**
 * The Audit page (README "Audit log"): entries newest first, filters kept in the URL (they survive
 * a reload), new entries arriving live over SSE (`audit.appended`), the NDJSON export downloaded
 * with the session's bearer token, and the chain's verification, intact and then after a row was
 * edited in the database file. A viewer is refused with the API's reason.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import test from "node:test";
import { sqliteOf } from "../../src/store/connection.js";
import { expectAccessible, expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

test("Audit page: newest first, filters in the URL, live over SSE, NDJSON export, chain verification (intact, then naming an edited entry)", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "audited-net", tunnel_protocol: "wireguard", network_cidr: "10.61.0.0/24" });
  await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "gw", mode: "static", public_address: "192.0.2.1" });
  await h.api("POST", "/api/v1/users", { username: "vera", password: "a long enough password", role: "viewer" });
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Audit", exact: true }).click();
  await page.getByRole("heading", { name: "Audit log", level: 1 }).waitFor();
  const actions = page.locator(".audit-table tbody th");
  // Newest first: this browser's sign-in, then the writes before it.
  await expectText(actions.first(), "auth.login");
  assert.deepEqual((await actions.allInnerTexts()).slice(1, 5), ["user.create", "node.create", "config.create", "auth.login"]);
  await expectAccessible(page, "audit page");
  await screenshot(page, "audit");

  // A filter is kept in the URL and survives a reload.
  await page.getByLabel("Action").fill("node.");
  await page.waitForURL(/[?&]action=node\./);
  await actions.filter({ hasText: "auth.login" }).first().waitFor({ state: "detached" });
  assert.deepEqual(await actions.allInnerTexts(), ["node.create"]);
  await page.reload();
  assert.equal(await page.getByLabel("Action").inputValue(), "node.");
  await expectText(actions.first(), "node.create");

  // Live: a write made elsewhere appears without a reload.
  await waitLive(page);
  await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "edge", mode: "static", public_address: "192.0.2.2" });
  await actions.nth(1).waitFor();

  // Export: the filtered entries as NDJSON, fetched with the session's token.
  const download = page.waitForEvent("download");
  await page.getByRole("button", { name: "Export NDJSON" }).click();
  const file = await (await download).path();
  const lines = readFileSync(file, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l) as { action: string; hash: string });
  assert.deepEqual(lines.map((l) => l.action), ["node.create", "node.create"]);
  assert.match(lines[0]?.hash ?? "", /^[0-9a-f]{64}$/);

  // Verify: intact; then an entry edited in the file is named.
  await page.getByRole("button", { name: "Verify chain" }).click();
  await expectText(page.getByRole("status").filter({ hasText: "Chain" }), /Chain intact: \d+ entries checked\./);
  const sqlite = sqliteOf(h.server.store);
  sqlite.exec("DROP TRIGGER audit_log_append_only");
  sqlite.prepare("UPDATE audit_log SET actor_name = 'mallory' WHERE audit_id = 3").run();
  await page.getByRole("button", { name: "Verify chain" }).click();
  await expectText(page.getByRole("alert"), /Chain broken at entry #3/);
  await screenshot(page, "audit-broken");

  // A viewer: the page says why it shows nothing.
  const viewer = await h.newPage();
  await viewer.goto("/login");
  await viewer.getByLabel("Username").fill("vera");
  await viewer.getByLabel("Password", { exact: true }).fill("a long enough password");
  await viewer.getByRole("button", { name: "Sign in" }).click();
  await viewer.getByRole("heading", { name: "System", level: 1 }).waitFor();
  await viewer.goto("/audit");
  await expectText(viewer.getByRole("alert"), /needs the admin role/);
});
