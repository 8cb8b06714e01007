/**
 * The console's one fetch client (issue 12). Every REST call goes through {@link apiFetch}:
 *
 * - the admin bearer token is read from sessionStorage (kept for the tab only; {@link tokenStore});
 * - a non-2xx answer with the API error body `{error: {code, message, details?}}` (DESIGN §3) is
 *   thrown as an {@link ApiError} whose `message` is the server's message, which pages show as is;
 * - a 401 on an authenticated call clears the token and calls the handler set with
 *   {@link onUnauthorized} (the auth provider, which returns to the login page).
 */

const TOKEN_KEY = "svc.access_token";

/** The access token of this tab (sessionStorage: a new tab logs in again). */
export const tokenStore = {
  get(): string | null {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return null;
    }
  },
  set(token: string): void {
    sessionStorage.setItem(TOKEN_KEY, token);
  },
  clear(): void {
    sessionStorage.removeItem(TOKEN_KEY);
  },
};

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

/** Tells the auth layer that the session ended (a 401 from REST or from the SSE stream). */
export function sessionEnded(): void {
  tokenStore.clear();
  unauthorizedHandler();
}

export interface ApiOptions {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as the raw body instead (a file upload, e.g. a snapshot zip), with `contentType`. */
  file?: Blob;
  /** Content type of `file`; default its own type, else `application/octet-stream`. */
  contentType?: string;
  signal?: AbortSignal;
  /** false: no bearer token, and a 401 is an ordinary error (the login call). Default true. */
  auth?: boolean;
}

/**
 * Calls the API at `path` (`/api/v1/...`) and returns the parsed JSON answer (undefined for 204).
 * @throws ApiError with the server's code and message, or code `NETWORK` (status 0)
 */
export async function apiFetch<T>(path: string, opts: ApiOptions = {}): Promise<T> {
  const auth = opts.auth ?? true;
  const headers: Record<string, string> = { accept: "application/json" };
  const token = tokenStore.get();
  if (auth && token !== null) headers["authorization"] = `Bearer ${token}`;
  if (opts.file !== undefined) headers["content-type"] = opts.contentType ?? (opts.file.type || "application/octet-stream");
  else if (opts.body !== undefined) headers["content-type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, {
      method: opts.method ?? "GET",
      headers,
      ...(opts.file !== undefined ? { body: opts.file } : opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === "AbortError") throw err;
    throw new ApiError(0, "NETWORK", "The service cannot be reached. Check that it is running, then retry.");
  }
  const text = await res.text();
  let body: unknown = undefined;
  if (text !== "") {
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
  }
  if (!res.ok) {
    const error = errorOf(body);
    if (res.status === 401 && auth) sessionEnded();
    throw new ApiError(res.status, error?.code ?? "HTTP_" + res.status, error?.message ?? `The service answered ${res.status} ${res.statusText}`.trim(), error?.details);
  }
  return body as T;
}

function errorOf(body: unknown): { code: string; message: string; details?: unknown } | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== "object" || error === null) return undefined;
  const { code, message, details } = error as { code?: unknown; message?: unknown; details?: unknown };
  if (typeof code !== "string" || typeof message !== "string") return undefined;
  return { code, message, details };
}

/**
 * Starts the browser's download of a file the API serves at `downloadPath` (a `download_path`
 * answer carrying its own `?download_token=…`, spec §4; no bearer header is needed or sent).
 * Prefer rendering `<a href={downloadPath} download>` when the path is known before the click;
 * this is for paths obtained by the click (grant, then download).
 */
export function startDownload(downloadPath: string, filename = ""): void {
  const a = document.createElement("a");
  a.href = downloadPath;
  a.download = filename;
  a.rel = "noopener";
  document.body.append(a);
  a.click();
  a.remove();
}

/** The message to show for anything a query or mutation threw. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
