import PQueue from "p-queue";
import { z } from "zod";
import type { Logger } from "../logger.js";
import { nodeClientId, parseNodeUsername } from "./authz.policy.js";
import { BrokerUnavailableError, type BackendBrokerAccount, type BrokerAdmin, type NodeBrokerAccount, type ReconcileReport } from "./broker-admin.js";

/**
 * The `emqx` broker adapter (DESIGN §1 "broker adapters"): mirrors the store's broker accounts into
 * EMQX 5 through its management REST API (`/api/v5`, HTTP Basic with an API key and secret).
 *
 * - Accounts live in the built-in database authenticator (`password_based:built_in_database`).
 *   Nodes are never superusers: EMQX superusers skip authorization, and every node must be
 *   judged by `POST /api/internal/emqx/authz` (spec §4 rule 13, §5 rules 1-2).
 * - The backend user is not a superuser either by default (docs/history/decisions-2026.md "The EMQX adapter"): its
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

type EmqxOptions = z.output<typeof optionsSchema>;
type EmqxUser = z.infer<typeof userSchema>;

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
  const api = new EmqxApi(o, log);
  const accounts = new EmqxAccounts(api, o);
  return {
    kind: "emqx",

    async putNode(account: NodeBrokerAccount): Promise<void> {
      await accounts.upsertUser(account.username, account.password, false);
      // A client still connected with the old password keeps its session in EMQX: end it
      // (spec §4 rule 11, rotation). Its cached grants go with the session.
      await accounts.kick(account.clientId);
      log.info({ username: account.username, client_id: account.clientId }, "EMQX node user written");
    },

    async removeNode(username: string, clientId: string): Promise<void> {
      // Delete first, so the kicked client cannot log in again (spec §4 rule 12).
      await accounts.deleteUser(username);
      await accounts.kick(clientId);
      await accounts.clearClientCache(clientId);
      log.info({ username, client_id: clientId }, "EMQX node user removed");
    },

    kick: (clientId: string) => accounts.kick(clientId),

    reconcile: (desired) => reconcileAccounts(accounts, desired, o, log),

    async close(): Promise<void> {
      api.closed = true;
    },
  };
}

/**
 * The management API over HTTP: base URL (a trailing `/api/v5` dropped), Basic auth, timeout.
 * Only method, path and status are logged, never the secret or a body.
 */
class EmqxApi {
  /** Set by the adapter's close(): every later call rejects. */
  closed = false;
  readonly #baseUrl: string;
  readonly #authorization: string;
  readonly #timeoutMs: number;
  readonly #log: Logger;

  constructor(o: EmqxOptions, log: Logger) {
    const base = new URL(o.apiUrl);
    base.pathname = base.pathname.replace(/\/+$/, "").replace(/\/api\/v5$/, "");
    this.#baseUrl = `${base.origin}${base.pathname}`.replace(/\/+$/, "");
    this.#authorization = `Basic ${Buffer.from(`${o.apiKey}:${o.apiSecret}`, "utf8").toString("base64")}`;
    this.#timeoutMs = o.requestTimeoutMs;
    this.#log = log;
  }

  /**
   * One management API call. Resolves with the status and parsed JSON body for 2xx and 4xx
   * answers; rejects with BrokerUnavailableError on network errors, timeouts, 5xx and
   * non-JSON bodies.
   */
  async call(method: "GET" | "POST" | "PUT" | "DELETE", path: string, body?: unknown): Promise<Answer> {
    if (this.closed) throw new BrokerUnavailableError("the EMQX admin adapter is closed");
    const started = Date.now();
    const { res, text } = await this.#fetch(method, path, body);
    this.#log.debug({ method, path, status: res.status, ms: Date.now() - started }, "EMQX management API call");
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

  /** The request and its body text; a network error or timeout rejects with BrokerUnavailableError. */
  async #fetch(method: string, path: string, body: unknown): Promise<{ res: Response; text: string }> {
    try {
      const res = await fetch(`${this.#baseUrl}${path}`, {
        method,
        headers: {
          authorization: this.#authorization,
          accept: "application/json",
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      return { res, text: await res.text() };
    } catch (err) {
      const reason =
        err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")
          ? `no answer within ${this.#timeoutMs} ms`
          : describeNetworkError(err);
      this.#log.warn({ method, path, reason }, "EMQX management API unreachable");
      throw new BrokerUnavailableError(`EMQX ${method} ${path}: ${reason}`, { cause: err });
    }
  }
}

/** Rejects for any answer whose status is not in `ok`. */
function expectStatus(answer: Answer, ok: number[], what: string): Answer {
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

/** The users of the built-in database authenticator, the clients and the authorization cache. */
class EmqxAccounts {
  readonly #api: EmqxApi;
  readonly #usersPath: string;
  readonly #pageSize: number;

  constructor(api: EmqxApi, o: EmqxOptions) {
    this.#api = api;
    this.#usersPath = `/api/v5/authentication/${encodeURIComponent(o.authenticatorId)}/users`;
    this.#pageSize = o.pageSize;
  }

  #userPath(userId: string): string {
    return `${this.#usersPath}/${encodeURIComponent(userId)}`;
  }

  #clientPath(clientId: string): string {
    return `/api/v5/clients/${encodeURIComponent(clientId)}`;
  }

  /** Creates the user; an existing one gets the password (and superuser flag) rewritten. */
  async upsertUser(userId: string, password: string, isSuperuser: boolean, knownToExist?: boolean): Promise<void> {
    if (knownToExist !== true) {
      const created = await this.#api.call("POST", this.#usersPath, { user_id: userId, password, is_superuser: isSuperuser });
      if (created.status === 201 || created.status === 200) {
        shape(userSchema, created, `creating user ${userId}`);
        return;
      }
      const err = errorBodySchema.safeParse(created.body);
      if (!(created.status === 409 && err.success && err.data.code === "ALREADY_EXISTS")) {
        expectStatus(created, [201], `creating user ${userId}`);
      }
    }
    const updated = expectStatus(
      await this.#api.call("PUT", this.#userPath(userId), { password, is_superuser: isSuperuser }),
      [200],
      `updating user ${userId}`,
    );
    shape(userSchema, updated, `updating user ${userId}`);
  }

  async deleteUser(userId: string): Promise<void> {
    expectStatus(await this.#api.call("DELETE", this.#userPath(userId)), [200, 204, 404], `deleting user ${userId}`);
  }

  async kick(clientId: string): Promise<void> {
    expectStatus(await this.#api.call("DELETE", this.#clientPath(clientId)), [200, 204, 404], `kicking client ${clientId}`);
  }

  async clearClientCache(clientId: string): Promise<void> {
    const path = `${this.#clientPath(clientId)}/authorization/cache`;
    expectStatus(await this.#api.call("DELETE", path), [200, 204, 404], `clearing the authorization cache of ${clientId}`);
  }

  async clearAllCaches(): Promise<void> {
    expectStatus(await this.#api.call("DELETE", "/api/v5/authorization/cache"), [200, 204], "clearing the authorization cache");
  }

  /** Every user of the authenticator, read page by page before anything is changed. */
  async listUsers(): Promise<EmqxUser[]> {
    const users: EmqxUser[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const answer = expectStatus(await this.#api.call("GET", `${this.#usersPath}?page=${page}&limit=${this.#pageSize}`), [200], "listing users");
      const { data, meta } = shape(userPageSchema, answer, "listing users");
      users.push(...data);
      const more = meta.hasnext ?? data.length >= this.#pageSize;
      if (!more || data.length === 0) return users;
    }
    throw new BrokerUnavailableError(`EMQX listed more than ${MAX_PAGES} pages of users`);
  }
}

/**
 * {@link BrokerAdmin.reconcile} for EMQX: lists every user first, then, `concurrency` requests
 * at a time, removes node-shaped users that are neither wanted nor kept (kicking their client),
 * writes every wanted node and the backend user, and clears the authorization cache last.
 * @throws BrokerUnavailableError on the first failed request (after every job settled)
 */
async function reconcileAccounts(
  accounts: EmqxAccounts,
  desired: { backend: BackendBrokerAccount; nodes: NodeBrokerAccount[]; keep?: string[] },
  o: EmqxOptions,
  log: Logger,
): Promise<ReconcileReport> {
  const existing = new Map((await accounts.listUsers()).map((u) => [u.user_id, u]));
  const wanted = new Map(desired.nodes.map((n) => [n.username, n]));
  // Bound nodes whose sealed password cannot be opened: their accounts stay as EMQX holds them.
  const kept = new Set(desired.keep ?? []);
  if (wanted.has(desired.backend.username)) {
    throw new BrokerUnavailableError(`the backend username ${desired.backend.username} is also a node username`);
  }
  const queue = new PQueue({ concurrency: o.concurrency });
  const jobs: Array<Promise<unknown>> = [];
  const report: ReconcileReport = { upserted: 0, removed: 0 };
  for (const userId of existing.keys()) {
    // Only node-shaped accounts are ours to remove; operators' own users are left alone.
    if (!userId.startsWith("n:") || wanted.has(userId) || kept.has(userId)) continue;
    const ids = parseNodeUsername(userId);
    jobs.push(
      queue.add(async () => {
        await accounts.deleteUser(userId);
        if (ids !== null) await accounts.kick(nodeClientId(ids.configId, ids.nodeId));
        report.removed++;
      }),
    );
  }
  for (const node of wanted.values()) {
    // A live client of a wanted node keeps its session: its password is the one being
    // written (a rebind's new agent takes the client id over, ending any older session).
    jobs.push(
      queue.add(async () => {
        await accounts.upsertUser(node.username, node.password, false, existing.has(node.username));
        report.upserted++;
      }),
    );
  }
  const backend = desired.backend;
  jobs.push(queue.add(() => accounts.upsertUser(backend.username, backend.password, o.backendIsSuperuser, existing.has(backend.username))));
  await settleAll(jobs);
  await accounts.clearAllCaches();
  log.info({ ...report, users_before: existing.size }, "EMQX accounts reconciled");
  return report;
}

/** Waits for every job; then rejects with the first failure, as a BrokerUnavailableError. */
async function settleAll(jobs: Array<Promise<unknown>>): Promise<void> {
  const results = await Promise.allSettled(jobs);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    throw failed.reason instanceof BrokerUnavailableError
      ? failed.reason
      : new BrokerUnavailableError("EMQX reconciliation failed", { cause: failed.reason });
  }
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
