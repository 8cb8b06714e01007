import { z } from "zod";
import { printable, queryInt } from "./fields.js";

/**
 * Wire shapes of the audit log (README "Audit log"; DESIGN §5 `GET /api/v1/audit`): who did what,
 * to what, with which outcome, from where. The log is append-only and hash-chained: each entry
 * carries `hash` = SHA-256 of the previous entry's hash and its own canonical content
 * (src/services/audit-chain.ts), so an edited, removed or inserted row is found by
 * `GET /api/v1/audit/verify`.
 */

/**
 * Who acted: a signed-in user (`user`: password session, `oidc`: single sign-on session), a
 * personal access token (`token`: `id` the token, `name` its user), the service itself
 * (`system`: retention), or a caller with no valid credential (`anonymous`: a refused call
 * without a live session, an agent redeeming a bind token).
 */
export const AUDIT_ACTOR_KINDS = ["user", "token", "oidc", "system", "anonymous"] as const;
export const auditActorKindSchema = z.enum(AUDIT_ACTOR_KINDS);
export type AuditActorKind = z.output<typeof auditActorKindSchema>;

/** `ok`: done (2xx/3xx); `denied`: refused for want of a credential or role (401/403); `failed`: any other refusal or error. */
export const AUDIT_OUTCOMES = ["ok", "denied", "failed"] as const;
export const auditOutcomeSchema = z.enum(AUDIT_OUTCOMES);
export type AuditOutcome = z.output<typeof auditOutcomeSchema>;

/** An action's name: `area.verb` in lower case, e.g. `node.create`, `control.start`, `auth.login`. */
export const auditActionSchema = z.string().regex(/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/, "must be area.verb in lower case");

/** One entry of the audit log. */
export const auditEntrySchema = z.object({
  audit_id: z.number().int().min(1).describe("position in the chain: 1, 2, 3, … without gaps"),
  at: z.iso.datetime(),
  actor: z.object({
    kind: auditActorKindSchema,
    id: z.string().nullable().describe("user_id, or token_id for a token; null for system and anonymous callers"),
    name: z.string().nullable().describe("the username (for a token: its user's); for a failed sign-in, the username tried"),
  }),
  action: z.string(),
  target: z.object({
    type: z.string().nullable().describe("config, node, mesh_pair, port_forward, user, token, snapshot, …; null when the action has none"),
    id: z.string().nullable(),
    config_id: z.string().nullable().describe("the config the target belongs to, when it belongs to one"),
  }),
  outcome: auditOutcomeSchema,
  source_ip: z.string().nullable(),
  request_id: z.string().nullable().describe("the command's request_id for control commands, else the HTTP request's id"),
  changes: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe("what the request asked to change: `fields` (names only) and `values` of a few fields that are never secret (role, name, flags, …)"),
  hash: z.string().describe("SHA-256 (hex) of the previous entry's hash and this entry's canonical content"),
});
export type AuditEntry = z.output<typeof auditEntrySchema>;

/** Filters of the audit list and export. */
export const auditFilterQuery = z.strictObject({
  actor: printable(200).optional().describe("the actor's id or name, exactly"),
  action: printable(100).optional().describe("an action (`node.create`), or every action of an area when it ends with a dot (`node.`)"),
  target_id: printable(200).optional().describe("the target's id, exactly"),
  outcome: auditOutcomeSchema.optional(),
  since: z.iso.datetime().optional().describe("entries at or after this time"),
  until: z.iso.datetime().optional().describe("entries before this time"),
});
export type AuditFilter = z.output<typeof auditFilterQuery>;

/** Largest page of the audit list. */
export const AUDIT_PAGE_LIMIT_MAX = 500;

/** `GET /api/v1/audit`: query. */
export const auditListQuery = auditFilterQuery.extend({
  limit: queryInt(1, AUDIT_PAGE_LIMIT_MAX).default(100).describe(`entries per page, 1–${AUDIT_PAGE_LIMIT_MAX}`),
  cursor: z.string().min(1).max(1024).optional().describe("opaque: the next_cursor of the previous page"),
});

/** `GET /api/v1/audit`: one page, newest first. */
export const auditListAnswer = z.object({
  items: z.array(auditEntrySchema),
  next_cursor: z.string().nullable().describe("pass as `cursor` for the next (older) page; null on the last page"),
});

/** The position a cursor of the audit list holds: the last entry given. */
export const auditCursorSchema = z.strictObject({ list: z.literal("audit"), before: z.number().int().min(1) });

/** `GET /api/v1/audit/verify` */
export const auditVerifyAnswer = z.object({
  ok: z.boolean(),
  rows_checked: z.number().int(),
  first_broken_audit_id: z.number().int().nullable().describe("the first entry whose hash, position or predecessor does not match; null when ok"),
  pruned_through_audit_id: z.number().int().nullable().describe("entries up to this one were removed by retention; the chain is checked from its recorded hash"),
});
export type AuditVerifyAnswer = z.output<typeof auditVerifyAnswer>;
