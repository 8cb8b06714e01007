/**
 * Every query key of the console, in one place: the feature queries read under them and the SSE
 * cache table (`sse/cache-effects.ts`) patches or invalidates them. A config's keys all start
 * with `["configs", config_id]`, a node's with `["configs", config_id, "nodes", node_id]`, so
 * dropping a config or a node drops everything cached about it (spec §6.5 rule 7: one key per
 * projection, so an event touches exactly what it concerns).
 */
import type { NodeFilterQuery } from "./types.js";

export const keys = {
  systemStatus: ["system", "status"] as const,
  mqttSettings: ["settings", "mqtt"] as const,
  serverSettings: ["settings", "server"] as const,
  backups: ["backups"] as const,
  machineGraph: ["machines", "node"] as const,
  configs: ["configs"] as const,
  /** Every page of the audit log, whatever its filters (a prefix: `audit.appended` invalidates them all). */
  audit: ["audit"] as const,
  auditPages: (filters: Record<string, string>) => ["audit", "pages", filters] as const,
  /** Who is signed in (`GET /api/v1/auth/me`). */
  me: ["auth", "me"] as const,
  /** The sign-in methods the server offers (`GET /api/v1/auth/methods`). */
  authMethods: ["auth", "methods"] as const,
  /** Every user (owners only). */
  users: ["users"] as const,
  /** The personal access tokens the caller may see (their own; an owner's: everyone's). */
  accessTokens: ["tokens"] as const,
  /** The alert channels (admins; no secrets). */
  alertChannels: ["alerts", "channels"] as const,
  /** The alert rules (admins). */
  alertRules: ["alerts", "rules"] as const,
  /** Every page of the alert delivery log, whatever its filters (a prefix: `alert.delivery.updated` invalidates them all). */
  alertDeliveries: ["alerts", "deliveries"] as const,
  alertDeliveryPages: (filters: Record<string, string>) => ["alerts", "deliveries", "pages", filters] as const,
  config: (configId: string) => ["configs", configId] as const,
  pairs: (configId: string) => ["configs", configId, "mesh-pairs"] as const,
  latestTransitions: (configId: string) => ["configs", configId, "timeline", "latest"] as const,
  /** Every page list and count of the config's nodes (a prefix: invalidates all filters at once). */
  nodeLists: (configId: string) => ["configs", configId, "node-lists"] as const,
  nodePages: (configId: string, filters: NodeFilterQuery) => ["configs", configId, "node-lists", "pages", filters] as const,
  nodeCounts: (configId: string, filters: NodeFilterQuery) => ["configs", configId, "node-lists", "counts", filters] as const,
  node: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId] as const,
  stagedConfig: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "staged-config"] as const,
  /** Under the staged config's key: invalidated with it when the node is re-staged. */
  appConfigs: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "staged-config", "apps"] as const,
  portForwards: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "port-forwards"] as const,
  endpointStatus: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "endpoint-status"] as const,
  controlLogs: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "control-logs"] as const,
  /** The control log rows the stream brought while the node's control page is open (not a REST answer). */
  controlLogLive: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "control-logs-live"] as const,
  machine: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "machine"] as const,
  timeline: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "timeline"] as const,
  /** A config's measured link matrix and drift (`config.links.updated` invalidates it). */
  links: (configId: string) => ["links", configId] as const,
  /** One host's running peers and drift (`config.links.updated` for that node invalidates it). */
  nodePeers: (configId: string, nodeId: string) => ["peers", configId, nodeId] as const,
};
