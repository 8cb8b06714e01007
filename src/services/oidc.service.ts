import * as client from "openid-client";
import type { OidcSettings } from "../config.js";
import { digestsEqual, hashToken, mintToken } from "../domain/tokens.js";
import { AppError, isAppError } from "../errors.js";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import type { AuthMethodsAnswer, SsoFailureReason } from "../protocol/oidc.schema.js";
import type { Store } from "../store/db.js";
import type { AuthService, Principal } from "./auth.service.js";
import { groupsOf, roleForGroups, signInUser, ssoFailure, usernameFor } from "./oidc-users.js";

/** Where the provider sends the browser back, under the public URL. */
export const OIDC_CALLBACK_PATH = "/api/v1/auth/oidc/callback";
/** How long a started sign-in may take at the provider, ms. */
export const OIDC_STATE_TTL_MS = 10 * 60_000;
/** How long the console has to exchange the one-time code for its session, ms. */
export const OIDC_HANDOFF_TTL_MS = 60_000;
/** Started sign-ins kept at once; past it the oldest is dropped (a flood of starts holds bounded memory). */
const MAX_PENDING = 1000;
/** Seconds the service waits for the provider's discovery, token and userinfo answers. */
const PROVIDER_TIMEOUT_S = 10;

export interface OidcServiceDeps {
  /** Undefined: single sign-on is off (every route of it answers `not_configured`). */
  settings: OidcSettings | undefined;
  store: Store;
  clock: Clock;
  auth: Pick<AuthService, "openSession">;
  /** The public URL, read at each sign-in (the redirect URI is `{it}/api/v1/auth/oidc/callback`). */
  publicUrl: () => string;
  log: Logger;
}

/** A sign-in started in one browser and not yet finished: what the callback checks, kept here only. */
interface Pending {
  codeVerifier: string;
  nonce: string;
  redirectUri: string;
  expiresAt: number;
}

/**
 * Single sign-on through an OpenID provider: the authorization code flow with PKCE (RFC 7636)
 * and a nonce (OpenID Connect Core §3.1), through `openid-client` (README "Single sign-on
 * (OIDC)"). State, nonce and code verifier stay on the server (single use, {@link OIDC_STATE_TTL_MS});
 * the browser carries the state in the callback URL and in a cookie, which must agree. A
 * successful callback yields a one-time code ({@link OIDC_HANDOFF_TTL_MS}) the console exchanges
 * by POST for a normal session, so no bearer token ever travels in a URL. Times are checked by
 * the service's clock. Both maps live in memory: a restart only fails the sign-ins in progress.
 */
export class OidcService {
  readonly #d: OidcServiceDeps;
  readonly #pending = new Map<string, Pending>();
  readonly #handoffs = new Map<string, { userId: string; expiresAt: number }>();
  #discovered: Promise<client.Configuration> | undefined;

  constructor(deps: OidcServiceDeps) {
    this.#d = deps;
  }

  /** What the sign-in page offers. */
  methods(): AuthMethodsAnswer {
    const s = this.#d.settings;
    return { password: true, sso: { enabled: s !== undefined, label: s?.label ?? null } };
  }

  /**
   * Starts a sign-in: a fresh state, nonce and PKCE verifier, kept for {@link OIDC_STATE_TTL_MS}.
   * @returns the provider's authorization URL to send the browser to, and the state (for the cookie)
   * @throws AppError SSO_FAILED (`not_configured`, `provider_unreachable`)
   */
  async start(): Promise<{ location: string; state: string }> {
    const settings = this.#settings();
    const config = await this.#configuration();
    const codeVerifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const redirectUri = `${this.#d.publicUrl()}${OIDC_CALLBACK_PATH}`;
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: settings.scopes,
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
      state,
      nonce,
    });
    this.#prune();
    while (this.#pending.size >= MAX_PENDING) this.#pending.delete(this.#pending.keys().next().value ?? "");
    this.#pending.set(state, { codeVerifier, nonce, redirectUri, expiresAt: this.#d.clock.now() + OIDC_STATE_TTL_MS });
    return { location: url.href, state };
  }

  /**
   * Finishes a sign-in at the provider's redirect: checks the state against the cookie and the
   * started sign-ins (consuming it), exchanges the code with the PKCE verifier, validates the ID
   * token (signature, issuer, audience, nonce, expiry), derives the role from the groups and finds
   * or creates the local user.
   * @param query the callback's query string, as received
   * @param cookieState the state of this browser's cookie, if any
   * @returns a one-time code for {@link exchange} and who signed in
   * @throws AppError SSO_FAILED with `details.reason` ({@link SSO_FAILURES}); nothing is opened
   */
  async callback(query: string, cookieState: string | undefined): Promise<{ handoff: string; principal: Principal }> {
    const settings = this.#settings();
    const params = new URLSearchParams(query);
    const pending = this.#takePending(params.get("state"), cookieState);
    const base = await this.#configuration();
    const currentUrl = new URL(`${pending.redirectUri}?${params.toString()}`);
    let claims: Record<string, unknown>;
    try {
      const config = this.#checkingConfiguration(base);
      const tokens = await client.authorizationCodeGrant(config, currentUrl, {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: params.get("state") ?? undefined,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
      claims = { ...(tokens.claims() ?? {}) };
      if (claims[settings.groupsClaim] === undefined && config.serverMetadata().userinfo_endpoint !== undefined) {
        const info = await client.fetchUserInfo(config, tokens.access_token, String(claims["sub"]));
        claims = { ...info, ...claims };
      }
    } catch (err) {
      throw this.#providerFailure(err);
    }
    return this.#signIn(settings, claims);
  }

  /**
   * Exchanges the one-time code of a finished sign-in for a session opened by single sign-on.
   * @returns the bearer token, its expiry (ms since the epoch), its lifetime (ms) and the session's principal
   * @throws AppError UNAUTHORIZED when the code is unknown, used or expired, or the user was disabled meanwhile
   */
  async exchange(code: string): Promise<{ accessToken: string; expiresAt: number; expiresInMs: number; principal: Principal }> {
    const key = hashToken(code);
    const handoff = this.#handoffs.get(key);
    this.#handoffs.delete(key);
    if (handoff === undefined || handoff.expiresAt <= this.#d.clock.now()) {
      throw new AppError("UNAUTHORIZED", "this single sign-on code is unknown, used or expired; sign in again");
    }
    return this.#d.auth.openSession(handoff.userId, "oidc");
  }

  async #signIn(settings: OidcSettings, claims: Record<string, unknown>): Promise<{ handoff: string; principal: Principal }> {
    const subject = String(claims["sub"]);
    const role = roleForGroups(settings, groupsOf(claims[settings.groupsClaim]));
    if (role === undefined) {
      throw ssoFailure("no_role", `none of the groups in claim ${settings.groupsClaim} maps to a role (SVC_OIDC_ROLE_MAP)`);
    }
    const identity = { issuer: String(claims["iss"]), subject, username: usernameFor(claims, subject), role };
    const user = await this.#d.store.transaction((trx) => signInUser(trx, identity, this.#d.clock.now()));
    const { token, hash } = mintToken();
    this.#prune();
    this.#handoffs.set(hash, { userId: user.user_id, expiresAt: this.#d.clock.now() + OIDC_HANDOFF_TTL_MS });
    const principal: Principal = { user_id: user.user_id, username: user.username, role: user.role, via: "session", login: "oidc" };
    return { handoff: token, principal };
  }

  /** The started sign-in of this state, removed (single use). */
  #takePending(state: string | null, cookieState: string | undefined): Pending {
    if (state === null || state === "") throw ssoFailure("state_missing", "the callback carries no state");
    if (cookieState === undefined || !digestsEqual(hashToken(state), hashToken(cookieState))) {
      throw ssoFailure("state_mismatch", "the callback's state is not the one this browser started");
    }
    const pending = this.#pending.get(state);
    this.#pending.delete(state);
    if (pending === undefined || pending.expiresAt <= this.#d.clock.now()) {
      throw ssoFailure("state_unknown", "no sign-in in progress has this state (used already, or expired)");
    }
    return pending;
  }

  #settings(): OidcSettings {
    if (this.#d.settings === undefined) throw ssoFailure("not_configured", "single sign-on is not configured (SVC_OIDC_ISSUER)");
    return this.#d.settings;
  }

  /**
   * The provider's configuration from its discovery document, fetched once; a failed fetch is
   * forgotten, so the next sign-in tries again.
   * @throws AppError SSO_FAILED `provider_unreachable`
   */
  async #configuration(): Promise<client.Configuration> {
    const s = this.#settings();
    this.#discovered ??= client.discovery(new URL(s.issuer), s.clientId, undefined, this.#clientAuth(s), {
      timeout: PROVIDER_TIMEOUT_S,
      execute: s.issuer.startsWith("http:") ? [client.allowInsecureRequests] : [],
    });
    try {
      return await this.#discovered;
    } catch (err) {
      this.#discovered = undefined;
      this.#d.log.warn({ err: String(err), issuer: s.issuer }, "the OpenID provider's discovery failed");
      throw ssoFailure("provider_unreachable", "the OpenID provider's discovery document cannot be read");
    }
  }

  /** A configuration for one sign-in, judging token times by the service's clock (openid-client's clock skew). */
  #checkingConfiguration(base: client.Configuration): client.Configuration {
    const s = this.#settings();
    const skew = Math.round((this.#d.clock.now() - Date.now()) / 1000);
    const config = new client.Configuration(base.serverMetadata(), s.clientId, { [client.clockSkew]: skew }, this.#clientAuth(s));
    config.timeout = PROVIDER_TIMEOUT_S;
    if (s.issuer.startsWith("http:")) client.allowInsecureRequests(config);
    return config;
  }

  /** HTTP Basic with the client secret (the token endpoint's default method), or none for a public client. */
  #clientAuth(s: OidcSettings): client.ClientAuth {
    return s.clientSecret === undefined ? client.None() : client.ClientSecretBasic(s.clientSecret);
  }

  /** The reason an `openid-client` failure gives the console; the error itself is logged. */
  #providerFailure(err: unknown): AppError {
    if (isAppError(err)) return err;
    const code = (err as { code?: unknown }).code;
    const reasons: Record<string, SsoFailureReason> = {
      OAUTH_AUTHORIZATION_RESPONSE_ERROR: "provider_denied",
      OAUTH_RESPONSE_BODY_ERROR: "code_rejected",
      OAUTH_JWT_TIMESTAMP_CHECK_FAILED: "id_token_expired",
      OAUTH_JWT_CLAIM_COMPARISON_FAILED: "id_token_invalid",
    };
    let reason: SsoFailureReason = typeof code === "string" ? (reasons[code] ?? "provider_error") : "provider_error";
    if ((err instanceof TypeError && err.cause !== undefined) || (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError"))) {
      reason = "provider_unreachable";
    }
    this.#d.log.warn({ reason, err: err instanceof Error ? `${err.name}: ${err.message}` : String(err) }, "single sign-on failed at the OpenID provider");
    return ssoFailure(reason, err instanceof Error ? err.message : "the OpenID provider's answer was refused");
  }

  /** Drops started sign-ins and one-time codes past their time. */
  #prune(): void {
    const now = this.#d.clock.now();
    for (const [k, p] of this.#pending) if (p.expiresAt <= now) this.#pending.delete(k);
    for (const [k, h] of this.#handoffs) if (h.expiresAt <= now) this.#handoffs.delete(k);
  }
}
