import { z } from "zod";

/**
 * Wire shapes of single sign-on through an OpenID provider (README "Single sign-on (OIDC)"):
 * which sign-in methods the console offers, the one-time code the console exchanges for a
 * session, and the reasons a sign-in fails (the console shows their messages).
 */

/** `GET /api/v1/auth/methods`: what the sign-in page offers (public: it is asked before sign-in). */
export const authMethodsAnswer = z.object({
  password: z.boolean().describe("username and password (POST /api/v1/auth/login); always true"),
  sso: z.object({
    enabled: z.boolean().describe("an OpenID provider is configured (SVC_OIDC_ISSUER): GET /api/v1/auth/oidc/start signs in through it"),
    label: z.string().nullable().describe("the provider's name for the button (SVC_OIDC_LABEL); null when not enabled"),
  }),
});
export type AuthMethodsAnswer = z.output<typeof authMethodsAnswer>;

/** `POST /api/v1/auth/oidc/exchange`: the one-time code the callback put in the console's URL fragment. */
export const oidcExchangeBody = z.strictObject({ code: z.string().min(16).max(128) });

/** The query the provider redirects back with (OAuth 2.0 §4.1.2; other parameters are kept for the library's checks). */
export const oidcCallbackQuery = z
  .object({
    code: callbackValue(4096).optional(),
    state: callbackValue(1024).optional(),
    error: callbackValue(1024).optional(),
  })
  // Providers add their own parameters (iss, session_state, scope, ...): kept, but each a plain
  // name with one printable value; bracketed or prototype-polluting names are not a provider's.
  .catchall(callbackValue(1024))
  .refine((query) => Object.keys(query).every((name) => /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/.test(name)), "unexpected query parameter name");

/** One value of the provider's redirect: printable text. */
function callbackValue(max: number) {
  // eslint-disable-next-line no-control-regex
  return z.string().max(max).regex(/^[^\u0000-\u001f\u007f-\u009f]*$/, "must not contain control characters");
}

/**
 * Why a single sign-on did not open a session, with the sentence the console shows. The callback
 * sends the browser to `/login#sso_error={reason}`; no other detail leaves the server (it is
 * logged).
 */
export const SSO_FAILURES = {
  not_configured: "Single sign-on is not configured on this server.",
  state_missing: "The identity provider's answer carried no state; start the sign-in again.",
  state_mismatch: "This sign-in was not started in this browser (state mismatch); start it again.",
  state_unknown: "This sign-in link was already used or has expired; start the sign-in again.",
  provider_denied: "The identity provider refused the sign-in.",
  code_rejected: "The identity provider refused the sign-in code (already used or expired); start the sign-in again.",
  id_token_expired: "The identity provider's ID token has expired (check the server's clock); start the sign-in again.",
  id_token_invalid: "The identity provider's ID token did not pass its checks.",
  provider_unreachable: "The identity provider cannot be reached; try again later or sign in with a password.",
  provider_error: "The identity provider answered something unexpected; see the server's log.",
  no_role: "None of your groups gives a role on this server; ask an owner to map one of your groups.",
  username_taken: "A local user with your username exists already; an owner must remove or rename it before you can sign in with SSO.",
  user_disabled: "Your user is disabled on this server.",
  last_owner: "You are the last owner and your groups would no longer make you one; an owner must promote another user first.",
  internal: "Single sign-on failed on the server; see the server's log.",
} as const;
export type SsoFailureReason = keyof typeof SSO_FAILURES;
export const ssoFailureReasonSchema = z.enum(Object.keys(SSO_FAILURES) as [SsoFailureReason, ...SsoFailureReason[]]);
