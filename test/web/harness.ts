/**
 * Browser-test harness for the web console (docs/console.md "Writing a browser test").
 *
 * {@link startConsole} starts the real service in-process (real SQLite file in a temp dir, the
 * embedded aedes broker on port 0, real HTTP on 127.0.0.1:0, the built console from `dist/web`)
 * and Debian's Chromium through `playwright-core` (`executablePath`, never a downloaded browser).
 * Where chromium is missing the test is skipped with the reason; under SVC_TEST_REQUIRE_SYSTEM=1
 * it fails instead (DESIGN §4, test/helpers/system.ts).
 *
 * Tests never sleep: they wait on what the page shows (`locator.waitFor`, {@link expectText}).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import assert from "node:assert/strict";
import { AxeBuilder } from "@axe-core/playwright";
import { chromium, type Browser, type Locator, type Page } from "playwright-core";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings, type Settings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import { findOnPath, requireSystem } from "../helpers/system.js";
import { repoRoot } from "../helpers/service.js";

export const ADMIN_PASSWORD = "correct horse battery staple";
/** Where screenshots go (git-ignored). */
export const RESULTS_DIR = join(repoRoot, "test-results", "console");
/** How long a page state may take to appear (the console reacts to SSE within milliseconds). */
export const UI_TIMEOUT_MS = 10_000;

/** The two viewports every page is checked at: desktop and a phone. */
export const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const;

/** The real service, listening: what {@link startBackend} starts. */
export interface Backend {
  server: AppContext;
  clock: ManualClock;
  /** `http://127.0.0.1:<port>` */
  baseUrl: string;
  /** An admin bearer token for REST calls made by the test itself ({@link Backend.api}). */
  token: string;
  /** A JSON REST call as the admin; throws with the answer when it is not 2xx. */
  api<T = any>(method: string, path: string, body?: unknown): Promise<T>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface ConsoleHarness extends Backend {
  browser: Browser;
  /** A fresh browser context (own storage: a second operator or browser) and its page. */
  newPage(opts?: { colorScheme?: "light" | "dark"; viewport?: { width: number; height: number } }): Promise<Page>;
}

/**
 * The real service in-process (SQLite file in a temp dir, embedded aedes broker on port 0, a
 * {@link ManualClock}, MQTT services on unless `overrides` say otherwise), listening on
 * 127.0.0.1:0, with an admin token; closed and removed after the test.
 */
export async function startBackend(t: TestContext, overrides: Partial<Settings> = {}): Promise<Backend> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-web-"));
  const clock = new ManualClock();
  const settings = testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, mqttEnabled: true, ...overrides });
  const server = await createServer(settings, createLogger("silent"), { clock });
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  // Port 0 unless the test fixed one (a test whose bind command must name this server's URL).
  const address = await server.app.listen({ host: "127.0.0.1", port: overrides.httpPort ?? 0 });
  const baseUrl = address.replace("localhost", "127.0.0.1");
  const login = await fetch(new URL("/api/v1/auth/login", baseUrl), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ password: ADMIN_PASSWORD }),
  });
  assert.equal(login.status, 200);
  const token = ((await login.json()) as { access_token: string }).access_token;
  return {
    server,
    clock,
    baseUrl,
    token,
    async api(method, path, body) {
      const res = await fetch(new URL(path, baseUrl), {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
      return text === "" ? undefined : JSON.parse(text);
    },
  };
}

let built = false;
/** Builds `dist/web` when missing or stale (scripts/build-web.ts), once per test process. */
export function ensureConsoleBuilt(): void {
  if (built) return;
  const r = spawnSync(process.execPath, ["--import", "tsx", join(repoRoot, "scripts", "build-web.ts")], { cwd: repoRoot, encoding: "utf8" });
  assert.equal(r.status, 0, `console build failed:\n${r.stdout}\n${r.stderr}`);
  built = true;
}

/**
 * Starts service and browser for one test; both are closed (and the data dir removed) after it.
 * Returns undefined when the test was skipped (chromium missing): `if (!h) return;`.
 * @param overrides settings (e.g. `{ mqttEnabled: false }`)
 */
export async function startConsole(t: TestContext, overrides: Partial<Settings> = {}): Promise<ConsoleHarness | undefined> {
  if (!requireSystem(t, { binaries: ["chromium"] })) return undefined;
  ensureConsoleBuilt();
  const browser = await chromium.launch({
    executablePath: findOnPath("chromium") ?? "/usr/bin/chromium",
    headless: true,
    // root in CI: Chromium's sandbox needs an unprivileged user.
    args: process.getuid?.() === 0 ? ["--no-sandbox"] : [],
  });
  // Registered before the service's: `after` hooks run in order, so the pages are gone before
  // the service closes (no reconnect attempts against a closed port in the output).
  t.after(() => browser.close());
  const backend = await startBackend(t, overrides);
  return {
    ...backend,
    browser,
    async newPage(opts = {}) {
      const context = await browser.newContext({
        baseURL: backend.baseUrl,
        viewport: opts.viewport ?? VIEWPORTS.desktop,
        colorScheme: opts.colorScheme ?? "light",
        // Copy buttons write the clipboard; tests read it back with clipboardText().
        permissions: ["clipboard-read", "clipboard-write"],
      });
      context.setDefaultTimeout(UI_TIMEOUT_MS);
      const page = await context.newPage();
      // Uncaught errors and console errors of the page end up in the test's output.
      page.on("pageerror", (err) => process.stderr.write(`[page error] ${err.stack ?? err.message}\n`));
      page.on("console", (msg) => {
        if (msg.type() === "error") process.stderr.write(`[page console.error] ${msg.text()}\n`);
      });
      return page;
    },
  };
}

/** Logs in through the login page and waits for the home page. */
export async function login(page: Page, password = ADMIN_PASSWORD): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "System", level: 1 }).waitFor();
}

/** The access token the console keeps for the browser's tabs (localStorage `svc.session`), or null. */
export async function storedToken(page: Page): Promise<string | null> {
  return page.evaluate<string | null>('JSON.parse(localStorage.getItem("svc.session") ?? "null")?.access_token ?? null');
}

/** What the page last put on the clipboard (a copy button's text). */
export async function clipboardText(page: Page): Promise<string> {
  return page.evaluate<string>("navigator.clipboard.readText()");
}

/** Waits until the connection indicator says the shared SSE stream is live. */
export async function waitLive(page: Page): Promise<void> {
  await page.locator('[data-status="live"]').waitFor();
}

/**
 * Waits until `locator` (its first match) shows exactly `expected` (a string, trimmed) or text
 * matching it (a RegExp), failing after `timeout` with the text it showed last. No sleeping:
 * Playwright polls the page.
 */
export async function expectText(locator: Locator, expected: string | RegExp, timeout = UI_TIMEOUT_MS): Promise<void> {
  const pattern = typeof expected === "string" ? new RegExp(`^\\s*${expected.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*$`) : expected;
  try {
    await locator.filter({ hasText: pattern }).first().waitFor({ timeout });
  } catch {
    const last = await locator.first().innerText({ timeout: 2_000 }).catch(() => "(nothing)");
    const body = await locator.page().locator("body").innerText({ timeout: 2_000 }).catch(() => "");
    assert.fail(`expected ${String(expected)} in ${String(locator)}; it shows ${JSON.stringify(last)}\n--- page text ---\n${body.slice(0, 2000)}`);
  }
}

/**
 * Waits until the figure named `label` (a `role=group` holding a label and a value, e.g. the home
 * cards) shows `value`.
 */
export async function expectFigure(page: Page, label: string, value: string | number): Promise<void> {
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  await expectText(page.getByRole("group", { name: label, exact: true }), new RegExp(`^\\s*${escape(label)}\\s*${escape(String(value))}\\s*$`));
}

/**
 * Screenshots of the page as it is, at 1280×800 and 390×844, light and dark, into
 * `test-results/console/<name>-<width>x<height>-<scheme>.png` (full page). Leaves the page in
 * light at its first viewport. Returns the files written.
 */
export async function screenshot(page: Page, name: string): Promise<string[]> {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const original = page.viewportSize() ?? VIEWPORTS.desktop;
  const files: string[] = [];
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const vp of Object.values(VIEWPORTS)) {
      await page.setViewportSize(vp);
      const file = join(RESULTS_DIR, `${name}-${vp.width}x${vp.height}-${scheme}.png`);
      await page.screenshot({ path: file, fullPage: true, animations: "disabled" });
      files.push(file);
    }
  }
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize(original);
  return files;
}

/**
 * axe-core on the page in light and in dark: fails listing every serious or critical violation
 * (rule, impact, the elements). `label` names the page in the message.
 */
export async function expectAccessible(page: Page, label: string): Promise<void> {
  const problems: string[] = [];
  for (const scheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    const result = await new AxeBuilder({ page }).analyze();
    for (const v of result.violations) {
      if (v.impact !== "serious" && v.impact !== "critical") continue;
      problems.push(`${label} (${scheme}): ${v.id} [${v.impact}] ${v.help}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
    }
  }
  await page.emulateMedia({ colorScheme: "light" });
  assert.deepEqual(problems, [], problems.join("\n"));
}
