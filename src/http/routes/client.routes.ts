import { z } from "zod";
import type { ControlService } from "../../services/control.service.js";
import type { App } from "../route-kit.js";
import { endpointStatusResponse, errorResponses, nodeParams } from "../schemas.js";
import { bindCommandAnswer, controlAnswer, controlBody, controlLogListAnswer, controlLogListQuery } from "../../protocol/rest.schema.js";

const bindBody = z.strictObject({
  bind_token: z.string().min(20).max(128),
  server_url: z.url({ protocol: /^https?$/ }).max(2048),
  client_version: z.string().min(1).max(64),
  platform: z.string().min(1).max(64),
  hostname: z.string().min(1).max(253),
});

const bindResponse = z.object({
  profile: z.object({ config_id: z.string(), node_id: z.string(), server_url: z.string() }),
  mqtt: z.object({
    host: z.string(),
    port: z.number(),
    tls: z.boolean(),
    username: z.string(),
    password: z.string(),
    client_id: z.string(),
    /** spec §2.6: present only when tls is true (the broker's TLS listener, docs/history/decisions-2026.md "TLS for MQTT"). */
    ca_cert: z.string().optional(),
  }),
  topics: z.record(z.string(), z.string()),
});

/**
 * Per source address, against guessing secrets (bind tokens, the admin password): `max` attempts
 * per `timeWindow` ms (`SVC_AUTH_RATE_LIMIT_MAX` per minute), then 429 RATE_LIMITED with Retry-After.
 */
export interface GuessingRateLimit {
  max: number;
  timeWindow: number;
}

/**
 * Client lifecycle and endpoint control (spec §4 rows bind-command, bind, reset-client; rules
 * 10–12, 14; DESIGN §5 control, endpoint-status, control-logs).
 */
export async function clientRoutes(app: App, opts: { control: ControlService; rateLimit: GuessingRateLimit }): Promise<void> {
  const { control } = opts;
  const tags = ["endpoint control"];

  app.post(
    "/api/v1/configs/:config_id/nodes/:node_id/bind-command",
    {
      schema: {
        operationId: "issueBindCommand", "x-min-role": "operator",
        tags,
        summary: "Issue a one-time bind token (5 minutes) and the svcctl command that uses it (spec §4 rule 10)",
        "x-mqtt-write": true, // spec §4 rule 14: MQTT_DISABLED while MQTT is off (app.ts)
        params: nodeParams,
        response: { 200: bindCommandAnswer, ...errorResponses(404, 409) },
      },
    },
    async (req) => control.bindCommand(req.params.config_id, req.params.node_id),
  );

  app.post(
    "/api/client/bind",
    {
      config: { auth: "public", rateLimit: opts.rateLimit },
      schema: {
        operationId: "bindClient",
        tags,
        summary: "Redeem a bind token: the agent's profile with fresh MQTT credentials (spec §4 rule 11)",
        "x-mqtt-write": true, // spec §4 rule 14: MQTT_DISABLED while MQTT is off (app.ts)
        security: [],
        body: bindBody,
        response: { 200: bindResponse, ...errorResponses(409, 429) },
      },
    },
    async (req) => control.bind(req.body),
  );

  app.post(
    "/api/v1/configs/:config_id/nodes/:node_id/reset-client",
    {
      schema: {
        operationId: "resetClient", "x-min-role": "admin",
        tags,
        summary: "Forget the bound client: credentials revoked, connection cut, state cleared (spec §4 rule 12)",
        "x-mqtt-write": true, // spec §4 rule 14: MQTT_DISABLED while MQTT is off (app.ts)
        params: nodeParams,
        response: { 200: endpointStatusResponse, ...errorResponses(404, 409) },
      },
    },
    async (req) => control.reset(req.params.config_id, req.params.node_id),
  );

  app.post(
    "/api/v1/configs/:config_id/nodes/:node_id/control",
    {
      schema: {
        operationId: "sendControlCommand", "x-min-role": "operator",
        tags,
        summary: "Send start, stop, push_config or wg_show to the node's agent; the ACK closes it later",
        "x-mqtt-write": true, // spec §4 rule 14: MQTT_DISABLED while MQTT is off (app.ts)
        params: nodeParams,
        body: controlBody,
        response: { 202: controlAnswer, ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => reply.status(202).send(await control.control(req.params.config_id, req.params.node_id, req.body.action)),
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/endpoint-status",
    {
      schema: {
        operationId: "getEndpointStatus", "x-min-role": "viewer",
        tags,
        summary: "Presence, runtime and config version state of the node's client",
        params: nodeParams,
        response: { 200: endpointStatusResponse, ...errorResponses(404) },
      },
    },
    async (req) => control.endpointStatus(req.params.config_id, req.params.node_id),
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/control-logs",
    {
      schema: {
        operationId: "listControlLogs", "x-min-role": "viewer",
        tags,
        summary: "One page of the node's control logs, newest first, filtered by kind and status, with counts by kind",
        params: nodeParams,
        querystring: controlLogListQuery,
        response: { 200: controlLogListAnswer, ...errorResponses(404) },
      },
    },
    async (req) => control.controlLogPage(req.params.config_id, req.params.node_id, req.query),
  );
}
