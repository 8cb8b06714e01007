import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";
import Provider from "oidc-provider";

/**
 * A real OpenID provider (`oidc-provider`) on loopback for the single sign-on tests, with one
 * confidential client registered for the service's callback. Its development interactions sign
 * in any account of {@link accounts} (the login is the subject; any password); groups are a
 * claim of the `profile` scope, answered by the userinfo endpoint (as many providers do).
 */
export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Subject → claims; change it between sign-ins to move someone between groups. */
  accounts: Map<string, { preferred_username: string; groups: string[] }>;
}

/** ID token lifetime at this provider, seconds. */
export const ID_TOKEN_TTL_S = 60;

export async function startProvider(t: TestContext, redirectUris: string[]): Promise<TestProvider> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const accounts: TestProvider["accounts"] = new Map();
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const provider = new Provider(issuer, {
    clients: [{ client_id: "svc-console", client_secret: "a-client-secret-of-the-service", redirect_uris: redirectUris, grant_types: ["authorization_code"], response_types: ["code"] }],
    findAccount: (_ctx: unknown, id: string) => {
      const claims = accounts.get(id);
      return claims === undefined ? undefined : { accountId: id, claims: () => ({ sub: id, ...claims }) };
    },
    claims: { openid: ["sub"], profile: ["preferred_username", "groups"] },
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    ttl: { IdToken: ID_TOKEN_TTL_S, AccessToken: 600, Interaction: 600, Session: 3600, Grant: 3600 },
    jwks: { keys: [{ ...privateKey.export({ format: "jwk" }), kid: "test", alg: "RS256", use: "sig" }] },
    cookies: { keys: ["a-cookie-signing-key-of-the-test-provider"] },
  });
  // The provider reports refused requests as events; they are expected here.
  provider.on("server_error", () => undefined);
  server.on("request", provider.callback());
  return { issuer, clientId: "svc-console", clientSecret: "a-client-secret-of-the-service", accounts };
}

/** Cookies of one browser: name → value (paths ignored; one provider). */
export type CookieJar = Map<string, string>;

function keep(jar: CookieJar, res: Response): void {
  for (const line of res.headers.getSetCookie()) {
    const [pair = ""] = line.split(";");
    const eq = pair.indexOf("=");
    if (eq > 0) jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
  }
}

function cookieHeader(jar: CookieJar): string {
  return [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
}

/**
 * Drives the provider as a browser would from its authorization URL: signs in `login` on the
 * development login page, consents, and follows redirects until one leaves for `callbackPrefix`.
 * @returns the callback URL the provider sent the browser to (with code and state)
 */
export async function signInAtProvider(authorizationUrl: string, login: string, callbackPrefix: string): Promise<string> {
  const jar: CookieJar = new Map();
  let url = authorizationUrl;
  for (let hop = 0; hop < 12; hop++) {
    let res = await fetch(url, { redirect: "manual", headers: { cookie: cookieHeader(jar) } });
    keep(jar, res);
    if (res.status === 200) {
      const page = await res.text();
      const prompt = /name="prompt" value="(\w+)"/.exec(page)?.[1];
      const form: Record<string, string> = prompt === "login" ? { prompt, login, password: "any" } : { prompt: prompt ?? "consent" };
      res = await fetch(url, { method: "POST", redirect: "manual", headers: { cookie: cookieHeader(jar), "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(form).toString() });
      keep(jar, res);
    }
    const location = res.headers.get("location");
    if (location === null) throw new Error(`the provider answered ${res.status} at ${url} without a redirect`);
    const next = new URL(location, url).href;
    if (next.startsWith(callbackPrefix)) return next;
    url = next;
  }
  throw new Error("the provider did not redirect back to the service");
}
