import { z } from "zod";
import { ERROR_CODES, type ErrorCode } from "../errors.js";
import {
  interfaceNameSchema,
  ipv4Schema,
  nameSchema,
  networkCidrSchema,
  portSchema,
  publicAddressSchema,
  tagSchema,
  tunnelProtocolSchema,
} from "../protocol/fields.js";
import { configIdSchema, forwardIdSchema, nodeIdSchema, pairIdSchema } from "../protocol/ids.js";

/**
 * zod schemas of the REST boundary (DESIGN §5): request parts and response whitelists.
 * Strings are bounded; names reject control characters (C0, DEL, C1); objects are strict (unknown fields are
 * a VALIDATION_FAILED, not silently dropped).
 */

// The field rules live in src/protocol/fields.ts, shared with snapshot rows (docs/decisions.md "Input rules").
export { interfaceNameSchema, ipv4Schema, nameSchema, networkCidrSchema, portSchema, publicAddressSchema, tagSchema, tunnelProtocolSchema };

export const configParams = z.strictObject({ config_id: configIdSchema });
export const nodeParams = z.strictObject({ config_id: configIdSchema, node_id: nodeIdSchema });
export const pairParams = z.strictObject({ config_id: configIdSchema, pair_id: pairIdSchema });
export const forwardParams = z.strictObject({
  config_id: configIdSchema,
  node_id: nodeIdSchema,
  forward_id: forwardIdSchema,
});

// ---- request bodies -----------------------------------------------------------------------

export const loginBody = z.strictObject({ password: z.string().min(1).max(1024) });

export const createConfigBody = z.strictObject({
  name: nameSchema,
  tunnel_protocol: tunnelProtocolSchema,
  network_cidr: networkCidrSchema,
});

export const updateConfigBody = z.strictObject({
  name: nameSchema.optional(),
  tunnel_protocol: tunnelProtocolSchema.optional(),
  network_cidr: networkCidrSchema.optional(),
});

export const createNodeBody = z.strictObject({
  name: nameSchema,
  mode: z.enum(["static", "dynamic"]),
  address: ipv4Schema.optional(),
  public_address: publicAddressSchema.nullable().optional(),
  listen_port: portSchema.nullable().optional(),
  interface_name: interfaceNameSchema.optional(),
  tags: z.array(tagSchema).max(32).optional(),
  auto_pair: z.boolean().optional(),
});

export const updateNodeBody = z.strictObject({
  name: nameSchema.optional(),
  mode: z.enum(["static", "dynamic"]).optional(),
  public_address: publicAddressSchema.nullable().optional(),
  listen_port: portSchema.nullable().optional(),
  interface_name: interfaceNameSchema.optional(),
  tags: z.array(tagSchema).max(32).optional(),
});

export const createPairBody = z.strictObject({
  node_a: nodeIdSchema,
  node_b: nodeIdSchema,
  enabled: z.boolean().optional(),
});

export const updatePairBody = z.strictObject({ enabled: z.boolean() });

export const createPortForwardBody = z.strictObject({
  protocol: z.enum(["tcp", "udp"]),
  listen_port: portSchema,
  target_address: ipv4Schema,
  target_port: portSchema,
  enabled: z.boolean().optional(),
});

export const updatePortForwardBody = createPortForwardBody.partial();

export const downloadQuery = z.object({ download_token: z.string().max(256).optional() });

// ---- responses ----------------------------------------------------------------------------

const isoTime = z.string();

export const awgParamsView = z.object({
  jc: z.number(),
  jmin: z.number(),
  jmax: z.number(),
  s1: z.number(),
  s2: z.number(),
  s3: z.number(),
  s4: z.number(),
  h1: z.string(),
  h2: z.string(),
  h3: z.string(),
  h4: z.string(),
});

export const configResponse = z.object({
  config_id: z.string(),
  name: z.string(),
  tunnel_protocol: tunnelProtocolSchema,
  network_cidr: z.string(),
  awg: awgParamsView.nullable(),
  created_at: isoTime,
  updated_at: isoTime,
});

export const nodeResponse = z.object({
  node_id: z.string(),
  config_id: z.string(),
  name: z.string(),
  mode: z.enum(["static", "dynamic"]),
  effective_mode: z.enum(["static", "dynamic"]),
  interface_name: z.string(),
  address: z.string(),
  public_address: z.string().nullable(),
  listen_port: z.number().nullable(),
  public_key: z.string(),
  tags: z.array(z.string()),
  staged_config: z.object({ config_version: z.number(), config_sha256: z.string().nullable() }),
  client: z.object({
    client_initialized: z.boolean(),
    client_presence_state: z.enum(["online", "dropped", "offline"]),
    runtime_state: z.enum(["unknown", "running", "stopped"]),
    last_reachable_at: isoTime.nullable(),
    client_version: z.string().nullable(),
    config_version_state: z.enum(["latest", "pending"]).nullable(),
  }),
  created_at: isoTime,
  updated_at: isoTime,
});

export const tagResponse = z.object({ tag: z.string(), node_ids: z.array(z.string()) });

export const configDetailResponse = configResponse.extend({
  nodes: z.array(nodeResponse),
  tags: z.array(tagResponse),
});

export const meshPairResponse = z.object({
  pair_id: z.string(),
  config_id: z.string(),
  node_a: z.string(),
  node_b: z.string(),
  enabled: z.boolean(),
  integrity: z.object({
    status: z.enum(["ok", "broken", "disabled"]),
    reason: z.string().nullable(),
    initiators: z.array(z.string()),
  }),
  created_at: isoTime,
  updated_at: isoTime,
});

export const portForwardResponse = z.object({
  forward_id: z.string(),
  node_id: z.string(),
  protocol: z.enum(["tcp", "udp"]),
  listen_port: z.number(),
  target_address: z.string(),
  target_port: z.number(),
  enabled: z.boolean(),
  created_at: isoTime,
  updated_at: isoTime,
});

export const stagedConfigResponse = z.object({
  config_id: z.string(),
  node_id: z.string(),
  config_version: z.number(),
  config_sha256: z.string(),
  config_text: z.string(),
});

export const downloadTokenResponse = z.object({
  download_path: z.string(),
  download_token: z.string(),
  download_token_expires_at: isoTime,
});

export const errorBodySchema = z
  .object({
    error: z.object({
      code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  })
  .meta({ id: "ErrorBody", description: "The body of every failing request (DESIGN §3)." });

/**
 * Error responses of a route for the OpenAPI document and the serializer: each listed status
 * answers {@link errorBodySchema}. 400 (validation), 401 (auth) and 500 are always included.
 */
export function errorResponses(...statuses: number[]): Record<number, typeof errorBodySchema> {
  const out: Record<number, typeof errorBodySchema> = {};
  for (const s of [400, 401, 500, ...statuses]) out[s] = errorBodySchema;
  return out;
}
