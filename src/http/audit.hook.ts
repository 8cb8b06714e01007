import type { FastifyReply, FastifyRequest } from "fastify";
import type { AuditOutcome } from "../protocol/audit.schema.js";
import { controlActionSchema } from "../protocol/enums.js";
import { summarizeChanges } from "../services/audit-changes.js";
import type { AuditRecord, AuditService } from "../services/audit.service.js";
import type { App } from "./route-kit.js";

/**
 * How the audit log sees each route (README "Audit log"): one table from `operationId` to the
 * action recorded, and how the target of a create is read from its answer. A route that
 * changes state and has no row here is recorded as `api.<operation_id>`
 * (test/http/audit.test.ts fails on it, so a new route is given a name).
 */
interface AuditRule {
  /** The action; a function for actions named by the body (control commands). */
  action: string | ((body: unknown) => string);
  /** Dotted path of the created target's id in a 2xx answer, and the target's type. */
  created?: { path: string; type: string; configPath?: string };
  /** Never recorded: the broker's authorization queries (one per publish, changing nothing). */
  never?: true;
  /** Recorded only when the handler noted a write, or when refused (MCP: most calls are reads). */
  onlyNoted?: true;
  /** The actor of a sign-in that failed: the username the body tried. */
  signIn?: true;
  /** Recorded whatever the method and outcome (a sign-in completed by GET, such as a single sign-on callback). */
  always?: true;
}

const create = (type: string, path: string, configPath?: string) => ({ path, type, ...(configPath === undefined ? {} : { configPath }) });

export const AUDIT_RULES: Readonly<Record<string, AuditRule>> = {
  login: { action: "auth.login", signIn: true },
  finishOidcSignIn: { action: "auth.sso_login", always: true },
  exchangeOidcCode: { action: "auth.sso_session" },
  logout: { action: "auth.logout" },
  createUser: { action: "user.create", created: create("user", "user_id") },
  updateUser: { action: "user.update" },
  deleteUser: { action: "user.delete" },
  createAccessToken: { action: "token.create", created: create("token", "token_id") },
  revokeAccessToken: { action: "token.revoke" },
  createConfig: { action: "config.create", created: create("config", "config_id", "config_id") },
  updateConfig: { action: "config.update" },
  deleteConfig: { action: "config.delete" },
  createNode: { action: "node.create", created: create("node", "node_id") },
  updateNode: { action: "node.update" },
  deleteNode: { action: "node.delete" },
  createMeshPair: { action: "mesh_pair.create", created: create("mesh_pair", "pair_id") },
  updateMeshPair: { action: "mesh_pair.update" },
  deleteMeshPair: { action: "mesh_pair.delete" },
  createPortForward: { action: "port_forward.create", created: create("port_forward", "forward_id") },
  updatePortForward: { action: "port_forward.update" },
  deletePortForward: { action: "port_forward.delete" },
  issueBindCommand: { action: "node.bind_command" },
  bindClient: { action: "node.bind", created: create("node", "profile.node_id", "profile.config_id") },
  resetClient: { action: "node.reset_client" },
  sendControlCommand: { action: (body) => `control.${controlActionOf(body)}` },
  grantNodeConfigDownload: { action: "node.download_token" },
  buildClientArtifact: { action: "artifact.build" },
  grantClientArtifactDownload: { action: "artifact.download_token" },
  buildConfigPackage: { action: "package.build", created: create("package", "package_id") },
  createSnapshot: { action: "snapshot.create", created: create("snapshot", "snapshot_id") },
  importSnapshot: { action: "snapshot.import", created: create("snapshot", "snapshot_id") },
  restoreSnapshot: { action: "snapshot.restore" },
  deleteSnapshot: { action: "snapshot.delete" },
  grantSnapshotDownload: { action: "snapshot.download_token" },
  updateMqttSettings: { action: "settings.mqtt_update" },
  updateServerSettings: { action: "settings.server_update" },
  callMcp: { action: "mcp.call", onlyNoted: true },
  endMcpSession: { action: "mcp.end_session" },
  authorizeEmqxClient: { action: "broker.authorize", never: true },
  createAlertChannel: { action: "alert_channel.create", created: create("alert_channel", "channel_id") },
  updateAlertChannel: { action: "alert_channel.update" },
  deleteAlertChannel: { action: "alert_channel.delete" },
  testAlertChannel: { action: "alert_channel.test" },
  rotateAlertChannelSecret: { action: "alert_channel.rotate_secret" },
  refreshConfigLinks: { action: "links.refresh" },
  createAlertRule: { action: "alert_rule.create", created: create("alert_rule", "rule_id") },
  updateAlertRule: { action: "alert_rule.update" },
  deleteAlertRule: { action: "alert_rule.delete" },
};

/** Path parameters that name a target, most specific first, with the target's type. */
const TARGET_PARAMS: ReadonlyArray<readonly [string, string]> = [
  ["forward_id", "port_forward"],
  ["pair_id", "mesh_pair"],
  ["node_id", "node"],
  ["user_id", "user"],
  ["token_id", "token"],
  ["snapshot_id", "snapshot"],
  ["artifact_id", "artifact"],
  ["package_id", "package"],
  ["channel_id", "alert_channel"],
  ["rule_id", "alert_rule"],
  ["config_id", "config"],
];

/** What a handler adds to its request's entry (the MCP tools: which tool wrote, its outcome and target). */
export interface AuditNote {
  action?: string;
  outcome?: AuditOutcome;
  target?: { type: string; id: string | null };
  /** JSON text of the summary of what was asked (see src/services/audit-changes.ts). */
  changes?: string | null;
  /** The created target's id and config, read from a 2xx answer. */
  createdId?: string;
  createdConfigId?: string;
  /** The command's request_id (control commands), read from the answer. */
  requestId?: string;
}

const notes = new WeakMap<FastifyRequest, AuditNote>();

/** Adds to the audit entry of `req` (merged with what was noted before). */
export function noteAudit(req: FastifyRequest, note: AuditNote): void {
  notes.set(req, { ...notes.get(req), ...note });
}

/**
 * Records every state-changing request (any method but GET and HEAD), every refused read (403),
 * and every sign-in by a public route (it sets `req.principal`), once the answer is sent: the
 * entry is queued, the request never waits for its write. `onSend` reads a create's new id and
 * a command's request_id from the answer (only those fields; nothing else of it is kept).
 */
export function registerAuditHooks(app: App, audit: AuditService): void {
  app.addHook("onSend", async (req, reply, payload) => {
    captureAnswer(req, reply, payload);
    return payload;
  });
  app.addHook("onResponse", async (req, reply) => {
    const entry = auditEntryOf(req, reply.statusCode);
    if (entry !== null) audit.record(entry);
  });
}

function operationIdOf(req: FastifyRequest): string | undefined {
  return (req.routeOptions.schema as { operationId?: string } | undefined)?.operationId;
}

function captureAnswer(req: FastifyRequest, reply: FastifyReply, payload: unknown): void {
  if (reply.statusCode >= 300 || typeof payload !== "string" || payload.length > 65_536) return;
  const operationId = operationIdOf(req);
  const rule = operationId === undefined ? undefined : AUDIT_RULES[operationId];
  if (rule?.created === undefined && operationId !== "sendControlCommand") return;
  let answer: unknown;
  try {
    answer = JSON.parse(payload);
  } catch {
    return;
  }
  const note: AuditNote = {};
  if (rule?.created !== undefined) {
    const id = pick(answer, rule.created.path);
    if (id !== undefined) note.createdId = id;
    const configId = rule.created.configPath === undefined ? undefined : pick(answer, rule.created.configPath);
    if (configId !== undefined) note.createdConfigId = configId;
  }
  const requestId = pick(answer, "request_id");
  if (requestId !== undefined) note.requestId = requestId;
  noteAudit(req, note);
}

/** The string at a dotted path of a parsed answer, if it is one. */
function pick(value: unknown, path: string): string | undefined {
  let at = value;
  for (const key of path.split(".")) {
    if (typeof at !== "object" || at === null) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return typeof at === "string" ? at : undefined;
}

/** The entry a finished request is recorded with, or null when it is not recorded. */
export function auditEntryOf(req: FastifyRequest, status: number): AuditRecord | null {
  const operationId = operationIdOf(req);
  if (operationId === undefined) return null;
  const rule = AUDIT_RULES[operationId];
  const note = notes.get(req) ?? {};
  const refused = status === 401 || status === 403;
  const write = req.method !== "GET" && req.method !== "HEAD";
  const signedInByRoute = req.routeOptions.config.auth === "public" && req.principal !== undefined;
  if (rule?.never === true) return null;
  if (rule?.onlyNoted === true && note.action === undefined && !refused) return null;
  if (!write && status !== 403 && !signedInByRoute && rule?.always !== true) return null;
  const action = note.action ?? (rule === undefined ? `api.${snakeCase(operationId)}` : typeof rule.action === "string" ? rule.action : rule.action(req.body));
  const outcome: AuditOutcome = note.outcome ?? (status < 400 ? "ok" : refused ? "denied" : "failed");
  return {
    ...actorOf(req, rule),
    action,
    ...targetOf(req, rule, note),
    outcome,
    source_ip: req.ip ?? null,
    request_id: note.requestId ?? req.id,
    changes: note.changes !== undefined ? note.changes : jsonOrNull(summarizeChanges(req.body)),
  };
}

function actorOf(req: FastifyRequest, rule: AuditRule | undefined): Pick<AuditRecord, "actor_kind" | "actor_id" | "actor_name"> {
  const p = req.principal;
  if (p !== undefined) {
    if (p.via === "token") return { actor_kind: "token", actor_id: p.token?.token_id ?? null, actor_name: p.username };
    return { actor_kind: p.login === "oidc" ? "oidc" : "user", actor_id: p.user_id, actor_name: p.username };
  }
  if (rule?.signIn === true) {
    const tried = (req.body as { username?: unknown } | undefined)?.username;
    return { actor_kind: "user", actor_id: null, actor_name: typeof tried === "string" ? tried.slice(0, 64) : "admin" };
  }
  return { actor_kind: "anonymous", actor_id: null, actor_name: null };
}

function targetOf(req: FastifyRequest, rule: AuditRule | undefined, note: AuditNote): Pick<AuditRecord, "target_type" | "target_id" | "target_config_id"> {
  const params = (req.params ?? {}) as Record<string, unknown>;
  const configId = typeof params["config_id"] === "string" ? params["config_id"] : (note.createdConfigId ?? null);
  if (note.target !== undefined) return { target_type: note.target.type, target_id: note.target.id, target_config_id: configId };
  if (rule?.created !== undefined && note.createdId !== undefined) return { target_type: rule.created.type, target_id: note.createdId, target_config_id: configId };
  for (const [param, type] of TARGET_PARAMS) {
    const id = params[param];
    if (typeof id === "string") return { target_type: type, target_id: id, target_config_id: configId };
  }
  return { target_type: rule?.created?.type ?? null, target_id: null, target_config_id: configId };
}

function controlActionOf(body: unknown): string {
  const parsed = controlActionSchema.safeParse((body as { action?: unknown } | undefined)?.action);
  return parsed.success ? parsed.data : "command";
}

function snakeCase(operationId: string): string {
  return operationId.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function jsonOrNull(value: Record<string, unknown> | null): string | null {
  return value === null ? null : JSON.stringify(value);
}
