/**
 * The console's single sign-on (README "Single sign-on (OIDC)"): "Sign in with …" only when the
 * server has an OpenID provider; through a real provider on loopback and back signed in, on the
 * page the visitor was going to; a refusal shown on the sign-in page with its reason.
 */
import assert from "node:assert/strict";
import { createServer } from "node:net";
import test from "node:test";
import { startProvider } from "../http/oidc-provider.js";
import type { Page } from "playwright-core";
import { expectAccessible, expectText, screenshot, startBackend, startConsole, storedToken } from "./harness.js";

/** The provider's development pages ask for a web font and a favicon: answered empty, so the test stays offline and quiet. */
async function offline(page: Page): Promise<Page> {
  await page.context().route(/fonts\.googleapis\.com|favicon\.ico/, (route) => route.fulfill({ status: 200, body: "" }));
  return page;
}

/** A TCP port free right now on loopback (the service's public URL must be known to the provider before it listens). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(address !== null && typeof address === "object");
  return address.port;
}

test("console SSO: the button only when configured; signs in through the provider, or shows why not", async (t) => {
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const p = await startProvider(t, [`${publicUrl}/api/v1/auth/oidc/callback`]);
  p.accounts.set("sub-alice", { preferred_username: "alice", groups: ["net-admins"] });
  p.accounts.set("sub-bob", { preferred_username: "bob", groups: ["contractors"] });
  const roleMap = new Map([["net-admins", "admin"]] as const);
  const oidc = { issuer: p.issuer, clientId: p.clientId, clientSecret: p.clientSecret, groupsClaim: "groups", roleMap, unknownUsers: "refuse" as const, label: "SSO", scopes: "openid profile" };
  const h = await startConsole(t, { httpPort: port, publicUrl, oidc });
  if (!h) return;

  // Not configured: a second server without SSO settings, in the same browser.
  const plain = await startBackend(t);
  const plainPage = await (await h.browser.newContext({ baseURL: plain.baseUrl })).newPage();
  const methodsAnswered = plainPage.waitForResponse((r) => r.url().endsWith("/api/v1/auth/methods"));
  await plainPage.goto("/login");
  await methodsAnswered;
  await plainPage.getByRole("heading", { name: "Mesh control" }).waitFor();
  assert.equal(await plainPage.getByRole("button", { name: /Sign in with/ }).count(), 0);

  // Configured: the button, through the provider, back signed in on the page asked for.
  const page = await offline(await h.newPage());
  await page.goto("/settings");
  const sso = page.getByRole("button", { name: "Sign in with SSO" });
  await sso.waitFor();
  await expectAccessible(page, "login with SSO");
  await screenshot(page, "login-sso");
  await sso.click();
  await page.locator('input[name="login"]').fill("sub-alice");
  await page.locator('input[name="password"]').fill("any password");
  await page.getByRole("button", { name: "Sign-in" }).click();
  await page.getByRole("button", { name: "Continue" }).click();
  await page.getByText("Signed in as alice (admin)", { exact: true }).waitFor();
  assert.equal(new URL(page.url()).pathname, "/settings");
  assert.equal(new URL(page.url()).hash, "", "the one-time code is gone from the address bar");
  const me = await fetch(new URL("/api/v1/auth/me", h.baseUrl), { headers: { authorization: `Bearer ${await storedToken(page)}` } });
  assert.deepEqual(((await me.json()) as { login: string }).login, "oidc");

  // Refused (no group of bob's maps to a role): back on the sign-in page with the reason, no session.
  const other = await offline(await h.newPage());
  await other.goto("/login");
  await other.getByRole("button", { name: "Sign in with SSO" }).click();
  await other.locator('input[name="login"]').fill("sub-bob");
  await other.locator('input[name="password"]').fill("any password");
  await other.getByRole("button", { name: "Sign-in" }).click();
  await other.getByRole("button", { name: "Continue" }).click();
  await expectText(other.getByRole("alert"), /None of your groups gives a role on this server/);
  assert.equal(new URL(other.url()).pathname, "/login");
  assert.equal(await storedToken(other), null);
  await screenshot(other, "login-sso-refused");
});
