/** A non-2xx answer, with its status and body text. */
export class ApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly body: string,
  ) {
    super(`${method} ${path} answered ${status}: ${body}`);
    this.name = "ApiError";
  }
}

export interface TextAnswer {
  text: string;
  contentType: string;
}

export interface ApiClient {
  /** JSON GET; the parsed body is unknown until the caller's schema says otherwise. */
  get(path: string): Promise<unknown>;
  /** JSON POST; without `body` nothing is sent (no content-type either). */
  post(path: string, body?: unknown): Promise<unknown>;
  /** GET of a non-JSON answer, such as a downloaded config text. */
  getText(path: string): Promise<TextAnswer>;
}

/**
 * A tiny client for the service's REST API over global fetch. `path` is relative to `baseUrl`
 * (a `download_path` with its query works as is). With `token`, every request carries
 * `Authorization: Bearer <token>`; without it, none does.
 */
export function api(baseUrl: string, token?: string): ApiClient {
  const request = async (method: string, path: string, body?: unknown): Promise<Response> => {
    const headers: Record<string, string> = {};
    if (token !== undefined) headers["authorization"] = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(new URL(path, baseUrl), {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!response.ok) throw new ApiError(method, path, response.status, await response.text());
    return response;
  };
  const json = async (response: Response): Promise<unknown> => {
    const text = await response.text();
    return text === "" ? undefined : (JSON.parse(text) as unknown);
  };
  return {
    get: async (path) => json(await request("GET", path)),
    post: async (path, body) => json(await request("POST", path, body)),
    getText: async (path) => {
      const response = await request("GET", path);
      return { text: await response.text(), contentType: response.headers.get("content-type") ?? "" };
    },
  };
}

/** `POST /api/v1/auth/login` with the admin password; returns the bearer access token. */
export async function login(baseUrl: string, password: string, username = "admin"): Promise<string> {
  const answer = await api(baseUrl).post("/api/v1/auth/login", { username, password });
  const { access_token: accessToken, token_type: tokenType } = (answer ?? {}) as {
    access_token?: unknown;
    token_type?: unknown;
  };
  if (typeof accessToken !== "string" || tokenType !== "Bearer") {
    throw new Error(`login answered no bearer access_token: ${JSON.stringify(answer)}`);
  }
  return accessToken;
}
