/**
 * The Users page (owners) and the Tokens page (README "Users, roles and tokens"): an owner
 * creates a user, changes their role, is refused demoting the last owner (409, shown by the
 * page), disables and deletes the user; then creates a personal access token whose secret is
 * shown once, copies it, uses it, and revokes it (401 from then on).
 */
import assert from "node:assert/strict";
import test from "node:test";
import type { Locator } from "playwright-core";
import { clipboardText, expectAccessible, expectText, login, screenshot, startConsole } from "./harness.js";

/** Waits until the role select shows `role` (its checked option: options are never "visible" to Playwright). */
async function roleShown(select: Locator, role: string): Promise<void> {
  await select.locator(`option[value="${role}"]:checked`).waitFor({ state: "attached" });
}

test("an owner manages users on the Users page (create, role change, last-owner refusal, disable, delete) and a token on the Tokens page (secret once, copy, revoke)", { timeout: 90_000 }, async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "Users");
  const table = page.getByRole("table", { name: "Users" });
  const row = (name: string) => table.getByRole("row").filter({ has: page.getByRole("rowheader", { name: new RegExp(`^${name}`) }) });

  // Create: a short password is refused by field, then the user joins the list.
  await page.getByLabel("Username").fill("olga");
  await page.getByLabel("Password", { exact: true }).fill("short");
  await page.getByLabel("Role", { exact: true }).selectOption("operator");
  await page.getByRole("button", { name: "Create user" }).click();
  await expectText(page.getByRole("alert"), /^Password: must be at least 12 characters$/);
  assert.equal(await page.getByLabel("Password", { exact: true }).getAttribute("aria-invalid"), "true");
  await page.getByLabel("Password", { exact: true }).fill("a long enough password");
  await page.getByRole("button", { name: "Create user" }).click();
  await expectText(row("olga").getByRole("cell").nth(1), "enabled");
  assert.equal(await row("olga").getByLabel("Role of olga").inputValue(), "operator");

  // Change role: the API holds the new one.
  await row("olga").getByLabel("Role of olga").selectOption("admin");
  await roleShown(row("olga").getByLabel("Role of olga"), "admin");
  const byName = async (name: string) => ((await h.api("GET", "/api/v1/users")).users as Array<{ username: string; role: string; disabled: boolean }>).find((u) => u.username === name);
  assert.equal((await byName("olga"))?.role, "admin");

  // The last enabled owner cannot be demoted: the page says so and the select stays at owner.
  await row("admin").getByLabel("Role of admin").selectOption("viewer");
  await expectText(page.getByRole("alert"), /^admin: This is the last enabled owner: make another user owner first$/);
  await roleShown(row("admin").getByLabel("Role of admin"), "owner");
  assert.equal((await byName("admin"))?.role, "owner");
  await expectAccessible(page, "users");
  await screenshot(page, "users");

  // Disable, then delete (confirmed).
  await page.getByRole("button", { name: "Disable olga" }).click();
  await expectText(row("olga").getByRole("cell").nth(1), "disabled");
  assert.equal((await byName("olga"))?.disabled, true);
  await page.getByRole("button", { name: "Delete user olga" }).click();
  await page.getByRole("dialog", { name: "Delete user olga?" }).getByRole("button", { name: "Delete user" }).click();
  await row("olga").waitFor({ state: "detached" });
  assert.equal(await byName("olga"), undefined);

  // Tokens: create → the secret once, with Copy.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Tokens" }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "Personal access tokens");
  await page.getByLabel("Name").fill("ci deploy");
  await page.getByLabel("Role").selectOption("operator");
  await page.getByLabel("Expires in (days)").fill("30");
  await page.getByRole("button", { name: "Create token" }).click();
  const secretBox = page.getByLabel("New token secret");
  await expectText(secretBox, /^svc_pat_\S{20,}$/);
  const secret = (await secretBox.innerText()).trim();
  await expectText(page.getByRole("status").filter({ hasText: "not see it again" }), /Copy it now: you will not see it again\./);
  await page.getByRole("button", { name: "Copy token" }).click();
  assert.equal(await clipboardText(page), secret);
  const tokens = page.getByRole("table", { name: "Personal access tokens" });
  // Created is relative to the browser's clock: "just now", or some seconds ago on a busy machine.
  await expectText(tokens.getByRole("row").filter({ hasText: "ci deploy" }), /ci deploy\s*admin\s*operator\s*(just now|\d+ seconds? ago)\s*in 30 days\s*never/);
  await expectAccessible(page, "tokens");
  await screenshot(page, "tokens-created");

  // The secret works as a bearer token; once dismissed it is nowhere on the page.
  const me = await fetch(new URL("/api/v1/auth/me", h.baseUrl), { headers: { authorization: `Bearer ${secret}` } });
  assert.equal(((await me.json()) as { via: string }).via, "token");
  await page.getByRole("button", { name: "Done, I have copied it" }).click();
  await page.getByRole("button", { name: "Create token" }).waitFor();
  assert.ok(!(await page.locator("body").innerText()).includes(secret), "the secret is not shown again");

  // Revoke (confirmed): 401 from the next request.
  await page.getByRole("button", { name: "Revoke token ci deploy" }).click();
  await page.getByRole("dialog", { name: "Revoke token ci deploy?" }).getByRole("button", { name: "Revoke token" }).click();
  await tokens.getByRole("row").filter({ hasText: "ci deploy" }).waitFor({ state: "detached" });
  const after = await fetch(new URL("/api/v1/auth/me", h.baseUrl), { headers: { authorization: `Bearer ${secret}` } });
  assert.equal(after.status, 401);
  await screenshot(page, "tokens");
});
