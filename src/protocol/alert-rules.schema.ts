import { z } from "zod";
import { tagSchema } from "./fields.js";
import { configIdSchema, nodeIdSchema } from "./ids.js";

/**
 * Wire shapes of alert rules (docs/alerts.md): which state changes become alerts, for which
 * nodes, after how long, through which channels.
 */

/**
 * What a rule watches. `node.offline` and `node.dropped` are each resolved by a `node.online`
 * message naming the alert it resolves; `broker.disconnected` (the backend's own broker link) by
 * `broker.connected`; `node.sync_stuck` (pending longer than `for_s` while online) and
 * `mesh.pair_broken` (a pair's integrity turned broken, with the reason) by a resolved message
 * of their own; `command.failed` (push, start, stop, with the agent's message) has none.
 */
export const ALERT_RULE_EVENTS = ["node.offline", "node.dropped", "node.sync_stuck", "command.failed", "mesh.pair_broken", "broker.disconnected"] as const;
export const alertRuleEventSchema = z.enum(ALERT_RULE_EVENTS);
export type AlertRuleEvent = z.output<typeof alertRuleEventSchema>;

/** Longest hold-off: a day, in seconds. */
export const MAX_FOR_S = 86_400;

const ruleName = z.string().trim().min(1, "must not be empty").max(100, "must be at most 100 characters");
const channelId = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "must match ^[a-z0-9][a-z0-9_-]{0,63}$");

/** Which nodes a rule covers: all when empty; each field given narrows it (a node of that config, carrying that tag, that node). Broker rules take no scope. */
export const alertRuleScopeSchema = z.strictObject({
  config_id: configIdSchema.optional(),
  tag: tagSchema.optional(),
  node_id: nodeIdSchema.optional(),
});
export type AlertRuleScope = z.output<typeof alertRuleScopeSchema>;

/** `POST /api/v1/alerts/rules` */
export const createAlertRuleBody = z.strictObject({
  name: ruleName,
  event: alertRuleEventSchema,
  /** Seconds the condition must hold before the alert is sent: a node down and back within it sends nothing. */
  for_s: z.number().int().min(0).max(MAX_FOR_S).default(0),
  scope: alertRuleScopeSchema.default({}),
  channel_ids: z.array(channelId).min(1, "name at least one channel").max(20),
  enabled: z.boolean().default(true),
});
export type CreateAlertRuleBody = z.output<typeof createAlertRuleBody>;

/** `PATCH /api/v1/alerts/rules/{rule_id}`: any field of the creation. */
export const updateAlertRuleBody = z
  .strictObject({
    name: ruleName.optional(),
    event: alertRuleEventSchema.optional(),
    for_s: z.number().int().min(0).max(MAX_FOR_S).optional(),
    scope: alertRuleScopeSchema.optional(),
    channel_ids: z.array(channelId).min(1, "name at least one channel").max(20).optional(),
    enabled: z.boolean().optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), "give at least one field");
export type UpdateAlertRuleBody = z.output<typeof updateAlertRuleBody>;

/** A rule as the API shows it. */
export const alertRuleViewSchema = z.object({
  rule_id: z.string(),
  name: z.string(),
  event: alertRuleEventSchema,
  for_s: z.number().int(),
  scope: alertRuleScopeSchema,
  channel_ids: z.array(z.string()),
  enabled: z.boolean(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
export type AlertRuleView = z.output<typeof alertRuleViewSchema>;

export const alertRuleListAnswer = z.object({ rules: z.array(alertRuleViewSchema) });
export const alertRuleParams = z.object({ rule_id: channelId });
