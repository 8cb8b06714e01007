/**
 * Every REST operation the console calls, declared once: its `operationId` (the key, the same
 * name the OpenAPI document gives it), method, path (OpenAPI form, `{param}`), the least role
 * that may call it (its `x-min-role`), the zod schema of its answer and, where it
 * takes them, of its body and query, all imported from `src/protocol`
 * (DESIGN §2: one schema per wire shape). `api.ts` turns each into a typed function that parses
 * the answer with its schema; `test/web/api-client.test.ts` checks each against the document the
 * server builds, so a route that changes its path, its role or its answer fails there, not in a page.
 */
import { z } from "zod";
import * as formats from "../../../src/protocol/config-formats.js";
import * as links from "../../../src/protocol/links.schema.js";
import * as machine from "../../../src/protocol/machine.schema.js";
import * as oidc from "../../../src/protocol/oidc.schema.js";
import * as rest from "../../../src/protocol/rest.schema.js";
import type { Role } from "../../../src/protocol/roles.js";
import * as users from "../../../src/protocol/users.schema.js";
import * as audit from "../../../src/protocol/audit.schema.js";
import * as alerts from "../../../src/protocol/alerts.schema.js";
import * as alertRules from "../../../src/protocol/alert-rules.schema.js";
import * as views from "../../../src/protocol/views.schema.js";

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** One REST operation. `response: null`: the answer has no body (204). */
export interface Endpoint {
  method: Method;
  path: string;
  /**
   * The least role that may call it: the route's `x-min-role` in the OpenAPI document (README
   * "Users, roles and tokens"); null for the one public call the console makes (sign-in). Pages
   * offer a control only to a role at least this (`useCan`, `api/roles.tsx`).
   */
  minRole: Role | null;
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

function op<const M extends Method, const P extends string, const N extends Role | null, R extends z.ZodType | null, X extends Omit<Endpoint, "method" | "path" | "minRole" | "response"> = {}>(
  method: M,
  path: P,
  minRole: N,
  response: R,
  extra?: X,
): { method: M; path: P; minRole: N; response: R } & X {
  return { method, path, minRole, response, ...(extra ?? ({} as X)) };
}

const config = "/api/v1/configs/{config_id}";
const node = "/api/v1/configs/{config_id}/nodes/{node_id}";

export const ENDPOINTS = {
  login: op("POST", "/api/v1/auth/login", null, rest.loginAnswer, { body: rest.loginBody, auth: false }),
  logout: op("POST", "/api/v1/auth/logout", "viewer", null),
  getMe: op("GET", "/api/v1/auth/me", "viewer", users.meAnswer),
  getAuthMethods: op("GET", "/api/v1/auth/methods", null, oidc.authMethodsAnswer, { auth: false }),
  exchangeOidcCode: op("POST", "/api/v1/auth/oidc/exchange", null, rest.loginAnswer, { body: oidc.oidcExchangeBody, auth: false }),
  getSystemStatus: op("GET", "/api/v1/system/status", "viewer", views.systemStatusSchema),
  getMqttSettings: op("GET", "/api/v1/settings/mqtt", "viewer", views.mqttSettingsViewSchema),
  updateMqttSettings: op("PUT", "/api/v1/settings/mqtt", "admin", views.mqttSettingsViewSchema, { body: rest.mqttSettingsBody }),
  getServerSettings: op("GET", "/api/v1/settings/server", "viewer", views.serverSettingsViewSchema),
  updateServerSettings: op("PUT", "/api/v1/settings/server", "admin", views.serverSettingsViewSchema, { body: rest.serverSettingsBody }),

  listConfigs: op("GET", "/api/v1/configs", "viewer", rest.configListAnswer, { query: rest.configListQuery }),
  createConfig: op("POST", "/api/v1/configs", "admin", views.configViewSchema, { body: rest.createConfigBody }),
  getConfig: op("GET", config, "viewer", views.configDetailViewSchema),
  updateConfig: op("PATCH", config, "admin", views.configViewSchema, { body: rest.updateConfigBody }),
  deleteConfig: op("DELETE", config, "admin", null),
  buildConfigPackage: op("POST", "/api/v1/tools/download/config-bulk/package", "admin", rest.downloadGrantAnswer.extend({ package_id: z.string() }), {
    body: rest.bulkPackageBody,
  }),

  listNodes: op("GET", `${config}/nodes`, "viewer", rest.nodeListAnswer, { query: rest.nodeListQuery }),
  countNodes: op("GET", `${config}/node-counts`, "viewer", rest.nodeCountsAnswer, { query: rest.nodeFilterQuery }),
  createNode: op("POST", `${config}/nodes`, "admin", views.nodeViewSchema, { body: rest.createNodeBody }),
  getNode: op("GET", node, "viewer", views.nodeViewSchema),
  updateNode: op("PATCH", node, "admin", views.nodeViewSchema, { body: rest.updateNodeBody }),
  deleteNode: op("DELETE", node, "admin", null),
  getStagedConfig: op("GET", `${node}/config`, "operator", rest.stagedConfigAnswer),
  getNodeAppConfigs: op("GET", `${node}/config/apps`, "operator", formats.nodeAppConfigsAnswer),
  grantNodeConfigDownload: op("POST", `${node}/download-token`, "operator", rest.downloadTokenAnswer),

  listMeshPairs: op("GET", `${config}/mesh-pairs`, "viewer", rest.meshPairListAnswer, { query: rest.meshPairListQuery }),
  createMeshPair: op("POST", `${config}/mesh-pairs`, "admin", views.meshPairViewSchema, { body: rest.createPairBody }),
  updateMeshPair: op("PATCH", `${config}/mesh-pairs/{pair_id}`, "admin", views.meshPairViewSchema, { body: rest.updatePairBody }),
  deleteMeshPair: op("DELETE", `${config}/mesh-pairs/{pair_id}`, "admin", null),

  listPortForwards: op("GET", `${node}/port-forwards`, "viewer", rest.portForwardListAnswer),
  createPortForward: op("POST", `${node}/port-forwards`, "admin", views.portForwardViewSchema, { body: rest.createPortForwardBody }),
  updatePortForward: op("PATCH", `${node}/port-forwards/{forward_id}`, "admin", views.portForwardViewSchema, { body: rest.updatePortForwardBody }),
  deletePortForward: op("DELETE", `${node}/port-forwards/{forward_id}`, "admin", null),

  getEndpointStatus: op("GET", `${node}/endpoint-status`, "viewer", views.endpointStatusViewSchema),
  listControlLogs: op("GET", `${node}/control-logs`, "viewer", rest.controlLogListAnswer, { query: rest.controlLogListQuery }),
  sendControlCommand: op("POST", `${node}/control`, "operator", rest.controlAnswer, { body: rest.controlBody }),
  resetClient: op("POST", `${node}/reset-client`, "admin", views.endpointStatusViewSchema),
  issueBindCommand: op("POST", `${node}/bind-command`, "operator", rest.bindCommandAnswer),
  buildClientArtifact: op("POST", "/api/v1/tools/download/client-artifacts/build", "operator", rest.artifactBuildAnswer, { body: rest.artifactRequestBody }),
  grantClientArtifactDownload: op("POST", "/api/v1/tools/download/client-artifacts/download-grant", "operator", rest.artifactGrantAnswer, {
    body: rest.artifactRequestBody,
  }),

  getNodeMachineGraph: op("GET", "/api/v1/machines/node", "viewer", machine.machineGraphSchema),
  getNodeMachine: op("GET", `${node}/machine`, "viewer", machine.nodeMachineViewSchema),
  getNodeTimeline: op("GET", `${node}/timeline`, "viewer", machine.nodeTimelineSchema, { query: machine.timelineQuerySchema }),
  getLatestTransitions: op("GET", `${config}/timeline/latest`, "viewer", machine.configLatestTransitionsSchema),

  listSnapshots: op("GET", "/api/v1/backups", "viewer", rest.snapshotListAnswer),
  createSnapshot: op("POST", "/api/v1/backups", "admin", views.snapshotEntrySchema, { body: rest.createSnapshotBody }),
  importSnapshot: op("POST", "/api/v1/backups/import", "admin", views.snapshotEntrySchema, {
    upload: "application/zip",
    headers: rest.importSnapshotHeaders,
  }),
  restoreSnapshot: op("POST", "/api/v1/backups/{snapshot_id}/restore", "admin", rest.restoreAnswer, { body: rest.restoreSnapshotBody }),
  deleteSnapshot: op("DELETE", "/api/v1/backups/{snapshot_id}", "admin", null),
  grantSnapshotDownload: op("POST", "/api/v1/backups/{snapshot_id}/download-token", "admin", rest.downloadGrantAnswer.extend({ snapshot_id: z.string() })),

  listUsers: op("GET", "/api/v1/users", "owner", users.userListAnswer),
  createUser: op("POST", "/api/v1/users", "owner", users.userViewSchema, { body: users.createUserBody }),
  updateUser: op("PATCH", "/api/v1/users/{user_id}", "owner", users.userViewSchema, { body: users.updateUserBody }),
  deleteUser: op("DELETE", "/api/v1/users/{user_id}", "owner", null),

  listAccessTokens: op("GET", "/api/v1/tokens", "viewer", users.accessTokenListAnswer),
  createAccessToken: op("POST", "/api/v1/tokens", "viewer", users.createdAccessTokenAnswer, { body: users.createAccessTokenBody }),
  revokeAccessToken: op("DELETE", "/api/v1/tokens/{token_id}", "viewer", null),

  listAuditEntries: op("GET", "/api/v1/audit", "admin", audit.auditListAnswer, { query: audit.auditListQuery }),
  verifyAuditLog: op("GET", "/api/v1/audit/verify", "admin", audit.auditVerifyAnswer),

  getConfigLinks: op("GET", `${config}/links`, "viewer", links.linkMatrixAnswer),
  getNodePeers: op("GET", `${node}/peers`, "viewer", links.nodePeersAnswer),
  refreshConfigLinks: op("POST", `${config}/links/refresh`, "operator", links.linkRefreshAnswer),
  listAlertChannels: op("GET", "/api/v1/alerts/channels", "admin", alerts.channelListAnswer),
  createAlertChannel: op("POST", "/api/v1/alerts/channels", "admin", alerts.channelWithSecretSchema, { body: alerts.createChannelBody }),
  updateAlertChannel: op("PATCH", "/api/v1/alerts/channels/{channel_id}", "admin", alerts.channelWithSecretSchema, { body: alerts.updateChannelBody }),
  deleteAlertChannel: op("DELETE", "/api/v1/alerts/channels/{channel_id}", "admin", null),
  testAlertChannel: op("POST", "/api/v1/alerts/channels/{channel_id}/test", "admin", alerts.deliveryViewSchema),
  rotateAlertChannelSecret: op("POST", "/api/v1/alerts/channels/{channel_id}/rotate-secret", "admin", alerts.channelWithSecretSchema),
  listAlertRules: op("GET", "/api/v1/alerts/rules", "admin", alertRules.alertRuleListAnswer),
  createAlertRule: op("POST", "/api/v1/alerts/rules", "admin", alertRules.alertRuleViewSchema, { body: alertRules.createAlertRuleBody }),
  updateAlertRule: op("PATCH", "/api/v1/alerts/rules/{rule_id}", "admin", alertRules.alertRuleViewSchema, { body: alertRules.updateAlertRuleBody }),
  deleteAlertRule: op("DELETE", "/api/v1/alerts/rules/{rule_id}", "admin", null),
  listAlertDeliveries: op("GET", "/api/v1/alerts/deliveries", "admin", alerts.deliveryListAnswer, { query: alerts.deliveryListQuery }),
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
