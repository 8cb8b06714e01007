import { z } from "zod";
import { roleSchema } from "./roles.js";

/**
 * Wire shapes of users and of "who am I" (README "Users, roles and tokens"). Passwords travel in
 * request bodies only: no answer carries one or its hash.
 */

/** A username: letters, digits and `._@-`, 1–64 characters; unique without regard to case. */
export const usernameSchema = z.string().regex(/^[A-Za-z0-9._@-]{1,64}$/, "must be 1-64 letters, digits or ._@-");

/** A new password: at least 12 characters (NIST SP 800-63B's floor is 8; 12 for an admin console). */
export const newPasswordSchema = z.string().min(12, "must be at least 12 characters").max(1024, "must be at most 1024 characters");

/** A user as the API shows it. */
export const userViewSchema = z.object({
  user_id: z.string(),
  username: z.string(),
  role: roleSchema,
  disabled: z.boolean(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
export type UserView = z.output<typeof userViewSchema>;

/** `POST /api/v1/users` */
export const createUserBody = z.strictObject({ username: usernameSchema, password: newPasswordSchema, role: roleSchema });
/** `PATCH /api/v1/users/{user_id}`: at least one field. */
export const updateUserBody = z
  .strictObject({ role: roleSchema.optional(), password: newPasswordSchema.optional(), disabled: z.boolean().optional() })
  .refine((b) => b.role !== undefined || b.password !== undefined || b.disabled !== undefined, "give role, password or disabled");
export type UpdateUserBody = z.output<typeof updateUserBody>;
/** `GET /api/v1/users` */
export const userListAnswer = z.object({ users: z.array(userViewSchema) });
/** `{user_id}` path parameter. */
export const userParams = z.object({ user_id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "must match ^[a-z0-9][a-z0-9_-]{0,63}$") });

/**
 * The start of every personal access token's secret, so that secret scanners (and people) can
 * tell a leaked one (as GitHub's `ghp_`); the rest is 32 random bytes, base64url.
 */
export const ACCESS_TOKEN_PREFIX = "svc_pat_";

/** `GET /api/v1/auth/me`: who the caller is, with the role they act with now, and how they signed in. */
export const meAnswer = z.object({
  user: z.object({ user_id: z.string(), username: z.string(), role: roleSchema }),
  via: z.enum(["session", "token"]).describe("session: a bearer token from POST /api/v1/auth/login; token: a personal access token"),
  token: z.object({ token_id: z.string(), name: z.string() }).nullable().describe("the personal access token used, when via is token"),
  login: z.enum(["password", "oidc"]).optional().describe("how the session was opened (via session): the user's password or single sign-on"),
});

/** `POST /api/v1/tokens` */
export const createAccessTokenBody = z.strictObject({
  name: z.string().trim().min(1, "must not be empty").max(64, "must be at most 64 characters"),
  role: roleSchema.describe("at most the creator's role"),
  expires_in_days: z.number().int("must be a whole number of days").min(1, "must be 1..365").max(365, "must be 1..365"),
});
/** A personal access token as the API shows it: never its secret or hash. */
export const accessTokenViewSchema = z.object({
  token_id: z.string(),
  name: z.string(),
  role: roleSchema,
  user_id: z.string(),
  username: z.string(),
  created_at: z.iso.datetime(),
  expires_at: z.iso.datetime(),
  last_used_at: z.iso.datetime().nullable().describe("to the minute; null: never used"),
});
export type AccessTokenView = z.output<typeof accessTokenViewSchema>;
/** `POST /api/v1/tokens` answer: the view and, this once, the secret. */
export const createdAccessTokenAnswer = accessTokenViewSchema.extend({ token: z.string().describe(`the secret (${ACCESS_TOKEN_PREFIX}…), shown this once: send it as Authorization: Bearer`) });
/** `GET /api/v1/tokens` */
export const accessTokenListAnswer = z.object({ tokens: z.array(accessTokenViewSchema) });
/** `{token_id}` path parameter. */
export const tokenParams = z.object({ token_id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "must match ^[a-z0-9][a-z0-9_-]{0,63}$") });
