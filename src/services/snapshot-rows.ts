import { createHash } from "node:crypto";
import { setImmediate as nextTurn } from "node:timers/promises";
import { z } from "zod";
import { isHostAddress, parseConfigNetwork } from "../domain/address-pool.js";
import { awgParamsSchema } from "../domain/awg.js";
import { isWireGuardKey, publicKeyFromPrivate } from "../domain/keys.js";
import { AppError, isAppError } from "../errors.js";
import type { Logger } from "../logger.js";
import {
  interfaceNameSchema,
  forwardTargetSchema,
  ipv4Schema,
  nameSchema,
  portSchema,
  publicAddressSchema,
  tagSchema,
  tunnelProtocolSchema,
} from "../protocol/fields.js";
import {
  applyModeSchema,
  commandStatusSchema,
  controlLogKindSchema,
  nodeModeSchema,
  presenceStateSchema,
  runtimeStateSchema,
} from "../protocol/enums.js";
import { configIdSchema, forwardIdSchema, nodeIdSchema, pairIdSchema } from "../protocol/ids.js";
import { Store } from "../store/db.js";
import { pushTargetSchema } from "../store/commands.repository.js";
import { resetAllClientStates } from "../store/node-client-state.repository.js";
import {
  clearConfirmedConfigs,
  deleteUnservedStagedTexts,
  listConfigIds,
  listStagedConfigs,
  listStagedConfigTexts,
  openSnapshotReader,
  setStagedConfigShas,
} from "../store/snapshots.repository.js";
import { restageConfig } from "./rendering.service.js";

/**
 * Row-by-row validation and sanitizing of a snapshot's database (spec §2.4; docs/history/decisions-2026.md "Rows
 * are validated before anything is written"). A snapshot is input from whoever wrote the zip: its
 * manifest digest proves nothing.
 *
 * 1. {@link validateSnapshotRows}: every row of every data table against the field rules of the
 *    REST API (`src/protocol/fields.ts`, the same schemas `src/http/schemas.ts` uses) and the
 *    cross-row rules the service keeps (addresses inside the network, key pairs, pair order).
 * 2. {@link sanitizeSnapshotDatabase}: what the service never takes from a snapshot is replaced
 *    in the private copy: broker credentials and machine snapshots are dropped (restored nodes
 *    start fresh from their columns and dynamic ones re-bind), and every node's config is
 *    re-rendered by the renderer from the validated inputs (`restageConfig`), so the server
 *    only ever serves text its renderer produced.
 */

/** Epoch milliseconds (0 .. year 275760, the largest JS Date). */
const epochMs = z.number().int().min(0).max(8.64e15);
const flag = z.union([z.literal(0), z.literal(1)]);
const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "must be 64 lower-case hex digits");
/** Bounded free text that never reaches a config (client reports, log lines). */
const text = (max: number) => z.string().max(max, `must be at most ${max} characters`);
const wireGuardKey = z.string().refine(isWireGuardKey, "must be a WireGuard key (44 characters of base64 of 32 bytes)");

const networkSchema = z.string().superRefine((cidr, ctx) => {
  try {
    const parsed = parseConfigNetwork(cidr);
    if (parsed.cidr !== cidr) ctx.addIssue({ code: "custom", message: `must be the normalized network ${parsed.cidr}` });
  } catch (err) {
    if (!isAppError(err, "VALIDATION_FAILED")) throw err;
    ctx.addIssue({ code: "custom", message: err.message });
  }
});

const awgParamsText = z.string().superRefine((json, ctx) => {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    ctx.addIssue({ code: "custom", message: "must be JSON" });
    return;
  }
  const parsed = awgParamsSchema.safeParse(value);
  if (!parsed.success) ctx.addIssue({ code: "custom", message: `not valid AmneziaWG parameters (${describeIssue(parsed.error)})` });
});

/** One schema per data table (`src/store/schema.ts`); strict: the columns are exactly these. */
export const SNAPSHOT_ROW_SCHEMAS = {
  configs: z
    .strictObject({
      config_id: configIdSchema,
      name: nameSchema,
      tunnel_protocol: tunnelProtocolSchema,
      network_cidr: networkSchema,
      awg_params: awgParamsText.nullable(),
      created_at: epochMs,
      updated_at: epochMs,
      // migration 0024: how pushes are applied (an older snapshot gets the default, restart).
      apply_mode: applyModeSchema,
    })
    .superRefine((row, ctx) => {
      if (row.tunnel_protocol === "awg_2" && row.awg_params === null) {
        ctx.addIssue({ code: "custom", path: ["awg_params"], message: "an awg_2 config needs its AmneziaWG parameters" });
      }
    }),
  nodes: z
    .strictObject({
      node_id: nodeIdSchema,
      config_id: configIdSchema,
      name: nameSchema,
      mode: nodeModeSchema,
      interface_name: interfaceNameSchema,
      address: ipv4Schema,
      public_address: publicAddressSchema.nullable(),
      listen_port: portSchema.nullable(),
      private_key: wireGuardKey,
      public_key: wireGuardKey,
      staged_config_version: z.number().int().min(0),
      staged_config_sha256: sha256Hex.nullable(),
      confirmed_config_version: z.number().int().min(0).nullable(),
      confirmed_config_sha256: sha256Hex.nullable(),
      created_at: epochMs,
      updated_at: epochMs,
      hub: z.union([z.literal(0), z.literal(1)]),
      // migration 0016: the node's place in creation order and whether it joined the full mesh.
      mesh_seq: z.number().int().min(1),
      auto_pair: z.union([z.literal(0), z.literal(1)]),
    })
    .superRefine((row, ctx) => {
      if (row.hub === 1 && (row.public_address === null || row.listen_port === null)) {
        ctx.addIssue({ code: "custom", path: ["hub"], message: "a hub needs a public address and listen port" });
      }
      if (isWireGuardKey(row.private_key) && isWireGuardKey(row.public_key) && publicKeyFromPrivate(row.private_key) !== row.public_key) {
        ctx.addIssue({ code: "custom", path: ["public_key"], message: "is not the public key of the node's private key" });
      }
      if (row.staged_config_sha256 !== null && row.staged_config_version < 1) {
        ctx.addIssue({ code: "custom", path: ["staged_config_version"], message: "must be at least 1 once a config is staged" });
      }
    }),
  node_staged_texts: z.strictObject({
    node_id: nodeIdSchema,
    config_version: z.number().int().min(1),
    config_sha256: sha256Hex,
    // Never served: re-rendered (sanitizeSnapshotDatabase). Bounded so reading stays cheap.
    config_text: text(1024 * 1024),
  }),
  node_tags: z.strictObject({ node_id: nodeIdSchema, tag: tagSchema }),
  node_client_state: z.strictObject({
    node_id: nodeIdSchema,
    client_initialized: flag,
    client_presence_state: presenceStateSchema,
    runtime_state: runtimeStateSchema,
    last_reachable_at: epochMs.nullable(),
    last_signal_at: epochMs.nullable(),
    client_version: text(64).nullable(),
    platform: text(64).nullable(),
    hostname: text(253).nullable(),
    // Checked for shape, then dropped (sanitizeSnapshotDatabase): never trusted.
    mqtt_username: text(256).nullable(),
    mqtt_password_hash: text(256).nullable(),
    boot_id: text(128).nullable(),
    session_id: text(128).nullable(),
    machine_snapshot: text(64 * 1024).nullable(),
    machine_version: z.number().int().nullable(),
    // Cleared in exports and on restore (the flight recorder is not restored): checked for shape only.
    transition_head: z.number().int().nullable(),
    updated_at: epochMs,
  }),
  mesh_pairs: z
    .strictObject({
      pair_id: pairIdSchema,
      config_id: configIdSchema,
      node_a: nodeIdSchema,
      node_b: nodeIdSchema,
      enabled: flag,
      created_at: epochMs,
      updated_at: epochMs,
    })
    .superRefine((row, ctx) => {
      if (!(row.node_a < row.node_b)) ctx.addIssue({ code: "custom", path: ["node_a"], message: "must sort before node_b" });
    }),
  mesh_pair_removals: z
    .strictObject({ node_a: nodeIdSchema, node_b: nodeIdSchema, config_id: configIdSchema })
    .superRefine((row, ctx) => {
      if (!(row.node_a < row.node_b)) ctx.addIssue({ code: "custom", path: ["node_a"], message: "must sort before node_b" });
    }),
  port_forwards: z.strictObject({
    forward_id: forwardIdSchema,
    node_id: nodeIdSchema,
    protocol: z.enum(["tcp", "udp"]),
    listen_port: portSchema,
    target_address: forwardTargetSchema,
    target_port: portSchema,
    enabled: flag,
    created_at: epochMs,
    updated_at: epochMs,
  }),
  control_logs: z.strictObject({
    log_id: z.number().int().min(1),
    node_id: nodeIdSchema,
    config_id: configIdSchema,
    request_id: text(128).nullable(),
    kind: controlLogKindSchema,
    action: text(64).nullable(),
    status: commandStatusSchema.nullable(),
    message: text(64 * 1024).nullable(),
    stream: text(16).nullable(),
    output: text(1024 * 1024).nullable(),
    // migration 0004: a client event's spec §6.3 level and name, as the router takes them.
    level: text(16).nullable(),
    event: text(64).nullable(),
    created_at: epochMs,
    updated_at: epochMs,
    // migration 0003: a config push's target, with the command repository's own rules.
    pushed_config_version: pushTargetSchema.shape.pushed_config_version.nullable(),
    pushed_config_sha256: pushTargetSchema.shape.pushed_config_sha256.nullable(),
    pushed_tunnel_protocol: pushTargetSchema.shape.pushed_tunnel_protocol.nullable(),
  }),
} as const;

export type SnapshotTable = keyof typeof SNAPSHOT_ROW_SCHEMAS;

/**
 * Longest stretch of row checks between two yields to the event loop, ms. A node row costs about
 * 1 ms (deriving the public key from the private key), so a 10,000-node snapshot takes ~10 s of
 * checks, spread over turns so requests keep being served meanwhile.
 */
const MAX_TURN_MS = 10;

/** How a row is named in a refusal: its key columns. */
const ROW_KEYS: Record<SnapshotTable, string[]> = {
  configs: ["config_id"],
  nodes: ["node_id"],
  node_staged_texts: ["node_id"],
  node_tags: ["node_id", "tag"],
  node_client_state: ["node_id"],
  mesh_pairs: ["pair_id"],
  mesh_pair_removals: ["node_a", "node_b"],
  port_forwards: ["forward_id"],
  control_logs: ["log_id"],
};

/** The refusal of one row: VALIDATION_FAILED naming table, row and field. */
function rowRefusal(table: string, row: Record<string, unknown>, field: string, why: string): AppError {
  const keys = ROW_KEYS[table as SnapshotTable] ?? [];
  const id = keys.map((k) => `${k}=${JSON.stringify(clip(row[k]))}`).join(", ") || "?";
  return new AppError("VALIDATION_FAILED", `the snapshot is not acceptable: table ${table}, row ${id}, field ${field}: ${why}`, {
    table,
    row: Object.fromEntries(keys.map((k) => [k, clip(row[k])])),
    field,
  });
}

function clip(value: unknown): unknown {
  return typeof value === "string" ? value.slice(0, 80) : value;
}

function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  return issue ? `${issue.path.join(".") || "(value)"}: ${issue.message}` : "invalid";
}

/** What the rows checked so far hold, for the cross-row rules. */
interface SeenRows {
  /** config_id → network_cidr */
  networks: Map<string, string>;
  /** node_id → config_id */
  nodeConfig: Map<string, string>;
  /** `config_id/address` of every node */
  addresses: Set<string>;
}

/**
 * The cross-row rules of one row (see {@link validateSnapshotRows}); records what later rows need.
 * @throws AppError VALIDATION_FAILED naming table, row and field
 */
function checkCrossRow(table: SnapshotTable, raw: Record<string, unknown>, seen: SeenRows): void {
  const { networks, nodeConfig, addresses } = seen;
  // The schema made these text; a field that is not is refused all the same.
  const text = (field: string): string => {
    const value = raw[field];
    if (typeof value !== "string") throw rowRefusal(table, raw, field, "must be text");
    return value;
  };
  const needNode = (field: string) => {
    if (!nodeConfig.has(text(field))) throw rowRefusal(table, raw, field, "names no node of the snapshot");
  };
  switch (table) {
    case "configs":
      networks.set(text("config_id"), text("network_cidr"));
      break;
    case "nodes": {
      const network = networks.get(text("config_id"));
      if (network === undefined) throw rowRefusal(table, raw, "config_id", "names no config of the snapshot");
      if (!isHostAddress(text("address"), network)) throw rowRefusal(table, raw, "address", `must be a host address inside ${network}`);
      const at = `${text("config_id")}/${text("address")}`;
      if (addresses.has(at)) throw rowRefusal(table, raw, "address", "is used by another node of the config");
      addresses.add(at);
      nodeConfig.set(text("node_id"), text("config_id"));
      break;
    }
    case "mesh_pairs":
    case "mesh_pair_removals":
      for (const side of ["node_a", "node_b"]) {
        if (nodeConfig.get(text(side)) !== raw.config_id) throw rowRefusal(table, raw, side, "names no node of the pair's config");
      }
      break;
    case "control_logs":
      needNode("node_id");
      if (nodeConfig.get(text("node_id")) !== raw.config_id) throw rowRefusal(table, raw, "config_id", "is not the node's config");
      break;
    default:
      needNode("node_id");
  }
}

/**
 * Validates every row of every data table of a snapshot database (read-only; the file must have
 * this server's schema, see `prepareSnapshotDatabase`). Row rules are {@link SNAPSHOT_ROW_SCHEMAS};
 * cross-row rules: a node's config exists and its address is a unique host address of the
 * config's network; a pair's nodes belong to its config; tags, client state, port forwards and
 * control logs belong to a node of the snapshot. Yields to the event loop after at most
 * {@link MAX_TURN_MS} of work, so a large snapshot does not stall requests meanwhile.
 * @throws AppError VALIDATION_FAILED naming the first bad table, row and field
 */
export async function validateSnapshotRows(dbFile: string): Promise<void> {
  const db = openSnapshotReader(dbFile);
  try {
    const seen: SeenRows = { networks: new Map(), nodeConfig: new Map(), addresses: new Set() };
    let turnStarted = performance.now();
    for (const table of Object.keys(SNAPSHOT_ROW_SCHEMAS) as SnapshotTable[]) {
      const schema = SNAPSHOT_ROW_SCHEMAS[table] as z.ZodType<Record<string, unknown>>;
      for (const raw of db.rows(table)) {
        if (performance.now() - turnStarted >= MAX_TURN_MS) {
          await nextTurn();
          turnStarted = performance.now();
        }
        const parsed = schema.safeParse(raw);
        if (!parsed.success) {
          const issue = parsed.error.issues[0];
          const field = issue?.path[0] === undefined ? "(row)" : String(issue.path[0]);
          throw rowRefusal(table, raw, field, issue?.message ?? "invalid");
        }
        checkCrossRow(table, raw, seen);
      }
    }
  } finally {
    db.close();
  }
}

/**
 * Makes a validated snapshot database (a private copy) restorable, in one transaction:
 * - every node's client state is reset to "never bound": broker credentials (`mqtt_username`,
 *   `mqtt_password_hash`), `machine_snapshot`/`machine_version`, session ids, presence, runtime
 *   and reported times are cleared, `client_initialized` = 0; `confirmed_config_*` are cleared
 *   (the node confirms again after it re-binds);
 * - every node's staged config is restaged from the validated rows (`restageConfig`, `lazy`):
 *   every node's rendering is checked; the version stays when the snapshot's text was the
 *   renderer's (or it had none: staged lazily), and moves on by one otherwise. No static
 *   node's text is rendered into the copy (a changed one is left staged lazily, as a mesh write
 *   leaves it) and stored texts no node serves are deleted, so the copy holds O(nodes + the
 *   texts the snapshot held), not the O(n²) bytes of every text of a full mesh.
 * @param now epoch ms stamped on changed rows
 * @throws AppError VALIDATION_FAILED when a config cannot be rendered (naming it)
 */
export async function sanitizeSnapshotDatabase(dbFile: string, now: number, log: Logger): Promise<void> {
  const store = await Store.open(dbFile, log);
  try {
    // A stored sha is replaced by the digest of the stored text, so a text altered without its
    // sha compares unequal to the rendering and is rewritten (restageConfig writes on sha change).
    const staged = listStagedConfigTexts(store);
    const configs = listConfigIds(store);
    await store.transaction(async (trx) => {
      resetAllClientStates(store, now);
      clearConfirmedConfigs(store);
      setStagedConfigShas(
        store,
        staged.map((n) => [n.node_id, createHash("sha256").update(n.staged_config_text ?? "", "utf8").digest("hex")] as const),
      );
      for (const configId of configs) {
        try {
          await restageConfig(trx, configId, now, { lazy: true });
        } catch (err) {
          if (!isAppError(err, "VALIDATION_FAILED")) throw err;
          throw new AppError("VALIDATION_FAILED", `the snapshot is not acceptable: table configs, row config_id=${JSON.stringify(configId)}: its node configs cannot be rendered (${err.message})`, {
            table: "configs",
            row: { config_id: configId },
            ...(err.details ?? {}),
          });
        }
      }
      // What restore copies is now only the renderer's text, or no text (staged lazily: rendered
      // from the validated inputs when first asked for).
      deleteUnservedStagedTexts(store);
      const unrendered = listStagedConfigs(store);
      for (const n of unrendered) {
        if (n.s === null && n.v >= 1) continue;
        if (n.t === null || n.s !== createHash("sha256").update(n.t, "utf8").digest("hex")) {
          throw new AppError("VALIDATION_FAILED", `the snapshot is not acceptable: table nodes, row node_id=${JSON.stringify(n.node_id)}: its config could not be rendered`);
        }
      }
    });
  } finally {
    await store.close();
  }
}
