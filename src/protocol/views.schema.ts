import { z } from "zod";
import {
  applyModeSchema,
  commandStatusSchema,
  configVersionStateSchema,
  controlLogKindSchema,
  nodeModeSchema,
  presenceStateSchema,
  runtimeStateSchema,
  tunnelProtocolSchema,
} from "./enums.js";

/**
 * Wire shapes that two boundaries share: the REST answers of DESIGN §5 and the SSE payloads of
 * spec §6.5 that embed them (src/events/event-types.ts). One zod schema each; the REST layer
 * re-exports them under its `…Response` names (src/http/schemas.ts), the hub's payload types
 * derive from them. Times are ISO 8601 UTC strings, enums their wire strings (spec §6.5: "times,
 * enums and domain objects are converted to strings or plain objects before sending").
 * Objects are not strict: as response whitelists they drop unknown keys.
 */

const isoTime = z.string();
const nodeMode = nodeModeSchema;
const presenceState = presenceStateSchema;
const runtimeState = runtimeStateSchema;
const configVersionState = configVersionStateSchema;
const stagedConfig = z.object({ config_version: z.number(), config_sha256: z.string().nullable() });

/** AmneziaWG obfuscation parameters of a config (src/domain/awg.ts `AwgParams`). */
export const awgParamsViewSchema = z.object({
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

/** A config (spec §2.2): `GET /api/v1/configs` rows, `config.list.updated` `configs[*]`. */
export const configViewSchema = z.object({
  config_id: z.string(),
  name: z.string(),
  tunnel_protocol: tunnelProtocolSchema,
  network_cidr: z.string(),
  awg: awgParamsViewSchema.nullable(),
  created_at: isoTime,
  updated_at: isoTime,
  apply_mode: applyModeSchema.describe("how pushes are applied on a running host: restart (spec §3.8) or hitless (peers changed on the running interface)"),
});

/** A node's client state as the backend stores and computes it (spec §2.7). */
export const nodeClientViewSchema = z.object({
  client_initialized: z.boolean(),
  client_presence_state: presenceState,
  runtime_state: runtimeState,
  last_reachable_at: isoTime.nullable(),
  client_version: z.string().nullable(),
  config_version_state: configVersionState.nullable(),
});

/** A node (spec §2.3, §2.7): REST node answers, `node.workspace.updated` `workspace`. */
export const nodeViewSchema = z.object({
  node_id: z.string(),
  config_id: z.string(),
  name: z.string(),
  mode: nodeMode,
  effective_mode: nodeMode,
  interface_name: z.string(),
  address: z.string(),
  public_address: z.string().nullable(),
  listen_port: z.number().nullable(),
  public_key: z.string(),
  /** A hub forwards between nodes of its config that cannot reach each other directly. */
  hub: z.boolean(),
  tags: z.array(z.string()),
  staged_config: stagedConfig,
  client: nodeClientViewSchema,
  created_at: isoTime,
  updated_at: isoTime,
});

/** A tag and the nodes carrying it. */
export const tagViewSchema = z.object({ tag: z.string(), node_ids: z.array(z.string()) });

/** A config with its nodes and tags: `GET /api/v1/configs/:id`, `config.overview.updated` `overview`. */
export const configDetailViewSchema = configViewSchema.extend({
  nodes: z.array(nodeViewSchema),
  tags: z.array(tagViewSchema),
});

/** A mesh pair with its connection-integrity result (spec §2.4, §6.5 `workspace.connections[*]`). */
export const meshPairViewSchema = z.object({
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
  /**
   * How an `ok` pair's packets travel: `direct` (a handshake between the two) or `via_hub`
   * (neither has a public endpoint; the hub `hub_node_id`, paired with both, forwards between
   * them); null while broken or disabled.
   */
  route: z.enum(["direct", "via_hub"]).nullable(),
  /** The hub of a `via_hub` pair; null otherwise. */
  hub_node_id: z.string().nullable(),
  created_at: isoTime,
  updated_at: isoTime,
});

/** A port forward of a node: the port-forward answers. */
export const portForwardViewSchema = z.object({
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

/** An endpoint's control runtime and sync state: the endpoint-status answer, `endpoint.status.updated` `status`. */
export const endpointStatusViewSchema = z.object({
  config_id: z.string(),
  node_id: z.string(),
  mode: nodeMode,
  effective_mode: nodeMode,
  ...nodeClientViewSchema.shape,
  staged_config: stagedConfig,
  confirmed_config: z.object({ config_version: z.number().nullable(), config_sha256: z.string().nullable() }),
  mqtt_enabled: z.boolean(),
});

/** One control log row (spec §6.4): the log answers, `control.log.created`/`control.log.updated` `log`. */
export const controlLogViewSchema = z.object({
  log_id: z.number(),
  config_id: z.string(),
  node_id: z.string(),
  request_id: z.string().nullable(),
  kind: controlLogKindSchema,
  action: z.string().nullable(),
  status: commandStatusSchema.nullable(),
  message: z.string().nullable(),
  stream: z.string().nullable(),
  output: z.string().nullable(),
  /** Client events (spec §6.3): `level` and the event name; null for commands. */
  level: z.string().nullable(),
  event: z.string().nullable(),
  created_at: isoTime,
  updated_at: isoTime,
});

const settingSource = z.enum(["settings", "environment"]);

/** The MQTT settings answer (no secrets: DESIGN §5), `settings.mqtt.updated` `mqtt`. */
export const mqttSettingsViewSchema = z.object({
  mqtt_enabled: z.boolean(),
  broker: z.string(),
  broker_connected: z.boolean(),
  public_host: z.string(),
  public_port: z.number(),
  public_tls_port: z.number(),
  tls_enabled: z.boolean(),
  backend_username: z.string(),
  sources: z.object({ public_host: settingSource, public_port: settingSource, public_tls_port: settingSource }),
});

/**
 * `GET, PUT /api/v1/settings/server` and the `settings.server.updated` payload's `server`: the
 * public URL hosts are told now (`public_url`, no trailing slash), where it comes from
 * (`environment`: SVC_PUBLIC_URL, which wins; `stored`: set in Settings; `default`:
 * `http://localhost:{port}`), whether it names this machine only (`loopback`: other hosts
 * cannot use it) and the stored value (null when none; not in effect while SVC_PUBLIC_URL is set).
 */
export const serverSettingsViewSchema = z.object({
  public_url: z.string(),
  source: z.enum(["environment", "stored", "default"]),
  loopback: z.boolean(),
  stored_public_url: z.string().nullable(),
});

/** One snapshot of the list (DESIGN §5), `snapshot.list.updated` `snapshots[*]`. */
export const snapshotEntrySchema = z.object({
  snapshot_id: z.string(),
  created_at: z.string(),
  size_bytes: z.number(),
  sha256: z.string(),
  /** The stored file is encrypted with a passphrase: its download is the encrypted file, restore needs the passphrase. */
  encrypted: z.boolean(),
  /**
   * What the snapshot holds, counted when it was created or imported; null for a snapshot stored
   * before counts were kept. Every dynamic node in it must bind again after a restore.
   */
  contents: z.object({ configs: z.number(), nodes: z.number(), dynamic_nodes: z.number() }).nullable(),
});

/** `GET /api/v1/system/status` and the `system.status.updated` payload (DESIGN §5). */
export const systemStatusSchema = z.object({
  summary: z.object({ configs: z.number(), nodes: z.number(), dynamic_nodes: z.number(), online: z.number(), dropped: z.number() }),
  services: z.object({ mqtt: z.object({ enabled: z.boolean(), broker: z.string(), connected: z.boolean() }) }),
  sync: z.object({ latest: z.number(), pending: z.number() }),
  topology: z.object({ mesh_pairs: z.number() }),
  /**
   * The server version, and where release assets of the client live (SVC_RELEASE_DOWNLOAD_URL,
   * no trailing slash): the console builds `{release_download_url}/v{version}/{asset}` itself
   * for `remote_release` (spec §4 rules 2 and 5, DESIGN §6).
   */
  update: z.object({ version: z.string(), release_download_url: z.string() }),
});
export type SystemStatus = z.output<typeof systemStatusSchema>;
