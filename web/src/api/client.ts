/**
 * The console's one REST client. Pages call `api.<operationId>(input)`: each operation is declared
 * once in `endpoints.ts` with its schemas from `src/protocol`; its input (path parameters, query,
 * body) is typed from them and its answer is parsed with its schema, so a page never names a URL
 * or casts an answer.
 *
 * - the admin bearer token is read from localStorage until it expires (one session for every tab
 *   of the browser; {@link tokenStore});
 * - a non-2xx answer with the API error body `{error: {code, message, details?}}` (DESIGN §3) is
 *   thrown as an {@link ApiError} whose `message` is the server's message, which pages show as is;
 * - a 401 on an authenticated call clears the token and calls the handler set with
 *   {@link onUnauthorized} (the auth provider, which returns to the login page).
 */
import type { z } from "zod";
import { ENDPOINTS, operationUrl, type Endpoint, type OperationId } from "./endpoints.js";
/**
 * The localStorage key of the session: JSON `{access_token, expires_at}`, `expires_at` on this
 * browser's clock (ISO 8601): the login answer's `expires_in` added to the time it arrived, so a
 * server clock that differs from the browser's does not end or prolong the session.
 */
export const SESSION_KEY = "svc.session";

/**
 * The admin session of this browser, shared by its tabs: kept in localStorage with the expiry the
 * login answered (its lifetime, on this browser's clock), so a new tab opens logged in, and forgotten once expired (the server refuses it
 * then too). Logging out in one tab clears it, and every other tab hears that through the
 * `storage` event ({@link tokenStore.subscribe}) and returns to the login page.
 */
export const tokenStore = {
  /** The access token, or null when there is none or it expired (an expired one is removed). */
  get(): string | null {
    const session = readSession();
    if (session === null) return null;
    if (!(Date.parse(session.expires_at) > Date.now())) {
      tokenStore.clear();
      return null;
    }
    return session.access_token;
  },
  /** Keeps `token` for `expiresInS` seconds from now (the login answer's `expires_in`). */
  set(token: string, expiresInS: number): void {
    const expiresAt = new Date(Date.now() + expiresInS * 1000).toISOString();
    localStorage.setItem(SESSION_KEY, JSON.stringify({ access_token: token, expires_at: expiresAt }));
  },
  clear(): void {
    try {
      localStorage.removeItem(SESSION_KEY);
    } catch {
      // storage unavailable: nothing was kept
    }
  },
  /**
   * Calls `listener` with the token (or null) whenever another tab of this browser logs in or
   * out; returns the function that stops listening. A tab's own writes do not fire it.
   */
  subscribe(listener: (token: string | null) => void): () => void {
    const onStorage = (e: StorageEvent) => {
      if (e.storageArea === localStorage && (e.key === SESSION_KEY || e.key === null)) listener(tokenStore.get());
    };
    window.addEventListener("storage", onStorage);
    return () => window.removeEventListener("storage", onStorage);
  },
};

/** The stored session, or null when missing, unreadable or not of the expected shape. */
function readSession(): { access_token: string; expires_at: string } | null {
  try {
    const value = JSON.parse(localStorage.getItem(SESSION_KEY) ?? "null") as unknown;
    if (typeof value !== "object" || value === null) return null;
    const { access_token: token, expires_at: expiresAt } = value as Record<string, unknown>;
    return typeof token === "string" && typeof expiresAt === "string" ? { access_token: token, expires_at: expiresAt } : null;
  } catch {
    return null;
  }
}

/** A failed API call: HTTP `status` (0 when the service could not be reached) and the registry `code`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

let unauthorizedHandler: () => void = () => undefined;

/** Sets what happens when an authenticated call answers 401 (the token is already cleared). */
export function onUnauthorized(handler: () => void): void {
  unauthorizedHandler = handler;
}

/**
 * Tells the auth layer that the session of `token` ended (a 401 from REST or from the SSE
 * stream). When another tab has meanwhile logged in with a new token, that session stays: a late
 * 401 of the old one must not end it (this tab already follows it through the storage event).
 * @param token the token the refused call carried; undefined: whatever is stored
 */
export function sessionEnded(token?: string): void {
  const current = tokenStore.get();
  if (token !== undefined && current !== null && current !== token) return;
  tokenStore.clear();
  unauthorizedHandler();
}

/** The names of a path template's `{params}`. */
type ParamNames<P extends string> = P extends `${string}{${infer N}}${infer Rest}` ? N | ParamNames<Rest> : never;

/** A query as the console gives it: the schema's fields, numbers allowed where the wire wants digits. */
type QueryInput<Q extends z.ZodType> = { [K in keyof z.input<Q>]?: z.input<Q>[K] | number };

/** What one operation takes: path parameters, query, body or file, as its declaration says. */
export type ApiInput<E extends Endpoint> = ([ParamNames<E["path"]>] extends [never] ? {} : { params: Record<ParamNames<E["path"]>, string> }) &
  (E extends { query: infer Q extends z.ZodType } ? { query?: QueryInput<Q> } : {}) &
  (E extends { body: infer B extends z.ZodType } ? { body: z.input<B> } : {}) &
  (E extends { upload: string } ? { file: Blob } : {}) &
  (E extends { headers: infer H extends z.ZodType } ? { headers?: z.output<H> } : {}) & { signal?: AbortSignal };

/** What one operation answers: the `z.output` of its answer schema; nothing for a 204. */
export type ApiAnswer<E extends Endpoint> = E["response"] extends z.ZodType ? z.output<E["response"]> : void;

type ApiFunction<E extends Endpoint> = {} extends ApiInput<E> ? (input?: ApiInput<E>) => Promise<ApiAnswer<E>> : (input: ApiInput<E>) => Promise<ApiAnswer<E>>;

/**
 * One typed function per operation of {@link ENDPOINTS}, named by its operationId.
 * @throws ApiError with the server's code and message; code `NETWORK` (status 0) when the service
 *   cannot be reached; code `UNEXPECTED_ANSWER` when a 2xx answer does not fit its schema
 */
export const api = Object.fromEntries(
  Object.entries(ENDPOINTS).map(([id, endpoint]) => [id, (input?: RawInput) => call(endpoint, input ?? {})]),
) as { [K in OperationId]: ApiFunction<(typeof ENDPOINTS)[K]> };

interface RawInput {
  params?: Record<string, string>;
  query?: Record<string, unknown>;
  body?: unknown;
  file?: Blob;
  /** Header values as the operation's schema reads them; each is sent percent-encoded (UTF-8 safe). */
  headers?: Record<string, string | undefined>;
  signal?: AbortSignal;
}

async function call(endpoint: Endpoint, input: RawInput): Promise<unknown> {
  const auth = endpoint.auth ?? true;
  const headers: Record<string, string> = { accept: "application/json" };
  const token = tokenStore.get();
  if (auth && token !== null) headers["authorization"] = `Bearer ${token}`;
  for (const [name, value] of Object.entries(input.headers ?? {})) if (value !== undefined) headers[name] = encodeURIComponent(value);
  let body: BodyInit | undefined;
  if (endpoint.upload !== undefined && input.file !== undefined) {
    headers["content-type"] = endpoint.upload;
    body = input.file;
  } else if (input.body !== undefined) {
    headers["content-type"] = "application/json";
    body = JSON.stringify(input.body);
  }
  let res: Response;
  try {
    res = await fetch(operationUrl(endpoint, input), {
      method: endpoint.method,
      headers,
      ...(body === undefined ? {} : { body }),
      ...(input.signal === undefined ? {} : { signal: input.signal }),
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === "AbortError") throw err;
    throw new ApiError(0, "NETWORK", "The service cannot be reached. Check that it is running, then retry.");
  }
  const answer = await readJson(res);
  if (!res.ok) {
    const error = errorOf(answer);
    if (res.status === 401 && auth) sessionEnded(token ?? undefined);
    throw new ApiError(res.status, error?.code ?? "HTTP_" + res.status, error?.message ?? `The service answered ${res.status} ${res.statusText}`.trim(), error?.details);
  }
  if (endpoint.response === null) return undefined;
  const parsed = endpoint.response.safeParse(answer);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined ? "" : ` (${issue.path.join(".") || "body"}: ${issue.message})`;
    throw new ApiError(res.status, "UNEXPECTED_ANSWER", `The service answered in an unexpected shape${where}.`);
  }
  return parsed.data;
}

/** The answer's JSON; undefined for an empty or non-JSON body. */
async function readJson(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function errorOf(body: unknown): { code: string; message: string; details?: unknown } | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== "object" || error === null) return undefined;
  const { code, message, details } = error as { code?: unknown; message?: unknown; details?: unknown };
  if (typeof code !== "string" || typeof message !== "string") return undefined;
  return { code, message, details };
}

/** The message to show for anything a query or mutation threw. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
