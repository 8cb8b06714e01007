import type { FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { isAppError } from "../../errors.js";
import { isoTime } from "../../lib/clock.js";
import { authMethodsAnswer, oidcCallbackQuery, oidcExchangeBody, ssoFailureReasonSchema } from "../../protocol/oidc.schema.js";
import { loginAnswer } from "../../protocol/rest.schema.js";
import { OIDC_STATE_TTL_MS, type OidcService } from "../../services/oidc.service.js";
import { noteAudit } from "../audit.hook.js";
import type { App } from "../route-kit.js";
import { errorResponses } from "../schemas.js";
import type { GuessingRateLimit } from "./client.routes.js";

/** The cookie binding a started sign-in to the browser that started it (holds its state). */
const STATE_COOKIE = "svc_oidc_state";
const COOKIE_PATH = "/api/v1/auth/oidc";
/** The console's sign-in page; the outcome travels in the URL fragment, which no server or Referer sees. */
const SIGN_IN_PAGE = "/login";

const redirectAnswer = z.null().describe("302 Found: Location is the next page of the sign-in");

/**
 * Single sign-on through an OpenID provider (README "Single sign-on (OIDC)"): which sign-in
 * methods exist, the start (a redirect to the provider), the provider's callback (a redirect to
 * the console's sign-in page with a one-time code or a failure reason in the fragment) and the
 * exchange of that code for a session. All public: they are what signing in is made of.
 */
export async function oidcRoutes(app: App, opts: OidcRouteOptions): Promise<void> {
  const { oidc } = opts;
  const tags = ["auth"];

  app.get(
    "/api/v1/auth/methods",
    {
      config: { auth: "public" },
      schema: { operationId: "getAuthMethods", tags, summary: "The sign-in methods this server offers: password, and single sign-on when configured", security: [], response: { 200: authMethodsAnswer, ...errorResponses() } },
    },
    async () => oidc.methods(),
  );

  app.get(
    "/api/v1/auth/oidc/start",
    {
      config: { auth: "public" },
      schema: {
        operationId: "startOidcSignIn",
        tags,
        summary: "Start single sign-on: 302 to the OpenID provider (state, nonce and PKCE kept by the server for 10 minutes, single use); on failure 302 to /login#sso_error={reason}",
        security: [],
        response: { 302: redirectAnswer, ...errorResponses() },
      },
    },
    async (req, reply) => {
      try {
        const { location, state } = await oidc.start();
        setStateCookie(reply, state, Math.floor(OIDC_STATE_TTL_MS / 1000), opts.secureCookie());
        return await reply.redirect(location, 302);
      } catch (err) {
        return failed(req, reply, err);
      }
    },
  );

  callbackRoutes(app, opts);
}

interface OidcRouteOptions {
  oidc: OidcService;
  rateLimit: GuessingRateLimit;
  /** Whether the state cookie is `Secure` (the public URL is https). */
  secureCookie: () => boolean;
}

/** The provider's redirect back, and the console's exchange of the one-time code. */
function callbackRoutes(app: App, opts: OidcRouteOptions): void {
  const { oidc } = opts;
  const tags = ["auth"];
  app.get(
    "/api/v1/auth/oidc/callback",
    {
      config: { auth: "public" },
      schema: {
        operationId: "finishOidcSignIn",
        tags,
        summary: "The OpenID provider's redirect back: 302 to /login#sso_code={one-time code} (exchange it within 60 s), or /login#sso_error={reason}; no session is opened here",
        security: [],
        querystring: oidcCallbackQuery,
        response: { 302: redirectAnswer, ...errorResponses() },
      },
    },
    async (req, reply) => {
      setStateCookie(reply, "", 0, opts.secureCookie());
      try {
        const query = req.url.includes("?") ? req.url.slice(req.url.indexOf("?") + 1) : "";
        const { handoff, principal } = await oidc.callback(query, cookieValue(req, STATE_COOKIE));
        // Who signed in (a new user may have been created), for the audit log.
        req.principal = principal;
        return await reply.redirect(`${SIGN_IN_PAGE}#sso_code=${encodeURIComponent(handoff)}`, 302);
      } catch (err) {
        return failed(req, reply, err);
      }
    },
  );

  app.post(
    "/api/v1/auth/oidc/exchange",
    {
      config: { auth: "public", rateLimit: opts.rateLimit },
      schema: {
        operationId: "exchangeOidcCode",
        tags,
        summary: "Exchange the one-time code of a finished single sign-on (single use, 60 s) for a bearer access token",
        security: [],
        body: oidcExchangeBody,
        response: { 200: loginAnswer, ...errorResponses(429) },
      },
    },
    async (req) => {
      const opened = await oidc.exchange(req.body.code);
      req.principal = opened.principal;
      return { access_token: opened.accessToken, token_type: "Bearer" as const, expires_at: isoTime(opened.expiresAt), expires_in: Math.floor(opened.expiresInMs / 1000) };
    },
  );
}

/**
 * A failed start or callback lands on the sign-in page with its reason (never a stack trace); an
 * error that is not a sign-in failure is logged and shown as `internal`.
 */
async function failed(req: FastifyRequest, reply: FastifyReply, err: unknown): Promise<FastifyReply> {
  const reason = isAppError(err, "SSO_FAILED") ? ssoFailureReasonSchema.catch("internal").parse(err.details?.["reason"]) : "internal";
  // Both outcomes answer 302: the audit log learns from here that this sign-in was refused, and why.
  noteAudit(req, { outcome: "denied", changes: JSON.stringify({ reason }) });
  if (reason === "internal") req.log.error({ err }, "single sign-on failed");
  else req.log.info({ reason }, "single sign-on refused");
  return reply.redirect(`${SIGN_IN_PAGE}#sso_error=${reason}`, 302);
}

function setStateCookie(reply: FastifyReply, value: string, maxAgeS: number, secure: boolean): void {
  // SameSite=Lax: the provider's redirect back is a top-level GET from another site, which Lax lets through.
  const attrs = [`${STATE_COOKIE}=${value}`, `Path=${COOKIE_PATH}`, `Max-Age=${maxAgeS}`, "HttpOnly", "SameSite=Lax", ...(secure ? ["Secure"] : [])];
  reply.header("set-cookie", attrs.join("; "));
}

/** The value of one cookie of the request, if present. */
function cookieValue(req: FastifyRequest, name: string): string | undefined {
  const header = req.headers.cookie;
  if (typeof header !== "string") return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
