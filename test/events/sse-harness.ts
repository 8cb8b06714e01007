import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { get, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings, type Settings } from "../../src/config.js";
import type { SseEventType } from "../../src/events/event-types.js";
import { EventHub, type EventHubOptions, type SystemStatusPayload } from "../../src/events/hub.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import { login } from "../helpers/api.js";
import { sqliteOf } from "../../src/store/connection.js";

export const ADMIN_PASSWORD = "correct horse battery staple";

/**
 * Listens on 127.0.0.1:0 and logs in as admin over real HTTP.
 * @returns the service's base URL and an admin bearer token
 */
export async function listenAndLogin(server: AppContext, password = ADMIN_PASSWORD): Promise<{ baseUrl: string; token: string }> {
  await server.app.listen({ host: "127.0.0.1", port: 0 });
  const address = server.app.server.address();
  assert.ok(address !== null && typeof address === "object");
  const baseUrl = `http://127.0.0.1:${address.port}`;
  return { baseUrl, token: await login(baseUrl, password) };
}
export const STREAM_PATH = "/api/v1/events/stream";

/** Hub options a test may override. */
export type HubOverrides = Partial<Omit<EventHubOptions, "clock" | "log">>;

export interface SseServer {
  server: AppContext;
  hub: EventHub;
  clock: ManualClock;
  /** `http://127.0.0.1:{port}` */
  baseUrl: string;
  /** An admin bearer token from `POST /api/v1/auth/login`. */
  token: string;
  /** Opens the stream over real HTTP, as the admin unless `token` says otherwise (null: no header). */
  open(opts?: { token?: string | null; lastEventId?: string }): Promise<SseClient>;
  /** Opens the stream on a raw socket that never reads: a console whose tab hangs. */
  openStalled(): Promise<Socket>;
  /** Closes the server (once; also run after the test). */
  close(): Promise<void>;
}

/**
 * The real service listening on 127.0.0.1:0 with the SSE route, a {@link ManualClock} and a temp
 * data directory (or `opts.dataDir`, removed after the test too); logged in as admin. `opts.settings`
 * overrides test settings. The one place that wires the hub: when `createServer`
 * builds the hub itself, only this function changes.
 */
export async function startSseServer(
  t: TestContext,
  hubOverrides: HubOverrides = {},
  opts: { settings?: Partial<Settings>; dataDir?: string; clock?: ManualClock } = {},
): Promise<SseServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "svc-sse-test-"));
  const clock = opts.clock ?? new ManualClock();
  const log = createLogger("silent");
  const server = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, ...opts.settings }), log, { clock, hub: hubOverrides });
  const hub = server.hub;
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= server.close());
  t.after(async () => {
    await close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const { baseUrl, token } = await listenAndLogin(server);

  return {
    server,
    hub,
    clock,
    baseUrl,
    token,
    close,
    open(opts = {}) {
      const headers: Record<string, string> = {};
      const tok = opts.token === undefined ? token : opts.token;
      if (tok !== null) headers.authorization = `Bearer ${tok}`;
      if (opts.lastEventId !== undefined) headers["last-event-id"] = opts.lastEventId;
      return openStream(`${baseUrl}${STREAM_PATH}`, headers);
    },
    async openStalled() {
      const socket = connect({ host: "127.0.0.1", port: Number(new URL(baseUrl).port) });
      socket.pause();
      await new Promise<void>((resolve, reject) => {
        socket.once("connect", resolve);
        socket.once("error", reject);
      });
      socket.on("error", () => {}); // the server resets it when it drops the stream
      socket.write(
        `GET ${STREAM_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`,
      );
      return socket;
    },
  };
}

/** One parsed SSE frame. */
export interface SseFrame {
  id: string | undefined;
  event: string | undefined;
  data: string;
  /** `data` parsed: `{type, payload}` (spec §6.5 frame fields). */
  json: { type: SseEventType; payload: Record<string, unknown> };
}

export interface SseClient {
  status: number;
  headers: IncomingHttpHeaders;
  /** Every frame received so far. */
  frames: SseFrame[];
  /** The whole body, for answers that are not streams (errors). */
  body(): Promise<string>;
  /** The next frame not yet taken by next()/waitFor(); waits for socket data, never for a timer. */
  next(): Promise<SseFrame>;
  /** Takes frames until one matches. */
  waitFor(match: (f: SseFrame) => boolean): Promise<SseFrame>;
  /** Resolves with "end" when the server ended the response, "close" when the connection was cut. */
  ended: Promise<"end" | "close">;
  destroy(): void;
}

/** GETs `url` with node:http and parses SSE frames incrementally as bytes arrive. */
export function openStream(url: string, headers: Record<string, string>): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req = get(url, { headers: { accept: "text/event-stream", ...headers } }, (res) => resolve(client(res)));
    req.on("error", reject);
  });
}

/** Guard against a test hanging forever when an expected frame never comes (not a timer wait). */
const GUARD_MS = 5000;

function client(res: IncomingMessage): SseClient {
  res.setEncoding("utf8");
  const frames: SseFrame[] = [];
  let cursor = 0;
  let buffer = "";
  let raw = "";
  let waiter: (() => void) | undefined;
  let finished = false;
  const wake = () => {
    const w = waiter;
    waiter = undefined;
    w?.();
  };
  const ended = new Promise<"end" | "close">((resolve) => {
    res.on("end", () => resolve("end"));
    res.on("close", () => resolve("close"));
    res.on("error", () => resolve("close"));
  });
  void ended.then(() => {
    finished = true;
    wake();
  });
  res.on("data", (chunk: string) => {
    raw += chunk;
    buffer += chunk.replaceAll("\r\n", "\n");
    let idx: number;
    while ((idx = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, idx);
      buffer = buffer.slice(idx + 2);
      const frame = parseFrame(block);
      if (frame) frames.push(frame);
    }
    wake();
  });

  const self: SseClient = {
    status: res.statusCode ?? 0,
    headers: res.headers,
    frames,
    ended,
    async body() {
      await ended;
      return raw;
    },
    async next() {
      const deadline = Date.now() + GUARD_MS;
      while (cursor >= frames.length) {
        if (finished) throw new Error(`stream ended; frames so far: ${frames.map((f) => f.event).join(", ")}`);
        if (Date.now() > deadline) throw new Error("no frame arrived");
        await new Promise<void>((resolve) => {
          waiter = resolve;
          const guard = setTimeout(resolve, GUARD_MS);
          guard.unref();
        });
      }
      const f = frames[cursor++];
      assert.ok(f);
      return f;
    },
    async waitFor(match) {
      for (;;) {
        const f = await self.next();
        if (match(f)) return f;
      }
    },
    destroy() {
      res.destroy();
    },
  };
  return self;
}

function parseFrame(block: string): SseFrame | undefined {
  let id: string | undefined;
  let event: string | undefined;
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") id = value;
    else if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return undefined;
  const text = data.join("\n");
  return { id, event, data: text, json: JSON.parse(text) as SseFrame["json"] };
}

/**
 * Publishes a marker payload that is not a wire shape, for tests of the hub's mechanics (ids,
 * replay, backpressure, sessions), whose payloads only mark frames. The typed `publish` refuses
 * such payloads at compile time on purpose (src/events/event-types.ts); this is the one way
 * around it, and only tests take it.
 */
export function publishMarker(hub: EventHub, type: SseEventType, payload: Record<string, unknown>): void {
  (hub.publish as (type: SseEventType, payload: unknown) => void).call(hub, type, payload);
}

/** A marker `system.status.updated` payload for the hub-mechanics tests (see {@link publishMarker}). */
export function markerStatus(payload: Record<string, unknown>): SystemStatusPayload {
  return payload as unknown as SystemStatusPayload;
}

/** Resolves once the hub has exactly `n` subscribers. */
export function subscribers(hub: EventHub, n: number): Promise<void> {
  if (hub.subscriberCount() === n) return Promise.resolve();
  return new Promise((resolve) => {
    const off = hub.onSubscribersChanged((count) => {
      if (count !== n) return;
      off();
      resolve();
    });
  });
}

/** The two frames every stream opens with (spec §6.5 rule 1), checked and returned. */
export async function opening(c: SseClient): Promise<[SseFrame, SseFrame]> {
  const status = await c.next();
  assert.equal(status.event, "system.status.updated");
  const sync = await c.next();
  assert.equal(sync.event, "system.clock.sync");
  return [status, sync];
}

/** One check of a frame against the committed database; throws (an assertion) when they disagree. */
export type CommittedCheck = (db: SQLite.Database, frame: { type: SseEventType; payload: any }) => void; // eslint-disable-line @typescript-eslint/no-explicit-any -- payloads are checked field by field

export interface CommitWatch {
  /** Frames checked, by type. */
  checked: Map<string, number>;
  /** Disagreements seen, one line each (empty when every frame matched the committed rows). */
  failures: string[];
}

/**
 * spec §6.5 rule 6 ("events are published after database writes"), checked at the only moment it
 * can fail: when the frame is handed to the hub, which writes it to every socket in the same
 * synchronous call. At that moment a second, read-only better-sqlite3 connection reads the rows the
 * frame describes; it sees committed rows only (WAL), so a frame emitted inside an open
 * transaction disagrees with it. (Checking when the test's client reads the frame cannot fail in
 * one process: the server's synchronous SQLite work always commits before the event loop gets to
 * the client's socket.)
 *
 * `checks` maps event types to their check; frames of other types pass unchecked.
 */
export function watchCommits(t: TestContext, s: SseServer, checks: Partial<Record<SseEventType, CommittedCheck>>): CommitWatch {
  const db = new SQLite(sqliteOf(s.server.store).name, { readonly: true });
  const watch: CommitWatch = { checked: new Map(), failures: [] };
  const hub = s.hub;
  const publish = hub.publish.bind(hub);
  hub.publish = (type, payload) => {
    const check = checks[type];
    if (check !== undefined && hub.subscriberCount() > 0) {
      try {
        check(db, { type, payload: JSON.parse(JSON.stringify(payload ?? null)) });
        watch.checked.set(type, (watch.checked.get(type) ?? 0) + 1);
      } catch (err) {
        watch.failures.push(`${type}: ${err instanceof Error ? err.message.replace(/\s+/g, " ") : String(err)}`);
      }
    }
    publish(type, payload);
  };
  t.after(() => {
    hub.publish = publish;
    db.close();
  });
  return watch;
}

/**
 * One service for a whole test file, started in the file's `before` and closed in its `after`
 * (each test makes its own config and nodes). Call at the top level of the file.
 * @returns a function answering the file's service
 */
export function fileSseServer(): () => Promise<SseServer> {
  let shared: Promise<SseServer> | undefined;
  const cleanups: Array<() => Promise<void> | void> = [];
  before(() => {
    // The harness registers its cleanup with `t.after`; for the file-wide service it runs in the file's `after`.
    shared = startSseServer({ after: (fn: () => Promise<void>) => cleanups.push(fn) } as unknown as TestContext);
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });
  return () => {
    assert.ok(shared, "fileSseServer: the file's before hook has not run");
    return shared;
  };
}
