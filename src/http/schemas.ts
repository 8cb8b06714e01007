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
import { configFormatSchema } from "../protocol/config-formats.js";

/**
 * zod schemas of the REST boundary (DESIGN §5): request parts and response whitelists.
 * Strings are bounded; names reject control characters (C0, DEL, C1); objects are strict (unknown fields are
 * a VALIDATION_FAILED, not silently dropped).
 */

// The field rules live in src/protocol/fields.ts, shared with snapshot rows (docs/history/decisions-2026.md "Input rules").
export { interfaceNameSchema, ipv4Schema, nameSchema, networkCidrSchema, portSchema, publicAddressSchema, tagSchema, tunnelProtocolSchema };

export const configParams = z.strictObject({ config_id: configIdSchema });
export const nodeParams = z.strictObject({ config_id: configIdSchema, node_id: nodeIdSchema });
export const pairParams = z.strictObject({ config_id: configIdSchema, pair_id: pairIdSchema });
export const forwardParams = z.strictObject({
  config_id: configIdSchema,
  node_id: nodeIdSchema,
  forward_id: forwardIdSchema,
});



// ---- request bodies: in src/protocol/rest.schema.ts (every client's contract, the console's too) ----

export {
  loginBody,
  createConfigBody,
  updateConfigBody,
  createNodeBody,
  updateNodeBody,
  createPairBody,
  updatePairBody,
  createPortForwardBody,
  updatePortForwardBody,
} from "../protocol/rest.schema.js";

export const downloadQuery = z.object({ download_token: z.string().max(256).optional() });
/** A node config download's query: the token and the format (`wireguard` when absent). */
export const nodeConfigDownloadQuery = downloadQuery.extend({ format: configFormatSchema.default("wireguard") });

// ---- responses ----------------------------------------------------------------------------

// The views an SSE payload embeds too live in src/protocol/views.schema.ts (one schema per wire
// shape); their REST names stay here.
export {
  awgParamsViewSchema as awgParamsView,
  configViewSchema as configResponse,
  nodeViewSchema as nodeResponse,
  tagViewSchema as tagResponse,
  configDetailViewSchema as configDetailResponse,
  meshPairViewSchema as meshPairResponse,
  portForwardViewSchema as portForwardResponse,
  endpointStatusViewSchema as endpointStatusResponse,
  controlLogViewSchema as controlLogResponse,
  mqttSettingsViewSchema as mqttSettingsResponse,
  serverSettingsViewSchema as serverSettingsResponse,
  snapshotEntrySchema as snapshotEntryResponse,
  systemStatusSchema as systemStatusResponse,
} from "../protocol/views.schema.js";

export { stagedConfigAnswer as stagedConfigResponse, downloadTokenAnswer as downloadTokenResponse } from "../protocol/rest.schema.js";

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
  for (const s of [400, 401, 403, 500, ...statuses]) out[s] = errorBodySchema;
  return out;
}
