import { z } from "zod";
import {
  channelListAnswer,
  channelParams,
  channelViewSchema,
  channelWithSecretSchema,
  createChannelBody,
  deliveryListAnswer,
  deliveryListQuery,
  deliveryViewSchema,
  updateChannelBody,
} from "../../protocol/alerts.schema.js";
import { alertRuleListAnswer, alertRuleParams, alertRuleViewSchema, createAlertRuleBody, updateAlertRuleBody } from "../../protocol/alert-rules.schema.js";
import type { AlertsService } from "../../services/alerts/alerts.service.js";
import type { AlertRulesService } from "../../services/alerts/rules.service.js";
import type { App } from "../route-kit.js";
import { errorResponses } from "../schemas.js";

/** Alert channels, rules and the delivery log (docs/alerts.md). Channels hold secrets and send outside: admin only. */
export async function alertsRoutes(app: App, opts: { alerts: AlertsService; rules: AlertRulesService }): Promise<void> {
  channelRoutes(app, opts.alerts);
  channelActionRoutes(app, opts.alerts);
  ruleRoutes(app, opts.rules);
  app.get(
    "/api/v1/alerts/deliveries",
    {
      schema: {
        operationId: "listAlertDeliveries", "x-min-role": "admin", tags: ["alerts"],
        summary: "The alert delivery log, newest first: status, attempts, last HTTP status and error, next attempt",
        querystring: deliveryListQuery,
        response: { 200: deliveryListAnswer, ...errorResponses() },
      },
    },
    async (req) => opts.alerts.listDeliveries(req.query),
  );
}

function channelRoutes(app: App, alerts: AlertsService): void {
  const tags = ["alerts"];
  app.get(
    "/api/v1/alerts/channels",
    { schema: { operationId: "listAlertChannels", "x-min-role": "admin", tags, summary: "Every alert channel, by name (no secrets)", response: { 200: channelListAnswer, ...errorResponses() } } },
    async () => ({ channels: await alerts.listChannels() }),
  );
  app.post(
    "/api/v1/alerts/channels",
    {
      schema: {
        operationId: "createAlertChannel", "x-min-role": "admin", tags,
        summary: "Create a webhook, slack, ntfy or email channel; a webhook's signing secret (whsec_…) is answered this once",
        body: createChannelBody,
        response: { 201: channelWithSecretSchema, ...errorResponses(409) },
      },
    },
    async (req, reply) => reply.status(201).send(await alerts.createChannel(req.body)),
  );
  app.get(
    "/api/v1/alerts/channels/:channel_id",
    { schema: { operationId: "getAlertChannel", "x-min-role": "admin", tags, summary: "One alert channel: settings without secrets, enabled or why disabled", params: channelParams, response: { 200: channelViewSchema, ...errorResponses(404) } } },
    async (req) => alerts.getChannel(req.params.channel_id),
  );
  app.patch(
    "/api/v1/alerts/channels/:channel_id",
    {
      schema: {
        operationId: "updateAlertChannel", "x-min-role": "admin", tags,
        summary: "Change a channel's name, settings or enabled flag; rotate_secret answers a webhook's new secret once (the old one signs too for 24 h)",
        params: channelParams,
        body: updateChannelBody,
        response: { 200: channelWithSecretSchema, ...errorResponses(404, 409) },
      },
    },
    async (req) => alerts.updateChannel(req.params.channel_id, req.body),
  );
  app.delete(
    "/api/v1/alerts/channels/:channel_id",
    { schema: { operationId: "deleteAlertChannel", "x-min-role": "admin", tags, summary: "Delete a channel and its delivery log", params: channelParams, response: { 204: z.null(), ...errorResponses(404) } } },
    async (req, reply) => {
      await alerts.deleteChannel(req.params.channel_id);
      return reply.status(204).send(null);
    },
  );
}

function channelActionRoutes(app: App, alerts: AlertsService): void {
  const tags = ["alerts"];
  app.post(
    "/api/v1/alerts/channels/:channel_id/test",
    {
      schema: {
        operationId: "testAlertChannel", "x-min-role": "admin", tags,
        summary: "Send a test alert through the real delivery path; answers its delivery after the first attempt",
        params: channelParams,
        response: { 200: deliveryViewSchema, ...errorResponses(404, 409) },
      },
    },
    async (req) => alerts.testChannel(req.params.channel_id),
  );
  app.post(
    "/api/v1/alerts/channels/:channel_id/rotate-secret",
    {
      schema: {
        operationId: "rotateAlertChannelSecret", "x-min-role": "admin", tags,
        summary: "Give a webhook channel a new signing secret, answered this once; the old one keeps signing beside it for 24 h",
        params: channelParams,
        response: { 200: channelWithSecretSchema, ...errorResponses(404) },
      },
    },
    async (req) => alerts.updateChannel(req.params.channel_id, { rotate_secret: true }),
  );
}

/** Alert rules: they decide what is sent to which channel, so admin only like the channels. */
function ruleRoutes(app: App, rules: AlertRulesService): void {
  const tags = ["alerts"];
  app.get(
    "/api/v1/alerts/rules",
    { schema: { operationId: "listAlertRules", "x-min-role": "admin", tags, summary: "Every alert rule, by name", response: { 200: alertRuleListAnswer, ...errorResponses() } } },
    async () => ({ rules: await rules.list() }),
  );
  app.post(
    "/api/v1/alerts/rules",
    {
      schema: {
        operationId: "createAlertRule", "x-min-role": "admin", tags,
        summary: "Create a rule: which event, for which nodes (scope), after how long (for_s), through which channels",
        body: createAlertRuleBody,
        response: { 201: alertRuleViewSchema, ...errorResponses(409) },
      },
    },
    async (req, reply) => reply.status(201).send(await rules.create(req.body)),
  );
  app.get(
    "/api/v1/alerts/rules/:rule_id",
    { schema: { operationId: "getAlertRule", "x-min-role": "admin", tags, summary: "One alert rule", params: alertRuleParams, response: { 200: alertRuleViewSchema, ...errorResponses(404) } } },
    async (req) => rules.get(req.params.rule_id),
  );
  app.patch(
    "/api/v1/alerts/rules/:rule_id",
    {
      schema: {
        operationId: "updateAlertRule", "x-min-role": "admin", tags,
        summary: "Change a rule; a new event, scope or for_s closes its open alerts without a message",
        params: alertRuleParams,
        body: updateAlertRuleBody,
        response: { 200: alertRuleViewSchema, ...errorResponses(404, 409) },
      },
    },
    async (req) => rules.update(req.params.rule_id, req.body),
  );
  app.delete(
    "/api/v1/alerts/rules/:rule_id",
    { schema: { operationId: "deleteAlertRule", "x-min-role": "admin", tags, summary: "Delete a rule and its open alerts", params: alertRuleParams, response: { 204: z.null(), ...errorResponses(404) } } },
    async (req, reply) => {
      await rules.delete(req.params.rule_id);
      return reply.status(204).send(null);
    },
  );
}
