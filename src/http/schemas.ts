import { z } from "zod";
import { ERROR_CODES, type ErrorCode } from "../errors.js";
import { configIdSchema, forwardIdSchema, nodeIdSchema, pairIdSchema } from "../protocol/ids.js";

/**
 * zod schemas of the REST boundary (DESIGN §5): request parts and response whitelists.
 * Strings are bounded; names reject control characters; objects are strict (unknown fields are
 * a VALIDATION_FAILED, not silently dropped).
 */

/** Printable text without control characters (no NUL, newline, tab, DEL). */
const printable = (max: number) =>
  z
    .string()
    .trim()
    .min(1, "must not be empty")
    .max(max, `must be at most ${max} characters`)
    // eslint-disable-next-line no-control-regex
    .regex(/^[^\u0000-\u001f\u007f]*$/, "must not contain control characters");

export const nameSchema = printable(64);
export const tunnelProtocolSchema = z.enum(["wireguard", "awg_2"]);
export const portSchema = z.number().int().min(1).max(65535);
export const ipv4Schema = z.ipv4();
/** wg-quick's interface name rule: 1..15 of `[a-zA-Z0-9_=+.-]`. */
export const interfaceNameSchema = z.string().regex(/^[a-zA-Z0-9_=+.-]{1,15}$/, "must be 1-15 of [a-zA-Z0-9_=+.-]");
/** A public endpoint: IPv4, IPv6 or DNS host name. */
export const publicAddressSchema = z.union([z.ipv4(), z.ipv6(), z.hostname().max(253)], {
  error: "must be an IPv4 address, an IPv6 address or a host name",
});
export const tagSchema = z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.:-]{0,31}$/, "must be 1-32 of [a-zA-Z0-9_.:-]");
export const networkCidrSchema = z.string().min(9).max(18);

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
