/** The inputs, change reports and dependencies of the mesh service (src/services/mesh.service.ts). */
import type { z } from "zod";
import type { Clock } from "../../lib/clock.js";
import type { Logger } from "../../logger.js";
import type { ApplyMode, NodeMode, TunnelProtocol } from "../../protocol/enums.js";
import type { meshPairListQuery } from "../../protocol/rest.schema.js";
import type { configDetailViewSchema, tagViewSchema } from "../../protocol/views.schema.js";
import type { Store } from "../../store/db.js";
import type { StagedChange } from "../../store/render-job.js";
import type { NodeRow } from "../../store/schema.js";

/** Default WireGuard listen port when a node has a public address but no port (DESIGN decision, docs/decisions.md). */
export const DEFAULT_LISTEN_PORT = 51820;
/** Default profile interface name. */
export const DEFAULT_INTERFACE_NAME = "svc0";

export interface CreateConfigInput {
  name: string;
  tunnel_protocol: TunnelProtocol;
  network_cidr: string;
  /** Default `restart` (spec §3.8). */
  apply_mode?: ApplyMode | undefined;
}

export interface UpdateConfigInput {
  name?: string | undefined;
  tunnel_protocol?: TunnelProtocol | undefined;
  network_cidr?: string | undefined;
  apply_mode?: ApplyMode | undefined;
}

export interface CreateNodeInput {
  name: string;
  mode: NodeMode;
  address?: string | undefined;
  public_address?: string | null | undefined;
  listen_port?: number | null | undefined;
  interface_name?: string | undefined;
  tags?: string[] | undefined;
  auto_pair?: boolean | undefined;
  /** A hub forwards between nodes that cannot reach each other (README "Hubs: meshes behind NAT"); needs a public address. */
  hub?: boolean | undefined;
}

export interface UpdateNodeInput {
  name?: string | undefined;
  /** A new tunnel address inside the config's network: the node and every peer that names it re-stage. */
  address?: string | undefined;
  mode?: NodeMode | undefined;
  public_address?: string | null | undefined;
  listen_port?: number | null | undefined;
  interface_name?: string | undefined;
  tags?: string[] | undefined;
  hub?: boolean | undefined;
}

export interface PortForwardInput {
  protocol: "tcp" | "udp";
  listen_port: number;
  target_address: string;
  target_port: number;
  enabled?: boolean | undefined;
}

/** The query of the mesh-pair list (parsed: `limit` defaulted). */
export type MeshPairListQuery = Pick<z.output<typeof meshPairListQuery>, "limit"> & { cursor?: string | undefined; node_id?: string | undefined };

/** A config with its nodes and tags (the config-detail answer). */
export type ConfigDetailView = z.output<typeof configDetailViewSchema>;

/** A tag and the nodes carrying it. */
export type TagView = z.output<typeof tagViewSchema>;

/** What one committed write changed; handed to {@link MeshHooks.afterCommit}. */
export interface MeshChange {
  configId: string;
  configDeleted?: boolean;
  created: NodeRow[];
  deleted: string[];
  modeChanged: Array<{ nodeId: string; mode: NodeMode }>;
  /** Nodes whose staged config changed, with the new pair. */
  staged: StagedChange[];
  /** Nodes whose own fields changed. */
  touched: string[];
  /** The two sides of the mesh pair this write created, enabled, disabled or deleted (spec §6.5 "mesh pair changes"). */
  paired?: string[];
  /** The peers of the nodes this write deleted: their pairs with them went too (spec §6.5 "affected peer endpoints"). */
  unpaired?: string[];
  /**
   * True when this is no write but the after-commit rendering of an earlier one reporting nodes
   * it rendered (`staged` only): the notifier may coalesce such reports
   * (docs/history/decisions-2026.md "switch rendering and notifier coalescing").
   */
  rendered?: true;
}

/** Called after a mesh write commits: node actors, SSE (spec §6.5 rule 6: after the write). */
export interface MeshHooks {
  /** May return a promise: the write's caller waits for it (actors settled before the answer). */
  afterCommit(change: MeshChange): void | Promise<unknown>;
  /**
   * Told of the change inside the write's transaction (the alert rules close a deleted node's
   * open alerts with it); what it answers runs after the commit, before `afterCommit`.
   */
  inCommit?(change: MeshChange): (() => void) | undefined;
}

export interface MeshServiceDeps {
  store: Store;
  clock: Clock;
  /** spec §1.7 feature switch. */
  mqttEnabled: boolean;
  hooks?: MeshHooks;
  /**
   * Peer lines (changed nodes × nodes of the config) up to which a write renders the static
   * nodes it changed at once; above it they are rendered on demand (lazy staging).
   * Default {@link DEFAULT_EAGER_PEER_BUDGET}; 0 = always lazy.
   */
  eagerPeerBudget?: number;
  /** Where failures of after-commit rendering are logged. */
  log?: Logger;
}

/** ≈ 2,000 peer blocks (≈ 300 kB of text): a few ms of validating, rendering and hashing. */
export const DEFAULT_EAGER_PEER_BUDGET = 2_000;
