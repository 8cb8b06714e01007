import { z } from "zod";
import { CLIENT_GOARCH, CLIENT_GOOS } from "./client-targets.js";
import { applyModeSchema, commandStatusSchema, controlActionSchema, nodeModeSchema, presenceStateSchema } from "./enums.js";
import { interfaceNameSchema, forwardTargetSchema, ipv4Schema, queryInt, nameSchema, networkCidrSchema, portSchema, publicAddressSchema, publicUrlSchema, tagSchema, tunnelProtocolSchema } from "./fields.js";
import { configIdSchema, nodeIdSchema } from "./ids.js";
import {
  configViewSchema,
  controlLogViewSchema,
  meshPairViewSchema,
  nodeViewSchema,
  portForwardViewSchema,
  snapshotEntrySchema,
  tagViewSchema,
} from "./views.schema.js";

/**
 * REST request bodies and the answers that are not a view of `views.schema.ts` (DESIGN §5), one
 * zod schema per wire shape, for every client: `src/http` validates and serializes with them (and
 * documents them in OpenAPI), the web console derives its types from them (`z.input` of a body,
 * `z.output` of an answer). Strings are bounded; objects of bodies are strict (an
 * unknown field is VALIDATION_FAILED, not dropped).
 */

// ---- request bodies -----------------------------------------------------------------------

/** `POST /api/v1/auth/login` */
export const loginBody = z.strictObject({
  username: z.string().min(1).max(64).default("admin").describe("defaults to admin, the first owner (scripts from before users keep working)"),
  password: z.string().min(1).max(1024),
});

const APPLY_MODE_DESCRIPTION =
  "how pushes are applied on a running host: restart (default, spec §3.8: stop, write, start; every tunnel of the host drops briefly) or hitless (peers changed on the running interface when only peers changed, else restart)";

/** `POST /api/v1/configs` */
export const createConfigBody = z.strictObject({
  name: nameSchema,
  tunnel_protocol: tunnelProtocolSchema,
  network_cidr: networkCidrSchema,
  apply_mode: applyModeSchema.optional().describe(APPLY_MODE_DESCRIPTION),
});

/** `PATCH /api/v1/configs/{config_id}` */
export const updateConfigBody = z.strictObject({
  name: nameSchema.optional(),
  tunnel_protocol: tunnelProtocolSchema.optional(),
  network_cidr: networkCidrSchema.optional(),
  apply_mode: applyModeSchema.optional().describe(APPLY_MODE_DESCRIPTION),
});

/** `POST /api/v1/configs/{config_id}/nodes` */
export const createNodeBody = z.strictObject({
  name: nameSchema,
  mode: nodeModeSchema,
  address: ipv4Schema.optional(),
  public_address: publicAddressSchema.nullable().optional(),
  listen_port: portSchema.nullable().optional(),
  interface_name: interfaceNameSchema.optional(),
  tags: z.array(tagSchema).max(32).optional(),
  auto_pair: z.boolean().optional(),
  hub: z.boolean().optional().describe("forward between nodes that cannot reach each other directly; needs public_address (HUB_NEEDS_PUBLIC_ENDPOINT)"),
});

/** `PATCH /api/v1/configs/{config_id}/nodes/{node_id}` */
export const updateNodeBody = z.strictObject({
  name: nameSchema.optional(),
  address: ipv4Schema.optional().describe("a new tunnel address: a free host address of the config's network; the node and its peers re-stage"),
  mode: nodeModeSchema.optional(),
  public_address: publicAddressSchema.nullable().optional(),
  listen_port: portSchema.nullable().optional(),
  interface_name: interfaceNameSchema.optional(),
  tags: z.array(tagSchema).max(32).optional(),
  hub: z.boolean().optional().describe("forward between nodes that cannot reach each other directly; needs a public address (HUB_NEEDS_PUBLIC_ENDPOINT)"),
});

/** `POST /api/v1/configs/{config_id}/mesh-pairs` */
export const createPairBody = z.strictObject({
  node_a: nodeIdSchema,
  node_b: nodeIdSchema,
  enabled: z.boolean().optional(),
});

/** `PATCH /api/v1/configs/{config_id}/mesh-pairs/{pair_id}` */
export const updatePairBody = z.strictObject({ enabled: z.boolean() });

/** `POST /api/v1/configs/{config_id}/nodes/{node_id}/port-forwards` */
export const createPortForwardBody = z.strictObject({
  protocol: z.enum(["tcp", "udp"]),
  listen_port: portSchema,
  target_address: forwardTargetSchema,
  target_port: portSchema,
  enabled: z.boolean().optional(),
});

/** `PATCH …/port-forwards/{forward_id}` */
export const updatePortForwardBody = createPortForwardBody.partial();

/**
 * `PUT /api/v1/settings/mqtt`: a value sets the override, `null` goes back to the environment's
 * value, an absent field is unchanged; at least one field. Unknown fields are refused.
 */
export const mqttSettingsBody = z
  .strictObject({
    public_host: publicAddressSchema.nullable().optional(),
    public_port: portSchema.nullable().optional(),
    public_tls_port: portSchema.nullable().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, "give at least one of public_host, public_port, public_tls_port");

/**
 * `PUT /api/v1/settings/server`: the public URL hosts are told (bind commands, bind profiles,
 * download commands); `null` removes the stored one (back to the default). Refused while
 * SVC_PUBLIC_URL sets it.
 */
export const serverSettingsBody = z.strictObject({ public_url: publicUrlSchema.nullable() });

/** `POST …/control` (spec §6.3 actions). */
export const controlBody = z.strictObject({ action: controlActionSchema });

/** Request body of client build and download-grant (spec §4: same shape for both). */
export const artifactRequestBody = z.strictObject({
  source: z.enum(["remote_release", "local_build"]),
  goos: z.enum(CLIENT_GOOS).describe("target operating system; linux, darwin or windows"),
  goarch: z
    .enum(CLIENT_GOARCH)
    .describe("target architecture; linux: amd64, arm64, arm; darwin and windows: amd64, arm64 (other pairs: VALIDATION_FAILED)"),
});

/** `POST /api/v1/packages` (bulk config package): the configs to include, all when absent. */
export const bulkPackageBody = z
  .strictObject({ config_ids: z.array(configIdSchema).min(1).max(10_000).optional() })
  .nullish();

/**
 * A snapshot passphrase as given to decrypt (restore, import): never logged, never stored.
 * Creating one asks for more ({@link createSnapshotBody}).
 */
const snapshotPassphrase = z.string().min(1, "must not be empty").max(1024, "must be at most 1024 characters");

/** A passphrase that encrypts a new snapshot (REST and the MCP tool alike): at least 12 characters. */
export const newSnapshotPassphrase = z.string().min(12, "must be at least 12 characters").max(1024, "must be at most 1024 characters");

/**
 * `POST /api/v1/backups`: with `passphrase`, the snapshot file is encrypted with it (scrypt,
 * AES-256-GCM; docs/backups.md); without, it is a plain zip.
 */
export const createSnapshotBody = z.strictObject({ passphrase: newSnapshotPassphrase.optional() }).nullish();

/** `POST /api/v1/backups/{snapshot_id}/restore`: the passphrase of an encrypted snapshot. */
export const restoreSnapshotBody = z.strictObject({ passphrase: snapshotPassphrase.optional() }).nullish();

/**
 * `POST /api/v1/backups/import` headers: `x-snapshot-passphrase` carries the passphrase of an
 * encrypted file, percent-encoded UTF-8 (`encodeURIComponent`), since the body is the file.
 */
export const importSnapshotHeaders = z.object({
  "x-snapshot-passphrase": z
    .string()
    .max(3 * 1024)
    .transform((value, ctx) => {
      try {
        return decodeURIComponent(value);
      } catch {
        ctx.addIssue({ code: "custom", message: "must be percent-encoded UTF-8" });
        return z.NEVER;
      }
    })
    .pipe(snapshotPassphrase)
    .optional(),
});

// ---- answers ------------------------------------------------------------------------------

/**
 * `POST /api/v1/auth/login`: `expires_at` on the server's clock and `expires_in`, the lifetime in
 * seconds (RFC 6749 §5.1), which a client adds to its own clock (clocks may differ).
 */
export const loginAnswer = z.object({ access_token: z.string(), token_type: z.literal("Bearer"), expires_at: z.string(), expires_in: z.number().int() });

/** `GET /api/v1/health` */
export const healthAnswer = z.object({ status: z.literal("ok"), version: z.string() });

/** `GET /api/v1/configs/{config_id}/tags` */
export const tagListAnswer = z.object({ tags: z.array(tagViewSchema) });
/** `GET …/port-forwards` */
export const portForwardListAnswer = z.object({ port_forwards: z.array(portForwardViewSchema) });

/** `GET …/nodes/{node_id}/config`: the staged config (admin only). */
export const stagedConfigAnswer = z.object({
  config_id: z.string(),
  node_id: z.string(),
  config_version: z.number(),
  config_sha256: z.string(),
  config_text: z.string(),
  /** The file name the config download serves it under (`<config>-<node>.conf`, src/protocol/config-file-name.ts). */
  filename: z.string(),
  /** What the node's config download last served (version, sha, when), or null: never downloaded. */
  last_download: z
    .object({ config_version: z.number(), config_sha256: z.string(), downloaded_at: z.iso.datetime() })
    .nullable(),
});

/** `POST …/nodes/{node_id}/download-token` */
export const downloadTokenAnswer = z.object({
  download_path: z.string(),
  download_token: z.string(),
  download_token_expires_at: z.string(),
});

/** `POST …/bind-command` (spec §3.6): the command to run on the endpoint host and when it expires. */
export const bindCommandAnswer = z.object({ command: z.string(), expires_at: z.string() });

/** `POST …/control`: 202, the command's request id and its control log row. */
export const controlAnswer = z.object({ request_id: z.string(), log: controlLogViewSchema });


/** Client build answer for `remote_release` (spec §4 rules 2 and 5). */
export const remoteBuildAnswer = z.object({
  source: z.literal("remote_release"),
  filename: z.string(),
  download_url: z.string().describe("the release asset's browser_download_url; download it from there directly"),
  command: z.string().describe("spec §4 rule 5: curl -fL -o <file> <url> && unzip -oq <file> -d svc-client"),
});

/** Client build answer for `local_build` (spec §4 rule 6). */
export const localBuildAnswer = z.object({
  source: z.literal("local_build"),
  artifact_id: z.string(),
  filename: z.string(),
  size_bytes: z.number(),
  sha256: z.string(),
});

/** `POST …/client/build` */
export const artifactBuildAnswer = z.discriminatedUnion("source", [remoteBuildAnswer, localBuildAnswer]);

/** `POST …/client/download-grant` (spec §4 rule 6). */
export const artifactGrantAnswer = z.object({
  artifact_id: z.string(),
  filename: z.string(),
  size_bytes: z.number(),
  sha256: z.string(),
  download_path: z.string().describe("carries ?download_token=..."),
  download_token: z.string(),
  download_token_expires_at: z.string(),
  command: z.string().describe("spec §4 rule 6: curl of {base_url}{download_path} (only the file token), then unzip -oq -d svc-client"),
});

/** A file download granted by a short-lived token (snapshots, bulk packages). */
export const downloadGrantAnswer = z.object({
  filename: z.string(),
  download_path: z.string(),
  download_token: z.string(),
  download_token_expires_at: z.string(),
});

/** `GET /api/v1/backups` */
export const snapshotListAnswer = z.object({ snapshots: z.array(snapshotEntrySchema) });
/** `POST /api/v1/backups/{snapshot_id}/restore`: what was restored; each of its dynamic nodes must bind again. */
export const restoreAnswer = z.object({ restored: z.string(), configs: z.number(), nodes: z.number(), dynamic_nodes: z.number() });

// ---- lists for big fleets -------------------------------------------------
// Every list is keyset-paginated: `limit` rows per page, and the answer's `next_cursor` (null on
// the last page) passed back as `cursor` for the next one. A cursor is opaque (base64url of one of
// the `*CursorSchema` shapes below), names its list, and stays valid while rows are inserted or
// deleted: it holds the sort key of the last row given, not an offset. A cursor that does not
// decode to its list's shape is INVALID_CURSOR (400).

/** Largest page of any list. */
export const PAGE_LIMIT_MAX = 1000;

const pageLimit = (byDefault: number) =>
  queryInt(1, PAGE_LIMIT_MAX).default(byDefault).describe(`rows per page, 1–${PAGE_LIMIT_MAX}`);
const pageCursor = z.string().min(1).max(1024).describe("opaque: the next_cursor of the previous page");
const nextCursor = z.string().nullable().describe("pass as `cursor` for the next page; null on the last page");
const textFilter = z.string().trim().max(200);

/**
 * Largest page of the mesh-pair list, and its default: a full mesh of up to 141 nodes
 * (≤ 9,870 pairs) still answers in one page, as before the list was paged; a 1,000-node full mesh
 * (499,500 pairs, 168 MB of JSON in one answer) is read page by page or node by node.
 */
export const PAIR_PAGE_LIMIT_MAX = 10_000;

/** `GET /api/v1/configs/{config_id}/mesh-pairs`: one page in creation order, optionally one node's pairs only. */
export const meshPairListQuery = z.strictObject({
  limit: queryInt(1, PAIR_PAGE_LIMIT_MAX).default(PAIR_PAGE_LIMIT_MAX).describe(`pairs per page, 1–${PAIR_PAGE_LIMIT_MAX}`),
  cursor: pageCursor.optional(),
  node_id: nodeIdSchema.optional().describe("only the pairs this node is a side of (404 when the config has no such node)"),
});

/** `GET /api/v1/configs/{config_id}/mesh-pairs`: pairs with their connection integrity (spec §6.5), creation order. */
export const meshPairListAnswer = z.object({ mesh_pairs: z.array(meshPairViewSchema), next_cursor: nextCursor });

/** Derived sync state filter of the node list: spec §3.5 `latest`/`pending`, or `static` (no agent). */
export const nodeSyncFilterSchema = z.enum(["latest", "pending", "static"]);

/** Filters of the node list and its counts: presence (spec §3.1), stored mode, sync (spec §3.5), text. */
export const nodeFilterQuery = z.strictObject({
  presence: presenceStateSchema.optional().describe("the node view's client_presence_state"),
  mode: nodeModeSchema.optional().describe("the stored mode (not effective_mode)"),
  sync: nodeSyncFilterSchema.optional().describe("config_version_state, or static when it is null"),
  q: textFilter.optional().describe("case-insensitive substring of name, tunnel address, public address or a tag"),
});

/** `GET /api/v1/configs/{config_id}/nodes`: query. */
export const nodeListQuery = nodeFilterQuery.extend({ limit: pageLimit(PAGE_LIMIT_MAX), cursor: pageCursor.optional() });

/** `GET /api/v1/configs/{config_id}/nodes`: one page, in creation order. */
export const nodeListAnswer = z.object({ nodes: z.array(nodeViewSchema), next_cursor: nextCursor });

/** `GET /api/v1/configs/{config_id}/node-counts`: the config's nodes by state, and how many match the filter. */
export const nodeCountsAnswer = z.object({
  total: z.number().int(),
  matching: z.number().int().describe("nodes matching the query's filters (total when there are none)"),
  presence: z.object({ online: z.number().int(), dropped: z.number().int(), offline: z.number().int() }),
  mode: z.object({ static: z.number().int(), dynamic: z.number().int() }),
  sync: z.object({ latest: z.number().int(), pending: z.number().int(), static: z.number().int() }),
});

/** `GET /api/v1/configs`: query. */
export const configListQuery = z.strictObject({
  limit: pageLimit(PAGE_LIMIT_MAX),
  cursor: pageCursor.optional(),
  q: textFilter.optional().describe("case-insensitive substring of the name"),
});

/** `GET /api/v1/configs`: one page in creation order; `total` configs, `matching` the filter. */
export const configListAnswer = z.object({
  configs: z.array(configViewSchema),
  next_cursor: nextCursor,
  total: z.number().int(),
  matching: z.number().int(),
});

/** `GET …/control-logs`: query. */
export const controlLogListQuery = z.strictObject({
  limit: pageLimit(100),
  cursor: pageCursor.optional(),
  kind: z.enum(["command", "output", "event"]).optional(),
  status: commandStatusSchema.optional().describe("a command's status; rows without one never match"),
});

/** `GET …/control-logs`: one page, newest first; `counts` of the node's rows by kind. */
export const controlLogListAnswer = z.object({
  logs: z.array(controlLogViewSchema),
  next_cursor: nextCursor,
  counts: z.object({ command: z.number().int(), output: z.number().int(), event: z.number().int() }),
});

/** The position a node-list cursor holds (its last row's sort key) and the list it belongs to. */
export const nodeCursorSchema = z.strictObject({ l: z.literal("nodes"), c: z.string().min(1), at: z.number().int(), id: z.string().min(1) });
/** The position a mesh-pair cursor holds: the config, the node filter (if any), and the last pair's sort key. */
export const meshPairCursorSchema = z.strictObject({
  l: z.literal("mesh_pairs"),
  c: z.string().min(1),
  n: z.string().min(1).optional(),
  at: z.number().int(),
  id: z.string().min(1),
});
/** The position a config-list cursor holds. */
export const configCursorSchema = z.strictObject({ l: z.literal("configs"), at: z.number().int(), id: z.string().min(1) });
/** The position a control-log cursor holds (the list is one node's). */
export const controlLogCursorSchema = z.strictObject({ l: z.literal("control_logs"), n: z.string().min(1), id: z.number().int() });
