import type { ColumnType, Generated, Insertable, Selectable, Updateable } from "kysely";
import type { DownloadTokenKind } from "../protocol/download-tokens.js";
import type { ApplyMode, CommandStatus, NodeMode, PresenceState, RuntimeState, TunnelProtocol } from "../protocol/enums.js";

/**
 * Kysely table types of the SQLite store. Times are INTEGER milliseconds since the epoch;
 * booleans are INTEGER 0/1; JSON columns are TEXT. The layout is that of migration
 * `0001_init` (src/store/migrations.ts).
 */

export interface SettingsKvTable {
  key: string;
  value: string;
  updated_at: number;
}

export interface AdminSessionsTable {
  /** SHA-256 hex of the bearer token. */
  token_hash: string;
  /** Whose session it is. */
  user_id: string;
  created_at: number;
  expires_at: number;
  /** How the session was opened: the user's password or single sign-on (migration 0020). */
  login: Generated<"password" | "oidc">;
}

export interface UsersTable {
  user_id: string;
  /** Unique without regard to case. */
  username: string;
  /** scrypt hash (src/domain/tokens.ts `hashPassword`); null: no password sign-in. */
  password_hash: string | null;
  role: "viewer" | "operator" | "admin" | "owner";
  disabled: number;
  created_at: number;
  updated_at: number;
}
export type UserRow = Selectable<UsersTable>;

/** A local user signed in through an OpenID provider: the provider's issuer and subject name them (migration 0020). */
export interface UserOidcLinksTable {
  issuer: string;
  subject: string;
  /** One link per user. */
  user_id: string;
  created_at: number;
}

export interface AccessTokensTable {
  token_id: string;
  user_id: string;
  name: string;
  /** The token's own role; it acts with the lower of this and its user's current role. */
  role: "viewer" | "operator" | "admin" | "owner";
  /** SHA-256 hex of the secret. */
  token_hash: string;
  created_at: number;
  expires_at: number;
  /** Last use, ms; written at most once a minute. Null: never used. */
  last_used_at: number | null;
}
export type AccessTokenRow = Selectable<AccessTokensTable>;

export interface ConfigsTable {
  config_id: string;
  name: string;
  tunnel_protocol: TunnelProtocol;
  network_cidr: string;
  /** JSON of AwgParams; generated once per config (DESIGN §3 awg_2). */
  awg_params: string | null;
  created_at: number;
  updated_at: number;
  /** How pushes are applied on a running host (migration 0024; default `restart`, spec §3.8). */
  apply_mode: Generated<ApplyMode>;
}

export interface NodesTable {
  node_id: string;
  config_id: string;
  name: string;
  mode: NodeMode;
  interface_name: string;
  /** Tunnel address inside the config's network_cidr. */
  address: string;
  public_address: string | null;
  listen_port: number | null;
  private_key: string;
  public_key: string;
  /** Staged config (DESIGN §3 Config versions): 0 before the first render. */
  staged_config_version: number;
  /** SHA-256 of the staged text once rendered (its text is in `node_staged_texts`); NULL until then. */
  staged_config_sha256: string | null;
  /** What the agent last confirmed with an `applied` push ACK (spec §3.5). */
  confirmed_config_version: number | null;
  confirmed_config_sha256: string | null;
  created_at: number;
  updated_at: number;
  /**
   * 1 when the node is a hub (migration 0015): it has a public endpoint and forwards between
   * nodes of its config that cannot reach each other directly; else 0.
   */
  hub: ColumnType<0 | 1, 0 | 1 | undefined, 0 | 1>;
  /**
   * The node's place in the order nodes were created, unique across the store (migration 0016):
   * what the full-mesh policy and the ids of its pairs are derived from
   * (src/store/mesh-pairs.repository.ts). Never changes; `insertNode` gives the next one when
   * the row has none.
   */
  mesh_seq: ColumnType<number, number | undefined, never>;
  /**
   * 1 when the node joined every node of its config that existed when it was created (the
   * full-mesh policy: `auto_pair` of the create body, default true); its pairs with them are not
   * stored as rows unless the operator changed one (migration 0016). Never changes.
   */
  auto_pair: ColumnType<0 | 1, 0 | 1 | undefined, never>;
}

/**
 * A node's rendered staged config text (migration 0013): the text whose SHA-256 is
 * `config_sha256`, rendered at `config_version`. It is the node's staged text only while the
 * node's `staged_config_version` and `staged_config_sha256` are these; a write that bumps the
 * node leaves it stale until the next rendering replaces it (docs/history/decisions-2026.md "staged
 * texts in their own table").
 */
export interface NodeStagedTextsTable {
  node_id: string;
  config_version: number;
  config_sha256: string;
  config_text: string;
}

export interface NodeTagsTable {
  node_id: string;
  tag: string;
}

export interface NodeClientStateTable {
  node_id: string;
  client_initialized: Generated<number>;
  client_presence_state: Generated<PresenceState>;
  runtime_state: Generated<RuntimeState>;
  last_reachable_at: number | null;
  last_signal_at: number | null;
  client_version: string | null;
  platform: string | null;
  hostname: string | null;
  mqtt_username: string | null;
  mqtt_password_hash: string | null;
  boot_id: string | null;
  session_id: string | null;
  /** Persisted XState snapshot (JSON) and its machine version. */
  machine_snapshot: string | null;
  machine_version: number | null;
  /** The node's newest flight-recorder row (`node_transitions.transition_id`); null when none. */
  transition_head: Generated<number | null>;
  updated_at: number;
}

/**
 * A pair of the full-mesh policy the operator deleted (migration 0016): `node_a < node_b`, the
 * later of the two joined with `auto_pair`, and no `mesh_pairs` row for the two.
 */
export interface MeshPairRemovalsTable {
  node_a: string;
  node_b: string;
  config_id: string;
}

export interface MeshPairsTable {
  pair_id: string;
  config_id: string;
  /** node_a < node_b (the store normalizes the order). */
  node_a: string;
  node_b: string;
  enabled: number;
  created_at: number;
  updated_at: number;
}

export interface PortForwardsTable {
  forward_id: string;
  node_id: string;
  protocol: "tcp" | "udp";
  listen_port: number;
  target_address: string;
  target_port: number;
  enabled: number;
  created_at: number;
  updated_at: number;
}

export interface DownloadTokensTable {
  token_hash: string;
  kind: DownloadTokenKind;
  /** `{config_id}/{node_id}` for node_config; the spec §2.1 resource id otherwise. */
  resource_id: string;
  created_at: number;
  expires_at: number;
}

export interface BindTokensTable {
  token_hash: string;
  node_id: string;
  state: "valid" | "used" | "invalidated";
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

export interface ControlLogsTable {
  log_id: Generated<number>;
  node_id: string;
  config_id: string;
  request_id: string | null;
  /** `command` (sent by the backend), `output` (command_output event), `event` (other client events). */
  kind: "command" | "output" | "event";
  action: string | null;
  status: CommandStatus | null;
  message: string | null;
  stream: string | null;
  output: string | null;
  /** Client events (`output`, `event`): the spec §6.3 event payload's `level`; null for commands (migration 0004). */
  level: string | null;
  /** Client events: the spec §6.3 event name (`command_output`, `offline`, `mqtt_connected`, ...); null for commands. */
  event: string | null;
  created_at: number;
  updated_at: number;
  /** Migration 0003: for config pushes, the pair and protocol pushed; NULL otherwise. */
  pushed_config_version: number | null;
  pushed_config_sha256: string | null;
  pushed_tunnel_protocol: TunnelProtocol | null;
}

/**
 * A node's broker password sealed for external brokers (migration 0002; src/mqtt/broker-passwords.ts).
 * Keyed by broker username, no foreign key: a row is only used while its password's SHA-256
 * equals `node_client_state.mqtt_password_hash` of that username. Never in a snapshot.
 */
export interface BrokerCredentialsTable {
  mqtt_username: string;
  /** `v1.{iv}.{tag}.{ciphertext}` (AES-256-GCM under the data directory's key file). */
  password_sealed: string;
  updated_at: number;
}

/** The staged config a node's config download last served (the console's "changed since last download"). */
export interface NodeConfigDownloadsTable {
  node_id: string;
  config_version: number;
  config_sha256: string;
  /** ms since the epoch */
  downloaded_at: number;
}

/** An alert channel (docs/alerts.md). Secrets are sealed (src/services/alerts/channel-secrets.ts), never plain. */
export interface AlertChannelsTable {
  channel_id: string;
  name: string;
  kind: "webhook" | "slack" | "ntfy" | "email";
  /** JSON of the kind's non-secret settings (src/protocol/alerts.schema.ts `channelTarget`). */
  target: string;
  /** The webhook signing secret or the SMTP password, sealed; null when the kind has none. */
  secret_sealed: string | null;
  /** A rotated webhook secret, still signing beside the new one until `previous_secret_until`. */
  previous_secret_sealed: string | null;
  previous_secret_until: number | null;
  enabled: number;
  /** Why and when the service (or an admin) disabled the channel. */
  disabled_reason: string | null;
  disabled_at: number | null;
  /** First failed attempt since the channel's last success; null while it delivers. */
  failing_since: number | null;
  created_at: number;
  updated_at: number;
}
export type AlertChannelRow = Selectable<AlertChannelsTable>;

/** The outbox: one row per alert and channel, its id the receiver's idempotency key. */
export interface AlertDeliveriesTable {
  delivery_id: string;
  channel_id: string;
  /** The alert's type, e.g. `alert.test`, `node.offline`. */
  type: string;
  /** JSON of the alert message (src/protocol/alerts.schema.ts `alertMessageSchema`). */
  message: string;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  /** When the next attempt is due, ms; null once delivered or failed. */
  next_attempt_at: number | null;
  last_attempt_at: number | null;
  last_http_status: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}
export type AlertDeliveryRow = Selectable<AlertDeliveriesTable>;

export interface AlertDeliveryAttemptsTable {
  delivery_id: string;
  /** 1 for the first attempt. */
  attempt: number;
  at: number;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
}
export type AlertDeliveryAttemptRow = Selectable<AlertDeliveryAttemptsTable>;

/** An alert rule (docs/alerts.md "Rules"): which state change, for which nodes, after how long. */
export interface AlertRulesTable {
  rule_id: string;
  name: string;
  event: "node.offline" | "node.dropped" | "node.sync_stuck" | "command.failed" | "mesh.pair_broken" | "broker.disconnected";
  /** Seconds the condition must hold before the alert is sent. */
  for_s: number;
  scope_config_id: string | null;
  scope_tag: string | null;
  scope_node_id: string | null;
  enabled: number;
  created_at: number;
  updated_at: number;
}
export type AlertRuleRow = Selectable<AlertRulesTable>;

/** The channels a rule sends to, in the order given. */
export interface AlertRuleChannelsTable {
  rule_id: string;
  channel_id: string;
  position: number;
}

/** An open alert: a rule's condition holding for one subject, held until `due_at`, then fired. */
export interface AlertOpenTable {
  /** `alr-…`: what the resolving message names (`data.resolves`). */
  alert_id: string;
  rule_id: string;
  event: string;
  /** The node id, or `broker` for the backend's broker link. */
  subject: string;
  config_id: string | null;
  node_id: string | null;
  /** When the condition started, ms. */
  since: number;
  /** `since` + the rule's `for_s`: when the alert fires if the condition still holds, ms. */
  due_at: number;
  /** When it fired (its message went to the outbox or a notice); null while held. */
  fired_at: number | null;
  /** JSON of what the message says about the cause (reason, node name). */
  detail: string;
}
export type AlertOpenRow = Selectable<AlertOpenTable>;

/** A message waiting for its channel's group window to close (grouped with the others then). */
export interface AlertNoticesTable {
  notice_id: Generated<number>;
  channel_id: string;
  /** JSON of the message it would have been alone (src/protocol/alerts.schema.ts `alertMessageSchema`). */
  message: string;
  created_at: number;
}

export interface Database {
  broker_credentials: BrokerCredentialsTable;
  settings_kv: SettingsKvTable;
  admin_sessions: AdminSessionsTable;
  users: UsersTable;
  user_oidc_links: UserOidcLinksTable;
  access_tokens: AccessTokensTable;
  configs: ConfigsTable;
  nodes: NodesTable;
  node_staged_texts: NodeStagedTextsTable;
  node_tags: NodeTagsTable;
  node_client_state: NodeClientStateTable;
  mesh_pairs: MeshPairsTable;
  mesh_pair_removals: MeshPairRemovalsTable;
  port_forwards: PortForwardsTable;
  download_tokens: DownloadTokensTable;
  bind_tokens: BindTokensTable;
  control_logs: ControlLogsTable;
  node_config_downloads: NodeConfigDownloadsTable;
  audit_log: AuditLogTable;
  audit_chain: AuditChainTable;
  alert_channels: AlertChannelsTable;
  alert_deliveries: AlertDeliveriesTable;
  alert_delivery_attempts: AlertDeliveryAttemptsTable;
  alert_rules: AlertRulesTable;
  alert_rule_channels: AlertRuleChannelsTable;
  alert_open: AlertOpenTable;
  alert_notices: AlertNoticesTable;
  node_peer_reports: NodePeerReportsTable;
}

/** The latest peer report of a node's host (migration 0023; docs/links.md). `peers_json`: the report's peers, JSON. */
export interface NodePeerReportsTable {
  node_id: string;
  config_id: string;
  received_at: number;
  host_time: number;
  running: number;
  interface_name: string;
  tunnel_protocol: string;
  public_key: string | null;
  listen_port: number | null;
  peers_json: string;
}

export type ConfigRow = Selectable<ConfigsTable>;
export type NewConfigRow = Insertable<ConfigsTable>;
export type ConfigUpdate = Updateable<ConfigsTable>;
export type NodeRow = Selectable<NodesTable>;
export type NewNodeRow = Insertable<NodesTable>;
export type NodeUpdate = Updateable<NodesTable>;
export type NodeClientStateRow = Selectable<NodeClientStateTable>;
export type MeshPairRow = Selectable<MeshPairsTable>;
export type PortForwardRow = Selectable<PortForwardsTable>;
export type DownloadTokenRow = Selectable<DownloadTokensTable>;
export type ControlLogRow = Selectable<ControlLogsTable>;

/**
 * One audit entry (migration 0019; README "Audit log"): append-only, `hash` chaining it to the
 * row before (src/services/audit-chain.ts). `changes` is JSON text or null.
 */
export interface AuditLogTable {
  audit_id: number;
  /** ms since the epoch */
  at: number;
  actor_kind: "user" | "token" | "oidc" | "system" | "anonymous";
  actor_id: string | null;
  actor_name: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  target_config_id: string | null;
  outcome: "ok" | "denied" | "failed";
  source_ip: string | null;
  request_id: string | null;
  changes: string | null;
  /** SHA-256 hex. */
  hash: string;
}
export type AuditRow = Selectable<AuditLogTable>;

/** Where retention cut the audit chain: the last removed row's id and hash (one row, id 1). */
export interface AuditChainTable {
  id: number;
  pruned_through_id: number;
  pruned_through_hash: string;
  pruned_at: number;
}
