import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { TestContext } from "node:test";

/**
 * A fake EMQX 5 management API: a real node:http server on 127.0.0.1:0 answering the documented
 * shapes of the endpoints the `emqx` adapter uses (/work/shared/reference/brokers.md "EMQX 5.x";
 * EMQX's emqx_authn_api / emqx_mgmt_api_clients), with an in-memory user table of the built-in
 * database authenticator and a list of live clients. Every call is recorded.
 *
 * Endpoints:
 * - `POST   /api/v5/authentication/{id}/users` `{user_id, password, is_superuser?}` → 201
 *   `{user_id, is_superuser}`; 409 `ALREADY_EXISTS`
 * - `PUT    /api/v5/authentication/{id}/users/{user_id}` `{password?, is_superuser?}` → 200; 404
 * - `DELETE /api/v5/authentication/{id}/users/{user_id}` → 204; 404 `NOT_FOUND`
 * - `GET    /api/v5/authentication/{id}/users?page=&limit=` → `{data, meta: {page, limit, count, hasnext}}`
 *   (ordered by user_id, as EMQX's ordered_set table)
 * - `DELETE /api/v5/clients/{clientid}` → 204; 404 `CLIENTID_NOT_FOUND`
 * - `DELETE /api/v5/clients/{clientid}/authorization/cache` → 204; 404 `CLIENTID_NOT_FOUND`
 * - `DELETE /api/v5/authorization/cache` → 204
 * Anything without the right Basic credentials → 401 `BAD_API_KEY_OR_SECRET`.
 */

export interface RecordedCall {
  method: string;
  /** The raw (still percent-encoded) path, without the query. */
  path: string;
  /** The query string parameters. */
  query: Record<string, string>;
  /** The Authorization header as sent. */
  authorization: string | undefined;
  contentType: string | undefined;
  /** The parsed JSON body, or undefined when there was none. */
  body: unknown;
  /** The status answered (undefined when the fault hook hung or dropped the request). */
  status?: number;
}

export interface FakeUser {
  password: string;
  is_superuser: boolean;
}

/** What the fault hook may do with a call instead of answering it normally. */
export type Fault =
  | { kind: "status"; status: number; body?: string }
  /** Never answer (the client's timeout must fire). */
  | { kind: "hang" }
  /** Answer 200 with this raw body (malformed JSON or a wrong shape). */
  | { kind: "raw"; status: number; body: string };

export interface FakeEmqx {
  /** `http://127.0.0.1:{port}` */
  url: string;
  apiKey: string;
  apiSecret: string;
  /** The built-in database's users by user_id (plain passwords: this is a fake). */
  users: Map<string, FakeUser>;
  /** Client ids of connected clients. */
  clients: Set<string>;
  /** Client ids whose authorization cache is non-empty. */
  cachedClients: Set<string>;
  /** How many times the global authorization cache was cleared. */
  globalCacheClears: number;
  calls: RecordedCall[];
  /** Answers a call differently when it returns a fault; undefined: answer normally. */
  fault: ((call: RecordedCall) => Fault | undefined) | null;
  /** Stops the server (also registered with `t.after`). */
  close(): Promise<void>;
}

const AUTHN_ID = "password_based:built_in_database";

/** Starts a fake EMQX management API; closed after the test. */
export async function startFakeEmqx(t: TestContext, opts: { apiKey?: string; apiSecret?: string } = {}): Promise<FakeEmqx> {
  const apiKey = opts.apiKey ?? "svc-backend-key";
  const apiSecret = opts.apiSecret ?? "s3cret-api-secret-value-9f8e7d";
  const expectedAuth = `Basic ${Buffer.from(`${apiKey}:${apiSecret}`).toString("base64")}`;
  const sockets = new Set<Socket>();

  const fake: FakeEmqx = {
    url: "",
    apiKey,
    apiSecret,
    users: new Map(),
    clients: new Set(),
    cachedClients: new Set(),
    globalCacheClears: 0,
    calls: [],
    fault: null,
    close: async () => undefined,
  };

  const server: Server = createServer((req, res) => {
    void handle(fake, expectedAuth, req, res);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closing: Promise<void> | undefined;
  fake.close = () =>
    (closing ??= new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }));
  t.after(() => fake.close());
  return fake;
}

async function handle(fake: FakeEmqx, expectedAuth: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks).toString("utf8");
  const url = new URL(req.url ?? "/", "http://fake");
  let body: unknown;
  let badJson = false;
  if (raw.length > 0) {
    try {
      body = JSON.parse(raw);
    } catch {
      badJson = true;
    }
  }
  const call: RecordedCall = {
    method: req.method ?? "",
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    authorization: req.headers.authorization,
    contentType: req.headers["content-type"],
    body: badJson ? raw : body,
  };
  fake.calls.push(call);

  const send = (status: number, json?: unknown) => {
    call.status = status;
    if (json === undefined) {
      res.writeHead(status).end();
    } else {
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(json));
    }
  };

  const fault = fake.fault?.(call);
  if (fault?.kind === "hang") return;
  if (fault?.kind === "status") {
    call.status = fault.status;
    res.writeHead(fault.status, { "content-type": "application/json" }).end(fault.body ?? JSON.stringify({ code: "INTERNAL_ERROR", message: "fault" }));
    return;
  }
  if (fault?.kind === "raw") {
    call.status = fault.status;
    res.writeHead(fault.status, { "content-type": "application/json" }).end(fault.body);
    return;
  }

  if (call.authorization !== expectedAuth) return send(401, { code: "BAD_API_KEY_OR_SECRET", message: "Check api_key/api_secret" });
  if (badJson) return send(400, { code: "BAD_REQUEST", message: "invalid json" });

  const segments = url.pathname.split("/").slice(1); // ["api", "v5", ...]
  if (segments[0] !== "api" || segments[1] !== "v5") return send(404, { code: "NOT_FOUND", message: "no such route" });
  const rest = segments.slice(2).map((s) => decodeURIComponent(s));
  const method = call.method;

  // /authentication/{id}/users[/{user_id}]
  if (rest[0] === "authentication" && rest[2] === "users") {
    if (rest[1] !== AUTHN_ID) return send(404, { code: "NOT_FOUND", message: "Authenticator not found" });
    if (rest.length === 3 && method === "POST") {
      const b = body as { user_id?: unknown; password?: unknown; is_superuser?: unknown } | undefined;
      if (typeof b?.user_id !== "string" || typeof b.password !== "string" || (b.is_superuser !== undefined && typeof b.is_superuser !== "boolean")) {
        return send(400, { code: "BAD_REQUEST", message: "bad user" });
      }
      if (fake.users.has(b.user_id)) return send(409, { code: "ALREADY_EXISTS", message: "User already exists" });
      const isSuperuser = b.is_superuser === true;
      fake.users.set(b.user_id, { password: b.password, is_superuser: isSuperuser });
      return send(201, { user_id: b.user_id, is_superuser: isSuperuser });
    }
    if (rest.length === 3 && method === "GET") {
      const page = Number(url.searchParams.get("page") ?? "1");
      const limit = Number(url.searchParams.get("limit") ?? "100");
      if (!Number.isInteger(page) || page < 1 || !Number.isInteger(limit) || limit < 1 || limit > 10_000) {
        return send(400, { code: "INVALID_PARAMETER", message: "bad page or limit" });
      }
      const all = [...fake.users.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      const data = all.slice((page - 1) * limit, page * limit).map(([user_id, u]) => ({ user_id, is_superuser: u.is_superuser }));
      return send(200, { data, meta: { page, limit, count: all.length, hasnext: page * limit < all.length } });
    }
    if (rest.length === 4) {
      const userId = rest[3]!;
      const user = fake.users.get(userId);
      if (method === "PUT") {
        const b = body as { password?: unknown; is_superuser?: unknown } | undefined;
        if ((b?.password !== undefined && typeof b.password !== "string") || (b?.is_superuser !== undefined && typeof b.is_superuser !== "boolean")) {
          return send(400, { code: "BAD_REQUEST", message: "bad user" });
        }
        if (!user) return send(404, { code: "NOT_FOUND", message: "User not found" });
        if (typeof b?.password === "string") user.password = b.password;
        if (typeof b?.is_superuser === "boolean") user.is_superuser = b.is_superuser;
        return send(200, { user_id: userId, is_superuser: user.is_superuser });
      }
      if (method === "DELETE") {
        if (!user) return send(404, { code: "NOT_FOUND", message: "User not found" });
        fake.users.delete(userId);
        return send(204);
      }
    }
  }

  // /clients/{clientid}[/authorization/cache]
  if (rest[0] === "clients" && rest.length >= 2 && method === "DELETE") {
    const clientId = rest[1]!;
    if (rest.length === 2) {
      if (!fake.clients.delete(clientId)) return send(404, { code: "CLIENTID_NOT_FOUND", message: "Client ID not found" });
      fake.cachedClients.delete(clientId);
      return send(204);
    }
    if (rest.length === 4 && rest[2] === "authorization" && rest[3] === "cache") {
      if (!fake.clients.has(clientId)) return send(404, { code: "CLIENTID_NOT_FOUND", message: "Client ID not found" });
      fake.cachedClients.delete(clientId);
      return send(204);
    }
  }

  // /authorization/cache
  if (rest.length === 2 && rest[0] === "authorization" && rest[1] === "cache" && method === "DELETE") {
    fake.globalCacheClears++;
    fake.cachedClients.clear();
    return send(204);
  }

  return send(404, { code: "NOT_FOUND", message: "no such route" });
}
