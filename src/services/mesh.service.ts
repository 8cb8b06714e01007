import type { z } from "zod";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import { allocateAddress, isHostAddress, parseConfigNetwork } from "../domain/address-pool.js";
import { generateAwgParams } from "../domain/awg.js";
import { generateKeyPair } from "../domain/keys.js";
import { AppError } from "../errors.js";
import { newId } from "../protocol/ids.js";
import type { NodeMode, TunnelProtocol } from "../protocol/enums.js";
import type { configDetailViewSchema, tagViewSchema } from "../protocol/views.schema.js";
import * as configsRepo from "../store/configs.repository.js";
import type { AfterCommit, Db, Store } from "../store/db.js";
import * as pairsRepo from "../store/mesh-pairs.repository.js";
import * as nodeListRepo from "../store/node-list.repository.js";
import * as nodesRepo from "../store/nodes.repository.js";
import * as forwardsRepo from "../store/port-forwards.repository.js";
import type { ConfigRow, MeshPairRow, NodeRow } from "../store/schema.js";
import { changedByNodeCreated, changedByNodeUpdated, changedByPair, materializeStaged, renderDeferred, renderedPeerIds, stageChanged, type StagedChange } from "../store/staging.js";
import { clearClientCredentials } from "./control.service.js";
import { requireConfig, requireNode } from "./node-lookup.js";
import * as lists from "./lists.js";
import { decodeCursor, encodeCursor } from "./list-cursor.js";
import { meshPairCursorSchema, PAIR_PAGE_LIMIT_MAX, type meshPairListQuery } from "../protocol/rest.schema.js";
import * as tokensRepo from "../store/tokens.repository.js";
import {
  configView,
  meshPairView,
  nodeView,
  portForwardView,
  type ConfigView,
  type MeshPairView,
  type NodeView,
  type PortForwardView,
} from "./views.js";

/** Default WireGuard listen port when a node has a public address but no port (DESIGN decision, docs/decisions.md). */
export const DEFAULT_LISTEN_PORT = 51820;
/** Default profile interface name. */
export const DEFAULT_INTERFACE_NAME = "svc0";

export interface CreateConfigInput {
  name: string;
  tunnel_protocol: TunnelProtocol;
  network_cidr: string;
}

export interface UpdateConfigInput {
  name?: string | undefined;
  tunnel_protocol?: TunnelProtocol | undefined;
  network_cidr?: string | undefined;
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
}

export interface UpdateNodeInput {
  name?: string | undefined;
  mode?: NodeMode | undefined;
  public_address?: string | null | undefined;
  listen_port?: number | null | undefined;
  interface_name?: string | undefined;
  tags?: string[] | undefined;
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
   * it rendered (`staged` only): the notifier may coalesce such reports (docs/decisions.md
   * "Issue 14: switch rendering and notifier coalescing").
   */
  rendered?: true;
}

/** Called after a mesh write commits: node actors, SSE (spec §6.5 rule 6: after the write). */
export interface MeshHooks {
  /** May return a promise: the write's caller waits for it (actors settled before the answer). */
  afterCommit(change: MeshChange): void | Promise<unknown>;
}

export interface MeshServiceDeps {
  store: Store;
  clock: Clock;
  /** spec §1.7 feature switch. */
  mqttEnabled: boolean;
  hooks?: MeshHooks;
  /**
   * Peer lines (changed nodes × nodes of the config) up to which a write renders the static
   * nodes it changed at once; above it they are rendered on demand (issue 14, lazy staging).
   * Default {@link DEFAULT_EAGER_PEER_BUDGET}; 0 = always lazy.
   */
  eagerPeerBudget?: number;
  /** Where failures of after-commit rendering are logged. */
  log?: Logger;
}

/** ≈ 2,000 peer blocks (≈ 300 kB of text): a few ms of validating, rendering and hashing. */
export const DEFAULT_EAGER_PEER_BUDGET = 2_000;

/**
 * Configs, nodes, mesh pairs, port forwards and tags: every write runs in one transaction,
 * validates against stored state, and re-stages the affected node configs (DESIGN §3 Config
 * versions) before it commits. Throws {@link AppError} with `NOT_FOUND`, `CONFLICT`,
 * `VALIDATION_FAILED`, `ADDRESS_POOL_EXHAUSTED` or `MQTT_DISABLED`.
 */
export class MeshService {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #mqttEnabled: boolean;
  readonly #hooks: MeshHooks | undefined;
  readonly #eagerPeerBudget: number;
  readonly #log: Logger | undefined;
  #background: Promise<void> = Promise.resolve();

  constructor(deps: MeshServiceDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#mqttEnabled = deps.mqttEnabled;
    this.#hooks = deps.hooks;
    this.#eagerPeerBudget = deps.eagerPeerBudget ?? DEFAULT_EAGER_PEER_BUDGET;
    this.#log = deps.log;
  }

  // ---- configs -------------------------------------------------------------------------

  /** One page of configs (issue 14 item 5; src/services/lists.ts). @throws AppError INVALID_CURSOR */
  listConfigPage(query: Parameters<typeof lists.listConfigPage>[1]): ReturnType<typeof lists.listConfigPage> {
    return lists.listConfigPage(this.#store, query);
  }

  /** One page of a config's nodes (issue 14 item 5). @throws AppError NOT_FOUND, INVALID_CURSOR */
  listNodePage(configId: string, query: Parameters<typeof lists.listNodePage>[3]): ReturnType<typeof lists.listNodePage> {
    return lists.listNodePage(this.#store, this.#mqttEnabled, configId, query);
  }

  /** A config's nodes counted by state (issue 14 item 5). @throws AppError NOT_FOUND */
  countNodes(configId: string, query: Parameters<typeof lists.countNodes>[3]): ReturnType<typeof lists.countNodes> {
    return lists.countNodes(this.#store, this.#mqttEnabled, configId, query);
  }

  async listConfigs(): Promise<ConfigView[]> {
    return (await configsRepo.listConfigs(this.#store.db)).map(configView);
  }

  async getConfig(configId: string): Promise<ConfigDetailView> {
    const db = this.#store.db;
    const config = await requireConfig(db, configId);
    const nodes = await this.#nodeViews(configId);
    return { ...configView(config), nodes, tags: tagViews(nodes) };
  }

  async createConfig(input: CreateConfigInput): Promise<ConfigView> {
    const { cidr } = parseConfigNetwork(input.network_cidr);
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      if (await configsRepo.findConfigByName(trx, input.name)) {
        throw new AppError("CONFLICT", `a config named "${input.name}" already exists`, { field: "name" });
      }
      const row: ConfigRow = {
        config_id: newId("cfg"),
        name: input.name,
        tunnel_protocol: input.tunnel_protocol,
        network_cidr: cidr,
        // Generated once per config, so every peer of the mesh agrees (DESIGN §3 awg_2); kept
        // even while the config runs plain WireGuard, so switching back and forth is stable.
        awg_params: JSON.stringify(generateAwgParams()),
        created_at: now,
        updated_at: now,
      };
      await configsRepo.insertConfig(trx, row);
      afterCommit(() => this.#hooks?.afterCommit({ configId: row.config_id, created: [], deleted: [], modeChanged: [], staged: [], touched: [] }));
      return configView(row);
    });
  }

  async updateConfig(configId: string, input: UpdateConfigInput): Promise<ConfigView> {
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      const config = await requireConfig(trx, configId);
      const patch: Partial<ConfigRow> = { updated_at: now };
      if (input.name !== undefined && input.name !== config.name) {
        const other = await configsRepo.findConfigByName(trx, input.name);
        if (other && other.config_id !== configId) {
          throw new AppError("CONFLICT", `a config named "${input.name}" already exists`, { field: "name" });
        }
        patch.name = input.name;
      }
      if (input.tunnel_protocol !== undefined) patch.tunnel_protocol = input.tunnel_protocol;
      if (input.network_cidr !== undefined) {
        const { cidr } = parseConfigNetwork(input.network_cidr);
        if (cidr !== config.network_cidr) {
          if ((await nodesRepo.countNodes(trx, configId)) > 0) {
            throw new AppError("CONFLICT", "network_cidr cannot change while the config has nodes", {
              field: "network_cidr",
            });
          }
          patch.network_cidr = cidr;
        }
      }
      await configsRepo.updateConfig(trx, configId, patch);
      // Only the protocol reaches the text (awg lines); a switch changes every node's.
      const switched = patch.tunnel_protocol !== undefined && patch.tunnel_protocol !== config.tunnel_protocol;
      const changed = switched ? await nodesRepo.listNodeIds(trx, configId) : [];
      await this.#changed(trx, afterCommit, configId, now, changed);
      return configView({ ...config, ...patch });
    });
  }

  async deleteConfig(configId: string): Promise<void> {
    await this.#store.transaction(async (trx, afterCommit) => {
      await requireConfig(trx, configId);
      const nodes = await nodesRepo.listNodes(trx, configId);
      for (const node of nodes) {
        await tokensRepo.deleteDownloadTokensOf(trx, "node_config", `${configId}/${node.node_id}`);
      }
      await configsRepo.deleteConfig(trx, configId);
      const deleted = nodes.map((n) => n.node_id);
      afterCommit(() =>
        this.#hooks?.afterCommit({ configId, configDeleted: true, created: [], deleted, modeChanged: [], staged: [], touched: [] }),
      );
    });
  }

  // ---- nodes ---------------------------------------------------------------------------

  async listNodes(configId: string): Promise<NodeView[]> {
    await requireConfig(this.#store.db, configId);
    return this.#nodeViews(configId);
  }

  async getNode(configId: string, nodeId: string): Promise<NodeView> {
    return this.#nodeView(this.#store.db, await requireNode(this.#store.db, configId, nodeId));
  }

  async createNode(configId: string, input: CreateNodeInput): Promise<NodeView> {
    if (input.mode === "dynamic" && !this.#mqttEnabled) {
      throw new AppError("MQTT_DISABLED", "creating a dynamic node needs MQTT services (spec §1.7)");
    }
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      const config = await requireConfig(trx, configId);
      if (await nodesRepo.findNodeByName(trx, configId, input.name)) {
        throw new AppError("CONFLICT", `a node named "${input.name}" already exists in this config`, { field: "name" });
      }
      const used = await nodesRepo.listNodeAddresses(trx, configId);
      let address: string;
      if (input.address !== undefined) {
        if (!isHostAddress(input.address, config.network_cidr)) {
          throw new AppError("VALIDATION_FAILED", `address must be a host address inside ${config.network_cidr}`, {
            field: "address",
          });
        }
        if (used.includes(input.address)) {
          throw new AppError("CONFLICT", `address ${input.address} is already used in this config`, { field: "address" });
        }
        address = input.address;
      } else {
        address = allocateAddress(config.network_cidr, used);
      }
      const publicAddress = input.public_address ?? null;
      const keys = generateKeyPair();
      const row: NodeRow = {
        node_id: newNodeId(now),
        config_id: configId,
        name: input.name,
        mode: input.mode,
        interface_name: input.interface_name ?? DEFAULT_INTERFACE_NAME,
        address,
        public_address: publicAddress,
        listen_port: input.listen_port ?? (publicAddress !== null ? DEFAULT_LISTEN_PORT : null),
        private_key: keys.privateKey,
        public_key: keys.publicKey,
        staged_config_version: 0,
        staged_config_sha256: null,
        confirmed_config_version: null,
        confirmed_config_sha256: null,
        created_at: now,
        updated_at: now,
      };
      await nodesRepo.insertNode(trx, row, now);
      await nodesRepo.replaceNodeTags(trx, row.node_id, dedupe(input.tags ?? []));
      if (input.auto_pair !== false) await pairsRepo.insertPairsWithAll(trx, configId, row.node_id, autoPairIdPrefix(now), now);
      await this.#changed(trx, afterCommit, configId, now, await changedByNodeCreated(trx, row), { created: [row] });
      return this.#nodeView(trx, await requireNode(trx, configId, row.node_id));
    });
  }

  async updateNode(configId: string, nodeId: string, input: UpdateNodeInput): Promise<NodeView> {
    if (input.mode === "dynamic" && !this.#mqttEnabled) {
      throw new AppError("MQTT_DISABLED", "making a node dynamic needs MQTT services (spec §1.7)");
    }
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      const node = await requireNode(trx, configId, nodeId);
      const patch: Partial<NodeRow> = { updated_at: now };
      if (input.name !== undefined && input.name !== node.name) {
        const other = await nodesRepo.findNodeByName(trx, configId, input.name);
        if (other && other.node_id !== nodeId) {
          throw new AppError("CONFLICT", `a node named "${input.name}" already exists in this config`, {
            field: "name",
          });
        }
        patch.name = input.name;
      }
      if (input.mode !== undefined) patch.mode = input.mode;
      if (input.interface_name !== undefined) patch.interface_name = input.interface_name;
      if (input.public_address !== undefined) patch.public_address = input.public_address;
      if (input.listen_port !== undefined) patch.listen_port = input.listen_port;
      const publicAddress = patch.public_address !== undefined ? patch.public_address : node.public_address;
      const listenPort = patch.listen_port !== undefined ? patch.listen_port : node.listen_port;
      if (publicAddress !== null && listenPort === null) patch.listen_port = DEFAULT_LISTEN_PORT;
      await nodesRepo.updateNode(trx, nodeId, patch);
      const changed = await changedByNodeUpdated(trx, node, { ...node, ...patch });
      if (input.tags !== undefined) await nodesRepo.replaceNodeTags(trx, nodeId, dedupe(input.tags));
      const modeChanged = patch.mode !== undefined && patch.mode !== node.mode;
      // spec §3.1 dynamic → static: binding permissions and client state cleared in the same write.
      if (modeChanged && patch.mode === "static") await clearClientCredentials(trx, nodeId, now);
      await this.#changed(trx, afterCommit, configId, now, changed, {
        touched: [nodeId],
        ...(modeChanged ? { modeChanged: [{ nodeId, mode: patch.mode as NodeMode }] } : {}),
      });
      return this.#nodeView(trx, await requireNode(trx, configId, nodeId));
    });
  }

  async deleteNode(configId: string, nodeId: string): Promise<void> {
    const now = this.#clock.now();
    await this.#store.transaction(async (trx, afterCommit) => {
      const node = await requireNode(trx, configId, nodeId);
      const changed = await renderedPeerIds(trx, node);
      const unpaired = (await pairsRepo.listPairsOfNode(trx, nodeId)).map((p) => p.peer.node_id);
      await tokensRepo.deleteDownloadTokensOf(trx, "node_config", `${configId}/${nodeId}`);
      await nodesRepo.deleteNode(trx, nodeId);
      await this.#changed(trx, afterCommit, configId, now, changed, { deleted: [nodeId], unpaired });
    });
  }

  /** The staged config of a node (admin only: it holds the private key). */
  async getStagedConfig(
    configId: string,
    nodeId: string,
  ): Promise<{ node: NodeRow; config_version: number; config_sha256: string; config_text: string }> {
    const node = await requireNode(this.#store.db, configId, nodeId);
    // Rendered on first demand after a write changed it (lazy staging, src/store/staging.ts).
    const staged = await materializeStaged(this.#store.db, node);
    if (staged === null) {
      // Every write stages, so this only happens on a database edited by hand.
      throw new AppError("NOT_FOUND", "the node has no staged config");
    }
    return { node, ...staged };
  }

  // ---- mesh pairs ----------------------------------------------------------------------

  /**
   * One page of a config's mesh pairs with their connection integrity (spec §6.5), in creation
   * order (`created_at`, `pair_id`); with `node_id` only that node's pairs. Reads the page's rows
   * and their sides only: O(page), never the config's n²/2 pairs (issue 14).
   * @throws AppError NOT_FOUND (config, or the `node_id` in it), INVALID_CURSOR (not this list's cursor)
   */
  async listPairs(configId: string, query: MeshPairListQuery = { limit: PAIR_PAGE_LIMIT_MAX }): Promise<{ mesh_pairs: MeshPairView[]; next_cursor: string | null }> {
    const db = this.#store.db;
    await requireConfig(db, configId);
    if (query.node_id !== undefined) await requireNode(db, configId, query.node_id);
    const cursor = decodeCursor(meshPairCursorSchema, query.cursor, (p) => p.c === configId && p.n === query.node_id);
    const rows = await pairsRepo.pairPage(db, configId, {
      nodeId: query.node_id,
      after: cursor && { created_at: cursor.at, pair_id: cursor.id },
      limit: query.limit,
    });
    const page = rows.slice(0, query.limit);
    const sides = await pairsRepo.pairSides(db, page.flatMap((p) => [p.node_a, p.node_b]));
    const last = page[page.length - 1];
    const more = rows.length > query.limit && last !== undefined;
    return {
      mesh_pairs: page.map((p) => meshPairView(p, sides)),
      next_cursor: more ? encodeCursor({ l: "mesh_pairs", c: configId, ...(query.node_id === undefined ? {} : { n: query.node_id }), at: last.created_at, id: last.pair_id }) : null,
    };
  }

  async createPair(configId: string, input: { node_a: string; node_b: string; enabled?: boolean | undefined }): Promise<MeshPairView> {
    if (input.node_a === input.node_b) {
      throw new AppError("VALIDATION_FAILED", "a mesh pair needs two different nodes", { field: "node_b" });
    }
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      await requireConfig(trx, configId);
      const nodeA = await requireNode(trx, configId, input.node_a);
      const nodeB = await requireNode(trx, configId, input.node_b);
      if (await pairsRepo.findPairByNodes(trx, input.node_a, input.node_b)) {
        throw new AppError("CONFLICT", "these nodes are already paired");
      }
      const [a, b] = pairsRepo.orderPair(input.node_a, input.node_b);
      const row = {
        pair_id: newId("pair"),
        config_id: configId,
        node_a: a,
        node_b: b,
        enabled: input.enabled === false ? 0 : 1,
        created_at: now,
        updated_at: now,
      };
      await pairsRepo.insertPair(trx, row);
      await this.#changed(trx, afterCommit, configId, now, changedByPair(nodeA, nodeB, null, row.enabled === 1), { paired: [a, b] });
      return meshPairView(row, await pairsRepo.pairSides(trx, [a, b]));
    });
  }

  async updatePair(configId: string, pairId: string, input: { enabled: boolean }): Promise<MeshPairView> {
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      const pair = await requirePair(trx, configId, pairId);
      await pairsRepo.setPairEnabled(trx, pairId, input.enabled, now);
      await this.#changed(trx, afterCommit, configId, now, await this.#pairChange(trx, configId, pair, input.enabled), { paired: [pair.node_a, pair.node_b] });
      return meshPairView(
        { ...pair, enabled: input.enabled ? 1 : 0, updated_at: now },
        await pairsRepo.pairSides(trx, [pair.node_a, pair.node_b]),
      );
    });
  }

  async deletePair(configId: string, pairId: string): Promise<void> {
    const now = this.#clock.now();
    await this.#store.transaction(async (trx, afterCommit) => {
      const pair = await requirePair(trx, configId, pairId);
      await pairsRepo.deletePair(trx, pairId);
      await this.#changed(trx, afterCommit, configId, now, await this.#pairChange(trx, configId, pair, null), { paired: [pair.node_a, pair.node_b] });
    });
  }

  // ---- port forwards -------------------------------------------------------------------

  async listPortForwards(configId: string, nodeId: string): Promise<PortForwardView[]> {
    const db = this.#store.db;
    await requireNode(db, configId, nodeId);
    return (await forwardsRepo.listPortForwards(db, nodeId)).map(portForwardView);
  }

  async createPortForward(configId: string, nodeId: string, input: PortForwardInput): Promise<PortForwardView> {
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      await requireNode(trx, configId, nodeId);
      if (await forwardsRepo.findPortForwardByPort(trx, nodeId, input.protocol, input.listen_port)) {
        throw new AppError("CONFLICT", `${input.protocol} port ${input.listen_port} is already forwarded on this node`, {
          field: "listen_port",
        });
      }
      const row = {
        forward_id: newId("pf"),
        node_id: nodeId,
        protocol: input.protocol,
        listen_port: input.listen_port,
        target_address: input.target_address,
        target_port: input.target_port,
        enabled: input.enabled === false ? 0 : 1,
        created_at: now,
        updated_at: now,
      };
      await forwardsRepo.insertPortForward(trx, row);
      await this.#changed(trx, afterCommit, configId, now, row.enabled === 1 ? [nodeId] : []);
      return portForwardView(row);
    });
  }

  async updatePortForward(
    configId: string,
    nodeId: string,
    forwardId: string,
    input: Partial<PortForwardInput>,
  ): Promise<PortForwardView> {
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      await requireNode(trx, configId, nodeId);
      const current = await forwardsRepo.findPortForward(trx, nodeId, forwardId);
      if (!current) throw new AppError("NOT_FOUND", `port forward ${forwardId} not found`);
      const next = {
        ...current,
        ...(input.protocol !== undefined ? { protocol: input.protocol } : {}),
        ...(input.listen_port !== undefined ? { listen_port: input.listen_port } : {}),
        ...(input.target_address !== undefined ? { target_address: input.target_address } : {}),
        ...(input.target_port !== undefined ? { target_port: input.target_port } : {}),
        ...(input.enabled !== undefined ? { enabled: input.enabled ? 1 : 0 } : {}),
        updated_at: now,
      };
      const clash = await forwardsRepo.findPortForwardByPort(trx, nodeId, next.protocol, next.listen_port);
      if (clash && clash.forward_id !== forwardId) {
        throw new AppError("CONFLICT", `${next.protocol} port ${next.listen_port} is already forwarded on this node`, {
          field: "listen_port",
        });
      }
      await forwardsRepo.updatePortForward(trx, forwardId, next);
      await this.#changed(trx, afterCommit, configId, now, forwardKey(current) === forwardKey(next) ? [] : [nodeId]);
      return portForwardView(next);
    });
  }

  async deletePortForward(configId: string, nodeId: string, forwardId: string): Promise<void> {
    const now = this.#clock.now();
    await this.#store.transaction(async (trx, afterCommit) => {
      await requireNode(trx, configId, nodeId);
      const current = await forwardsRepo.findPortForward(trx, nodeId, forwardId);
      if (!current) throw new AppError("NOT_FOUND", `port forward ${forwardId} not found`);
      await forwardsRepo.deletePortForward(trx, forwardId);
      await this.#changed(trx, afterCommit, configId, now, current.enabled === 1 ? [nodeId] : []);
    });
  }

  // ---- tags ----------------------------------------------------------------------------

  async listTags(configId: string): Promise<TagView[]> {
    await requireConfig(this.#store.db, configId);
    return tagViews(await this.#nodeViews(configId));
  }

  // ---- helpers -------------------------------------------------------------------------

  /**
   * Bookkeeping of every write that changes a config's mesh: the config's `updated_at`, the
   * staging of the nodes whose text the write changes (`changed`, worked out by the write:
   * src/store/staging.ts), and the change report handed to the hooks after commit.
   */
  async #changed(
    trx: Db,
    afterCommit: AfterCommit,
    configId: string,
    now: number,
    changed: readonly string[],
    extra: Partial<Pick<MeshChange, "created" | "deleted" | "modeChanged" | "touched" | "paired" | "unpaired">> = {},
  ): Promise<void> {
    await configsRepo.updateConfig(trx, configId, { updated_at: now });
    // A node made dynamic is rendered now even when its text did not change: its actor pushes it.
    const madeDynamic = (extra.modeChanged ?? []).filter((m) => m.mode === "dynamic").map((m) => m.nodeId);
    const configSize = changed.length === 0 ? 0 : await nodesRepo.countNodes(trx, configId);
    const { staged, deferred } = await stageChanged(trx, changed, now, { render: madeDynamic, eagerPeerBudget: this.#eagerPeerBudget, configSize });
    const change: MeshChange = {
      configId,
      created: extra.created ?? [],
      deleted: extra.deleted ?? [],
      modeChanged: extra.modeChanged ?? [],
      staged,
      touched: extra.touched ?? [],
      ...(extra.paired === undefined ? {} : { paired: extra.paired }),
      ...(extra.unpaired === undefined ? {} : { unpaired: extra.unpaired }),
    };
    afterCommit(() => {
      const settled = this.#hooks?.afterCommit(change);
      if (deferred.length > 0) this.#renderAfterCommit(configId, deferred);
      return settled;
    });
  }

  /**
   * Renders a large write's dynamic nodes after its commit, on the store worker (in this thread
   * for an in-memory store), and hands them to the hooks in batches (node actors:
   * `config.staged`, then the debounced push).
   * Runs one after another across writes; {@link settled} resolves when all are done.
   */
  #renderAfterCommit(configId: string, nodeIds: string[]): void {
    this.#inBackground(() => this.#renderAndReport(configId, nodeIds));
  }

  #renderAndReport(configId: string, nodeIds: readonly string[]): Promise<void> {
    const source = this.#store.worker() ?? undefined;
    return renderDeferred(
      this.#store.db,
      configId,
      nodeIds,
      (staged) => this.#hooks?.afterCommit({ configId, created: [], deleted: [], modeChanged: [], touched: [], rendered: true, staged }),
      source === undefined ? {} : { source },
    );
  }

  /** Chains background work after the previous one; a failure is logged, never thrown. */
  #inBackground(work: () => Promise<void>): void {
    this.#background = this.#background
      .then(work)
      .catch((err: unknown) => this.#log?.error({ err }, "rendering staged configs in the background failed"));
  }

  /**
   * Renders the dynamic nodes a previous run left staged but unrendered (it stopped between a
   * large write's commit and its after-commit rendering), so their actors learn the staged sha
   * and push it. Call once the hooks' node actors run (start-up); {@link settled} covers it.
   */
  resumeRendering(): void {
    this.#inBackground(async () => {
      const byConfig = new Map<string, string[]>();
      for (const r of await nodesRepo.listUnrenderedDynamicNodes(this.#store.db)) {
        byConfig.set(r.config_id, [...(byConfig.get(r.config_id) ?? []), r.node_id]);
      }
      for (const [configId, ids] of byConfig) await this.#renderAndReport(configId, ids);
    });
  }

  /** Resolves once every write's after-commit rendering has finished (tests, benchmarks, shutdown). */
  settled(): Promise<void> {
    return this.#background;
  }

  /** Nodes whose text changes when `pair` goes to `enabled` (null: deleted). */
  async #pairChange(trx: Db, configId: string, pair: MeshPairRow, enabled: boolean | null): Promise<string[]> {
    const [a, b] = await Promise.all([requireNode(trx, configId, pair.node_a), requireNode(trx, configId, pair.node_b)]);
    return changedByPair(a, b, pair.enabled === 1, enabled);
  }

  /**
   * Every node's view of a config, in list order (the workspace read, issue 14 item 4: two raw
   * statements). They run while this holds Kysely's one connection, as the Kysely reads they
   * replace did: never in the middle of another caller's open transaction, whose uncommitted
   * rows the handle would show.
   */
  async #nodeViews(configId: string): Promise<NodeView[]> {
    return this.#store.db.connection().execute(async () => {
      const sqlite = this.#store.sqlite;
      const tags = nodeListRepo.configTagsByNode(sqlite, configId);
      return nodeListRepo.mapConfigNodes(sqlite, configId, (node, client) => nodeView(node, tags.get(node.node_id) ?? [], client, this.#mqttEnabled));
    });
  }

  /** One node's view: reads that node's tags and client state only (O(1) in the config's size). */
  async #nodeView(db: Db, node: NodeRow): Promise<NodeView> {
    const [tags, client] = await Promise.all([nodesRepo.listTagsOfNode(db, node.node_id), nodesRepo.findClientState(db, node.node_id)]);
    return nodeView(node, tags, client, this.#mqttEnabled);
  }
}

async function requirePair(db: Db, configId: string, pairId: string) {
  const pair = await pairsRepo.findPair(db, configId, pairId);
  if (!pair) {
    await requireConfig(db, configId);
    throw new AppError("NOT_FOUND", `mesh pair ${pairId} not found in config ${configId}`);
  }
  return pair;
}


const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";
/** The same 32 characters in ASCII order: digit i sorts before digit i + 1. */
const SORTED_BASE32 = "234567abcdefghijklmnopqrstuvwxyz";

/**
 * A new node's id: `node-` + 8 base32 characters of a countdown of the time (2^40 − 1 − ms mod
 * 2^40, big-endian, digits in ASCII order so that the strings sort as the numbers) + 8 random
 * ones (40 bits), the syntax of `newId`. A node created later
 * sorts before the nodes before it, so it is `node_a` of each pair it gets when it joins a mesh
 * and its n − 1 entries of `mesh_pairs`' `UNIQUE (node_a, node_b)` lie together, on a few
 * pages, instead of one in each other node's range (issue 14: the 5,000-node build, ~n/2 dirty
 * pages per write; docs/decisions.md "Issue 14: the 5,000-node build (2026-11-26)"). The
 * countdown wraps every 34.8 years. Node ids are names, not secrets (DESIGN §3 Ids).
 */
function newNodeId(now: number): string {
  const countdown = 2 ** 40 - 1 - (now % 2 ** 40);
  let out = "node-";
  for (let shift = 35; shift >= 0; shift -= 5) out += SORTED_BASE32[Math.floor(countdown / 2 ** shift) % 32];
  for (const b of globalThis.crypto.getRandomValues(new Uint8Array(8))) out += BASE32[b & 31];
  return out;
}

/**
 * The id prefix of the n − 1 pairs a node joining a mesh gets (`insertPairsWithAll` appends 5
 * base32 digits of each row's number): `pair-` + 8 base32 characters of the time (ms, 40 bits,
 * big-endian) + 8 random ones (40 bits, one draw per write), so the ids are unique within the
 * write by construction and across writes unless two writes of the same millisecond draw the
 * same 40 bits. The ids of one write share their prefix, so they land on a few adjacent pages of
 * the primary-key index instead of one random page each (issue 14). Pair ids are names, not
 * secrets; pairs made one by one (`POST …/mesh-pairs`) keep `newId`.
 */
function autoPairIdPrefix(now: number): string {
  let out = "pair-";
  for (let shift = 35; shift >= 0; shift -= 5) out += BASE32[Math.floor(now / 2 ** shift) % 32];
  for (const b of globalThis.crypto.getRandomValues(new Uint8Array(8))) out += BASE32[b & 31];
  return out;
}

/** What of a port forward reaches its node's text: nothing while disabled (spec §6.3 config_text). */
function forwardKey(f: { enabled: number; protocol: string; listen_port: number; target_address: string; target_port: number }): string {
  return f.enabled === 1 ? `${f.protocol}|${f.listen_port}|${f.target_address}|${f.target_port}` : "";
}

function dedupe(tags: readonly string[]): string[] {
  return [...new Set(tags)].sort();
}

function tagViews(nodes: readonly NodeView[]): TagView[] {
  const out = new Map<string, string[]>();
  for (const n of nodes) {
    for (const t of n.tags) {
      const ids = out.get(t);
      if (ids === undefined) out.set(t, [n.node_id]);
      else ids.push(n.node_id);
    }
  }
  return [...out.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([tag, node_ids]) => ({ tag, node_ids }));
}
