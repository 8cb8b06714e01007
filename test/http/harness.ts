import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings, type Settings } from "../../src/config.js";
import { ERROR_CODES, type ErrorCode } from "../../src/errors.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import { sqliteOf } from "../../src/store/connection.js";

export const ADMIN_PASSWORD = "correct horse battery staple";

export interface Harness {
  server: AppContext;
  clock: ManualClock;
  token: string;
  dataDir: string;
  /** Sends a request as the admin (unless `auth: false` or another token is given). */
  req(method: string, url: string, body?: unknown, opts?: { auth?: boolean | string; headers?: Record<string, string> }): Promise<Res>;
  /**
   * SHA-256 over every row of every table but `audit_log`: equal before and after means nothing
   * was written. The audit log is left out because it records every attempt, refused ones
   * included, by design (README "Audit log"); tests that mean "a refusal changes nothing" mean
   * the installation's state, and check the audit entries themselves where they matter.
   */
  fingerprint(): string;
}

export interface Res {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- test convenience: bodies are checked field by field
}

/**
 * A real service over a real SQLite file in a temp directory, with a {@link ManualClock};
 * logged in as admin. Closed and removed after the test.
 */
/** One request by `inject`; the answer with its body parsed as JSON when it is JSON. */
export async function injectJson(
  server: AppContext,
  req: { method: string; url: string; headers?: Record<string, string>; payload?: string | object },
): Promise<Res> {
  const res = await server.app.inject({
    method: req.method as "GET",
    url: req.url,
    headers: req.headers ?? {},
    ...(req.payload === undefined ? {} : { payload: req.payload }),
  });
  let json: unknown;
  try {
    json = JSON.parse(res.body);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: res.headers, text: res.body, json };
}

export async function startHarness(t: TestContext, overrides: Partial<Settings> = {}, opts: { clock?: ManualClock } = {}): Promise<Harness> {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-test-"));
  const clock = opts.clock ?? new ManualClock();
  const settings = testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, ...overrides });
  const server = await createServer(settings, createLogger("silent"), { clock });
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const h: Harness = {
    server,
    clock,
    token: "",
    dataDir,
    async req(method, url, body, opts = {}) {
      const headers: Record<string, string> = { ...(opts.headers ?? {}) };
      const auth = opts.auth ?? true;
      if (auth !== false) headers.authorization = `Bearer ${typeof auth === "string" ? auth : h.token}`;
      let payload: string | undefined;
      if (body !== undefined) {
        payload = typeof body === "string" ? body : JSON.stringify(body);
        headers["content-type"] ??= "application/json";
      }
      return injectJson(server, { method, url, headers, ...(payload === undefined ? {} : { payload }) });
    },
    fingerprint() {
      const sqlite = sqliteOf(server.store);
      const tables = sqlite
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'audit_log' ORDER BY name")
        .all() as Array<{ name: string }>;
      const hash = createHash("sha256");
      for (const { name } of tables) {
        hash.update(`#${name}\n`);
        for (const row of sqlite.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all()) hash.update(JSON.stringify(row));
      }
      return hash.digest("hex");
    },
  };
  const login = await h.req("POST", "/api/v1/auth/login", { password: ADMIN_PASSWORD }, { auth: false });
  assert.equal(login.status, 200, login.text);
  h.token = login.json.access_token;
  return h;
}

/** Asserts an error answer: the registered status of `code` and the DESIGN §3 error body. */
export function assertError(res: Res, code: ErrorCode, context = ""): void {
  assert.equal(res.status, ERROR_CODES[code].status, `${context} status; body: ${res.text}`);
  assert.equal(res.json?.error?.code, code, `${context} code; body: ${res.text}`);
  assert.equal(typeof res.json.error.message, "string");
}

/** Creates a config and returns its body. */
export async function createConfig(
  h: Harness,
  body: { name?: string; tunnel_protocol?: string; network_cidr?: string } = {},
): Promise<{ config_id: string; [k: string]: unknown }> {
  const res = await h.req("POST", "/api/v1/configs", {
    name: body.name ?? `mesh-${Math.random().toString(36).slice(2, 8)}`,
    tunnel_protocol: body.tunnel_protocol ?? "wireguard",
    network_cidr: body.network_cidr ?? "10.20.0.0/24",
  });
  assert.equal(res.status, 201, res.text);
  return res.json;
}

/** Creates a node and returns its body. */
export async function createNode(
  h: Harness,
  configId: string,
  body: Record<string, unknown> = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test convenience: bodies are checked field by field
): Promise<{ node_id: string; address: string; [k: string]: any }> {
  const res = await h.req("POST", `/api/v1/configs/${configId}/nodes`, {
    name: `node-${Math.random().toString(36).slice(2, 8)}`,
    mode: "static",
    ...body,
  });
  assert.equal(res.status, 201, res.text);
  return res.json;
}
