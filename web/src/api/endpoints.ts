/**
 * Every REST operation the console calls, declared once: its `operationId` (the key, the same
 * name the OpenAPI document gives it), method, path (OpenAPI form, `{param}`), the zod schema of
 * its answer and, where it takes them, of its body and query, all imported from `src/protocol`
 * (DESIGN §2: one schema per wire shape). `api.ts` turns each into a typed function that parses
 * the answer with its schema; `test/web/api-client.test.ts` checks each against the document the
 * server builds, so a route that changes its path or its answer fails there, not in a page.
 */
import { z } from "zod";
import * as formats from "../../../src/protocol/config-formats.js";
import * as machine from "../../../src/protocol/machine.schema.js";
import * as oidc from "../../../src/protocol/oidc.schema.js";
import * as rest from "../../../src/protocol/rest.schema.js";
import * as users from "../../../src/protocol/users.schema.js";
import * as audit from "../../../src/protocol/audit.schema.js";
import * as views from "../../../src/protocol/views.schema.js";

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** One REST operation. `response: null`: the answer has no body (204). */
export interface Endpoint {
  method: Method;
  path: string;
  response: z.ZodType | null;
  body?: z.ZodType;
  query?: z.ZodType;
  /** The body is a file sent as is, with this content type (not JSON). */
  upload?: string;
  /** Request headers the operation reads (names in lower case), for a body that is a file. */
  headers?: z.ZodType;
  /** false: no bearer token is sent and a 401 does not end the session (the login call). */
  auth?: false;
}

function op<const M extends Method, const P extends string, R extends z.ZodType | null, X extends Omit<Endpoint, "method" | "path" | "response"> = {}>(
  method: M,
  path: P,
  response: R,
  extra?: X,
): { method: M; path: P; response: R } & X {
  return { method, path, response, ...(extra ?? ({} as X)) };
}

const config = "/api/v1/configs/{config_id}";
const node = "/api/v1/configs/{config_id}/nodes/{node_id}";

export const ENDPOINTS = {
  login: op("POST", "/api/v1/auth/login", rest.loginAnswer, { body: rest.loginBody, auth: false }),
  logout: op("POST", "/api/v1/auth/logout", null),
  getMe: op("GET", "/api/v1/auth/me", users.meAnswer),
  getAuthMethods: op("GET", "/api/v1/auth/methods", oidc.authMethodsAnswer, { auth: false }),
  exchangeOidcCode: op("POST", "/api/v1/auth/oidc/exchange", rest.loginAnswer, { body: oidc.oidcExchangeBody, auth: false }),
  getSystemStatus: op("GET", "/api/v1/system/status", views.systemStatusSchema),
  getMqttSettings: op("GET", "/api/v1/settings/mqtt", views.mqttSettingsViewSchema),
  updateMqttSettings: op("PUT", "/api/v1/settings/mqtt", views.mqttSettingsViewSchema, { body: rest.mqttSettingsBody }),
  getServerSettings: op("GET", "/api/v1/settings/server", views.serverSettingsViewSchema),
  updateServerSettings: op("PUT", "/api/v1/settings/server", views.serverSettingsViewSchema, { body: rest.serverSettingsBody }),

  listConfigs: op("GET", "/api/v1/configs", rest.configListAnswer, { query: rest.configListQuery }),
  createConfig: op("POST", "/api/v1/configs", views.configViewSchema, { body: rest.createConfigBody }),
  getConfig: op("GET", config, views.configDetailViewSchema),
  updateConfig: op("PATCH", config, views.configViewSchema, { body: rest.updateConfigBody }),
  deleteConfig: op("DELETE", config, null),
  buildConfigPackage: op("POST", "/api/v1/tools/download/config-bulk/package", rest.downloadGrantAnswer.extend({ package_id: z.string() }), {
    body: rest.bulkPackageBody,
  }),

  listNodes: op("GET", `${config}/nodes`, rest.nodeListAnswer, { query: rest.nodeListQuery }),
  countNodes: op("GET", `${config}/node-counts`, rest.nodeCountsAnswer, { query: rest.nodeFilterQuery }),
  createNode: op("POST", `${config}/nodes`, views.nodeViewSchema, { body: rest.createNodeBody }),
  getNode: op("GET", node, views.nodeViewSchema),
  updateNode: op("PATCH", node, views.nodeViewSchema, { body: rest.updateNodeBody }),
  deleteNode: op("DELETE", node, null),
  getStagedConfig: op("GET", `${node}/config`, rest.stagedConfigAnswer),
  getNodeAppConfigs: op("GET", `${node}/config/apps`, formats.nodeAppConfigsAnswer),
  grantNodeConfigDownload: op("POST", `${node}/download-token`, rest.downloadTokenAnswer),

  listMeshPairs: op("GET", `${config}/mesh-pairs`, rest.meshPairListAnswer, { query: rest.meshPairListQuery }),
  createMeshPair: op("POST", `${config}/mesh-pairs`, views.meshPairViewSchema, { body: rest.createPairBody }),
  updateMeshPair: op("PATCH", `${config}/mesh-pairs/{pair_id}`, views.meshPairViewSchema, { body: rest.updatePairBody }),
  deleteMeshPair: op("DELETE", `${config}/mesh-pairs/{pair_id}`, null),

  listPortForwards: op("GET", `${node}/port-forwards`, rest.portForwardListAnswer),
  createPortForward: op("POST", `${node}/port-forwards`, views.portForwardViewSchema, { body: rest.createPortForwardBody }),
  updatePortForward: op("PATCH", `${node}/port-forwards/{forward_id}`, views.portForwardViewSchema, { body: rest.updatePortForwardBody }),
  deletePortForward: op("DELETE", `${node}/port-forwards/{forward_id}`, null),

  getEndpointStatus: op("GET", `${node}/endpoint-status`, views.endpointStatusViewSchema),
  listControlLogs: op("GET", `${node}/control-logs`, rest.controlLogListAnswer, { query: rest.controlLogListQuery }),
  sendControlCommand: op("POST", `${node}/control`, rest.controlAnswer, { body: rest.controlBody }),
  resetClient: op("POST", `${node}/reset-client`, views.endpointStatusViewSchema),
  issueBindCommand: op("POST", `${node}/bind-command`, rest.bindCommandAnswer),
  buildClientArtifact: op("POST", "/api/v1/tools/download/client-artifacts/build", rest.artifactBuildAnswer, { body: rest.artifactRequestBody }),
  grantClientArtifactDownload: op("POST", "/api/v1/tools/download/client-artifacts/download-grant", rest.artifactGrantAnswer, {
    body: rest.artifactRequestBody,
  }),

  getNodeMachineGraph: op("GET", "/api/v1/machines/node", machine.machineGraphSchema),
  getNodeMachine: op("GET", `${node}/machine`, machine.nodeMachineViewSchema),
  getNodeTimeline: op("GET", `${node}/timeline`, machine.nodeTimelineSchema, { query: machine.timelineQuerySchema }),
  getLatestTransitions: op("GET", `${config}/timeline/latest`, machine.configLatestTransitionsSchema),

  listSnapshots: op("GET", "/api/v1/backups", rest.snapshotListAnswer),
  createSnapshot: op("POST", "/api/v1/backups", views.snapshotEntrySchema, { body: rest.createSnapshotBody }),
  importSnapshot: op("POST", "/api/v1/backups/import", views.snapshotEntrySchema, {
    upload: "application/zip",
    headers: rest.importSnapshotHeaders,
  }),
  restoreSnapshot: op("POST", "/api/v1/backups/{snapshot_id}/restore", rest.restoreAnswer, { body: rest.restoreSnapshotBody }),
  deleteSnapshot: op("DELETE", "/api/v1/backups/{snapshot_id}", null),
  grantSnapshotDownload: op("POST", "/api/v1/backups/{snapshot_id}/download-token", rest.downloadGrantAnswer.extend({ snapshot_id: z.string() })),

  listAuditEntries: op("GET", "/api/v1/audit", audit.auditListAnswer, { query: audit.auditListQuery }),
  verifyAuditLog: op("GET", "/api/v1/audit/verify", audit.auditVerifyAnswer),
} as const satisfies Record<string, Endpoint>;

export type OperationId = keyof typeof ENDPOINTS;

/** The URL of an operation: `{param}`s filled in (encoded), the query's non-empty fields appended. */
export function operationUrl(endpoint: Endpoint, input: { params?: Record<string, string>; query?: Record<string, unknown> }): string {
  const path = endpoint.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(input.params?.[name] ?? ""));
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(input.query ?? {})) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
  }
  const qs = query.toString();
  return qs === "" ? path : `${path}?${qs}`;
}
