import PQueue from "p-queue";
import { z } from "zod";
import type { Logger } from "../logger.js";
import { nodeClientId, parseNodeUsername } from "./authz.policy.js";
import {
  BrokerUnavailableError,
  type BackendBrokerAccount,
  type BrokerAdmin,
  type NodeBrokerAccount,
  type ReconcileReport,
} from "./broker-admin.js";

/**
 * The `emqx` broker adapter (DESIGN §1 "broker adapters"): mirrors the store's broker accounts into
 * EMQX 5 through its management REST API (`/api/v5`, HTTP Basic with an API key and secret).
 *
 * - Accounts live in the built-in database authenticator (`password_based:built_in_database`).
 *   Nodes are never superusers: EMQX superusers skip authorization, and every node must be
 *   judged by `POST /api/internal/emqx/authz` (spec §4 rule 13, §5 rules 1-2).
 * - The backend user is not a superuser either by default (docs/decisions.md "The EMQX adapter"): its
 *   grants are exactly spec §5 rule 3, answered by the same policy.
 * - EMQX does not disconnect a live client when its user is deleted or its password changes,
 *   so {@link BrokerAdmin.putNode} and {@link BrokerAdmin.removeNode} kick the client
 *   (`DELETE /api/v5/clients/{clientid}`) and clear its authorization cache.
 * - No retries here: a request that cannot be completed rejects with
 *   {@link BrokerUnavailableError} and the caller (the broker sync loop) retries with backoff
 *   (spec §1.7 last bullet, §1.8).
 */

/** The built-in database authenticator's id in EMQX 5. */
export const EMQX_DEFAULT_AUTHENTICATOR_ID = "password_based:built_in_database";

/** Options of {@link createEmqxBrokerAdmin}. */
export interface EmqxBrokerAdminOptions {
  /**
   * Base URL of the management API, e.g. `http://emqx:18083` (a trailing `/api/v5` is accepted
   * and ignored). http or https; must not carry credentials.
   */
  apiUrl: string;
  /** API key (the Basic auth user). */
  apiKey: string;
  /** API secret (the Basic auth password). Never logged. */
  apiSecret: string;
  log: Logger;
  /** Default {@link EMQX_DEFAULT_AUTHENTICATOR_ID}. */
  authenticatorId?: string;
  /** Per-request timeout, ms (default 5000). */
  requestTimeoutMs?: number;
  /** Users per page when listing for reconciliation (default 500; EMQX caps `limit`). */
  pageSize?: number;
  /** Requests in flight at once during a reconciliation (default 8). */
  concurrency?: number;
  /**
   * Whether the backend user is an EMQX superuser (default false: the backend is authorized by
   * the `/api/internal/emqx/authz` policy like everyone else). Nodes never are.
   */
  backendIsSuperuser?: boolean;
}

const optionsSchema = z.object({
  apiUrl: z
    .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
    .refine((u) => {
      const url = new URL(u);
      return url.username === "" && url.password === "";
    }, "must not carry credentials (use apiKey/apiSecret)"),
  apiKey: z.string().min(1, "must not be empty"),
  apiSecret: z.string().min(1, "must not be empty"),
  authenticatorId: z.string().min(1).default(EMQX_DEFAULT_AUTHENTICATOR_ID),
  requestTimeoutMs: z.number().int().positive().default(5000),
  pageSize: z.number().int().min(1).max(10_000).default(500),
  concurrency: z.number().int().min(1).max(64).default(8),
  backendIsSuperuser: z.boolean().default(false),
});

/** `{user_id, is_superuser}` as EMQX answers create, update and list (extra fields ignored). */
const userSchema = z.looseObject({ user_id: z.string(), is_superuser: z.boolean().optional() });

/** `GET .../users?page=&limit=` → `{data, meta}`; `hasnext` is present on EMQX 5.x. */
const userPageSchema = z.looseObject({
  data: z.array(userSchema),
  meta: z.looseObject({
    page: z.number().int().optional(),
    limit: z.number().int().optional(),
    count: z.number().int().optional(),
    hasnext: z.boolean().optional(),
  }),
});

/** EMQX's error body: `{"code": "ALREADY_EXISTS", "message": "..."}`. */
const errorBodySchema = z.looseObject({ code: z.string(), message: z.unknown().optional() });

/** Upper bound on pages read in one listing (guards against a broker that never ends a listing). */
const MAX_PAGES = 100_000;

interface Answer {
  status: number;
  body: unknown;
}

/**
 * Creates the EMQX adapter of {@link BrokerAdmin}.
 * @throws Error (synchronously) when an option is invalid (the message names it, never the secret)
 */
export function createEmqxBrokerAdmin(opts: EmqxBrokerAdminOptions): BrokerAdmin {
  const parsed = optionsSchema.safeParse({ ...opts, log: undefined });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`invalid EMQX admin option ${String(issue?.path[0] ?? "")}: ${issue?.message ?? "invalid"}`);
  }
  const o = parsed.data;
  const log = opts.log.child({ name: "emqx-admin" });
  const base = new URL(o.apiUrl);
  base.pathname = base.pathname.replace(/\/+$/, "").replace(/\/api\/v5$/, "");
  const baseUrl = `${base.origin}${base.pathname}`.replace(/\/+$/, "");
  const authorization = `Basic ${Buffer.from(`${o.apiKey}:${o.apiSecret}`, "utf8").toString("base64")}`;
  const usersPath = `/api/v5/authentication/${encodeURIComponent(o.authenticatorId)}/users`;
  const userPath = (userId: string) => `${usersPath}/${encodeURIComponent(userId)}`;
  const clientPath = (clientId: string) => `/api/v5/clients/${encodeURIComponent(clientId)}`;
  let closed = false;

  /**
   * One management API call. Resolves with the status and parsed JSON body for 2xx and 4xx
   * answers; rejects with BrokerUnavailableError on network errors, timeouts, 5xx and
   * non-JSON bodies. Only method, path and status are logged.
   */
  async function call(method: "GET" | "POST" | "PUT" | "DELETE", path: string, body?: unknown): Promise<Answer> {
    if (closed) throw new BrokerUnavailableError("the EMQX admin adapter is closed");
    const started = Date.now();
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization,
          accept: "application/json",
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(o.requestTimeoutMs),
      });
      text = await res.text();
    } catch (err) {
      const reason =
        err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")
          ? `no answer within ${o.requestTimeoutMs} ms`
          : describeNetworkError(err);
      log.warn({ method, path, reason }, "EMQX management API unreachable");
      throw new BrokerUnavailableError(`EMQX ${method} ${path}: ${reason}`, { cause: err });
    }
    log.debug({ method, path, status: res.status, ms: Date.now() - started }, "EMQX management API call");
    if (res.status >= 500) {
      throw new BrokerUnavailableError(`EMQX ${method} ${path}: HTTP ${res.status}${errorCode(text)}`);
    }
    let parsedBody: unknown;
    if (text.length > 0) {
      try {
        parsedBody = JSON.parse(text);
      } catch (err) {
        throw new BrokerUnavailableError(`EMQX ${method} ${path}: HTTP ${res.status} with a body that is not JSON`, { cause: err });
      }
    }
    return { status: res.status, body: parsedBody };
  }

  /** Rejects for any answer whose status is not in `ok`. */
  function expect(answer: Answer, ok: number[], what: string): Answer {
    if (ok.includes(answer.status)) return answer;
    const code = errorBodySchema.safeParse(answer.body);
    const detail = code.success ? ` ${code.data.code}` : "";
    throw new BrokerUnavailableError(`EMQX refused ${what}: HTTP ${answer.status}${detail}`);
  }

  /** Validates a body; a malformed one means we are not talking to the EMQX we expect. */
  function shape<T>(schema: z.ZodType<T>, answer: Answer, what: string): T {
    const r = schema.safeParse(answer.body);
    if (!r.success) throw new BrokerUnavailableError(`EMQX answered ${what} with an unexpected body: ${r.error.issues[0]?.message ?? "invalid"}`);
    return r.data;
  }

  /** Creates the user; an existing one gets the password (and superuser flag) rewritten. */
  async function upsertUser(userId: string, password: string, isSuperuser: boolean, knownToExist?: boolean): Promise<void> {
    if (knownToExist !== true) {
      const created = await call("POST", usersPath, { user_id: userId, password, is_superuser: isSuperuser });
      if (created.status === 201 || created.status === 200) {
        shape(userSchema, created, `creating user ${userId}`);
        return;
      }
      const err = errorBodySchema.safeParse(created.body);
      if (!(created.status === 409 && err.success && err.data.code === "ALREADY_EXISTS")) {
        expect(created, [201], `creating user ${userId}`);
      }
    }
    const updated = expect(
      await call("PUT", userPath(userId), { password, is_superuser: isSuperuser }),
      [200],
      `updating user ${userId}`,
    );
    shape(userSchema, updated, `updating user ${userId}`);
  }

  async function deleteUser(userId: string): Promise<void> {
    expect(await call("DELETE", userPath(userId)), [200, 204, 404], `deleting user ${userId}`);
  }

  async function kick(clientId: string): Promise<void> {
    expect(await call("DELETE", clientPath(clientId)), [200, 204, 404], `kicking client ${clientId}`);
  }

  async function clearClientCache(clientId: string): Promise<void> {
    expect(await call("DELETE", `${clientPath(clientId)}/authorization/cache`), [200, 204, 404], `clearing the authorization cache of ${clientId}`);
  }

  async function clearAllCaches(): Promise<void> {
    expect(await call("DELETE", "/api/v5/authorization/cache"), [200, 204], "clearing the authorization cache");
  }

  /** Every user of the authenticator, read page by page before anything is changed. */
  async function listUsers(): Promise<Array<z.infer<typeof userSchema>>> {
    const users: Array<z.infer<typeof userSchema>> = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const answer = expect(await call("GET", `${usersPath}?page=${page}&limit=${o.pageSize}`), [200], "listing users");
      const { data, meta } = shape(userPageSchema, answer, "listing users");
      users.push(...data);
      const more = meta.hasnext ?? data.length >= o.pageSize;
      if (!more || data.length === 0) return users;
    }
    throw new BrokerUnavailableError(`EMQX listed more than ${MAX_PAGES} pages of users`);
  }

  return {
    kind: "emqx",

    async putNode(account: NodeBrokerAccount): Promise<void> {
      await upsertUser(account.username, account.password, false);
      // A client still connected with the old password keeps its session in EMQX: end it
      // (spec §4 rule 11, rotation). Its cached grants go with the session.
      await kick(account.clientId);
      log.info({ username: account.username, client_id: account.clientId }, "EMQX node user written");
    },

    async removeNode(username: string, clientId: string): Promise<void> {
      // Delete first, so the kicked client cannot log in again (spec §4 rule 12).
      await deleteUser(username);
      await kick(clientId);
      await clearClientCache(clientId);
      log.info({ username, client_id: clientId }, "EMQX node user removed");
    },

    kick,

    async reconcile(desired: { backend: BackendBrokerAccount; nodes: NodeBrokerAccount[]; keep?: string[] }): Promise<ReconcileReport> {
      const existing = new Map((await listUsers()).map((u) => [u.user_id, u]));
      const wanted = new Map(desired.nodes.map((n) => [n.username, n]));
      // Bound nodes whose sealed password cannot be opened: their accounts stay as EMQX holds them.
      const kept = new Set(desired.keep ?? []);
      if (wanted.has(desired.backend.username)) {
        throw new BrokerUnavailableError(`the backend username ${desired.backend.username} is also a node username`);
      }
      const queue = new PQueue({ concurrency: o.concurrency });
      const jobs: Array<Promise<unknown>> = [];
      let upserted = 0;
      let removed = 0;
      for (const userId of existing.keys()) {
        // Only node-shaped accounts are ours to remove; operators' own users are left alone.
        if (!userId.startsWith("n:") || wanted.has(userId) || kept.has(userId)) continue;
        const ids = parseNodeUsername(userId);
        jobs.push(
          queue.add(async () => {
            await deleteUser(userId);
            if (ids !== null) await kick(nodeClientId(ids.configId, ids.nodeId));
            removed++;
          }),
        );
      }
      for (const node of wanted.values()) {
        // A live client of a wanted node keeps its session: its password is the one being
        // written (a rebind's new agent takes the client id over, ending any older session).
        jobs.push(
          queue.add(async () => {
            await upsertUser(node.username, node.password, false, existing.has(node.username));
            upserted++;
          }),
        );
      }
      jobs.push(
        queue.add(() =>
          upsertUser(desired.backend.username, desired.backend.password, o.backendIsSuperuser, existing.has(desired.backend.username)),
        ),
      );
      const results = await Promise.allSettled(jobs);
      const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed) {
        throw failed.reason instanceof BrokerUnavailableError
          ? failed.reason
          : new BrokerUnavailableError("EMQX reconciliation failed", { cause: failed.reason });
      }
      await clearAllCaches();
      log.info({ upserted, removed, users_before: existing.size }, "EMQX accounts reconciled");
      return { upserted, removed };
    },

    async close(): Promise<void> {
      closed = true;
    },
  };
}

/** ` CODE` from an EMQX error body, or "" (never the raw body). */
function errorCode(text: string): string {
  try {
    const r = errorBodySchema.safeParse(JSON.parse(text));
    return r.success ? ` ${r.data.code}` : "";
  } catch {
    return "";
  }
}

/** A one-line reason for a failed fetch: undici puts the system error (ECONNREFUSED, ...) in `cause`. */
function describeNetworkError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return typeof code === "string" ? `${code} (${cause.message})` : cause.message;
  }
  return err.message;
}
