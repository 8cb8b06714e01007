import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttpServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { TestContext } from "node:test";
import { testSettings, type Settings } from "../../src/config.js";
import { ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext, type ServerOverrides } from "../../src/server.js";
import { injectJson, type Res } from "../http/harness.js";

export const ADMIN_PASSWORD = "correct horse battery staple";

/** One request the receiver got. */
export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** What the receiver answers next: a status with headers; the default is 200. */
export interface Answer {
  /** 0: no answer at all (the request hangs until the receiver closes). */
  status: number;
  headers?: Record<string, string>;
}

/** A real HTTP receiver on loopback: records every request and answers from a script. */
export interface Receiver {
  url: string;
  received: Received[];
  /** Answers to give, in order; when empty, 200. */
  script: Answer[];
  close(): Promise<void>;
}

export async function startReceiver(t: TestContext): Promise<Receiver> {
  const received: Received[] = [];
  const script: Answer[] = [];
  const server: Server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      const answer = script.shift() ?? { status: 200 };
      if (answer.status === 0) return;
      res.writeHead(answer.status, answer.headers ?? {});
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  t.after(close);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received, script, close };
}

/** A service over a data directory with a ManualClock at the wall clock's time (the webhook library checks timestamps against it). */
export interface AlertsHarness {
  server: AppContext;
  clock: ManualClock;
  dataDir: string;
  /** Every log line the service wrote, JSON. */
  logs: string[];
  req(method: string, url: string, body?: unknown): Promise<Res>;
  /** A second service over the same data directory and database, this one closed first (a restart). */
  restart(): Promise<AlertsHarness>;
}

/** Test defaults: loopback receivers allowed, a short retry schedule (1 s, 2 s, 5 s), a session that outlives the days the clock is moved. */
export const ALERT_TEST_SETTINGS: Partial<Settings> = { alertsAllowPrivateTargets: true, alertsRetryScheduleMs: [1000, 2000, 5000], adminSessionTtlMs: 7 * 24 * 3600 * 1000 };

export async function startAlerts(
  t: TestContext,
  overrides: Partial<Settings> = {},
  serverOverrides: ServerOverrides = {},
  reuse?: { dataDir: string; clock: ManualClock; logs: string[] },
): Promise<AlertsHarness> {
  const dataDir = reuse?.dataDir ?? mkdtempSync(join(tmpdir(), "svc-alerts-"));
  const clock = reuse?.clock ?? new ManualClock(Date.now());
  const logs = reuse?.logs ?? [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      logs.push(chunk.toString("utf8"));
      cb();
    },
  });
  const settings = testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, mqttEnabled: false, ...ALERT_TEST_SETTINGS, ...overrides });
  const server = await createServer(settings, createLogger("debug", sink), { clock, ...serverOverrides, alerts: { random: () => 0, ...serverOverrides.alerts } });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await server.close();
  };
  if (reuse === undefined) t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  t.after(close);
  const login = await injectJson(server, { method: "POST", url: "/api/v1/auth/login", headers: { "content-type": "application/json" }, payload: { password: ADMIN_PASSWORD } });
  assert.equal(login.status, 200, login.text);
  const token = login.json.access_token as string;
  return {
    server,
    clock,
    dataDir,
    logs,
    req: (method, url, body) =>
      injectJson(server, {
        method,
        url,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      }),
    restart: async () => {
      await close();
      return startAlerts(t, overrides, serverOverrides, { dataDir, clock, logs });
    },
  };
}

/**
 * Waits until `check` holds, on real turns of the event loop: the worker's attempts are real
 * network I/O. Time in the service moves only with the ManualClock.
 */
export async function until<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Moves the service's clock and lets the attempts it starts run. */
export async function advance(h: AlertsHarness, ms: number): Promise<void> {
  h.clock.advance(ms);
  await new Promise((r) => setImmediate(r));
}

/** Creates a channel and answers its body (with the secret, for a webhook). */
export async function createChannel(h: AlertsHarness, body: Record<string, unknown>): Promise<Res["json"]> {
  const res = await h.req("POST", "/api/v1/alerts/channels", body);
  assert.equal(res.status, 201, res.text);
  return res.json;
}

/** A delivery from the log. */
export async function deliveryOf(h: AlertsHarness, channelId: string): Promise<Res["json"]> {
  const res = await h.req("GET", `/api/v1/alerts/deliveries?channel_id=${channelId}`);
  assert.equal(res.status, 200, res.text);
  return res.json.items[0];
}
