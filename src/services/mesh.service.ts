import { setImmediate as nextTurn } from "node:timers/promises";
import type { Clock } from "../lib/clock.js";
import type { Logger } from "../logger.js";
import { parseConfigNetwork } from "../domain/address-pool.js";
import { AppError } from "../errors.js";
import { newId } from "../protocol/ids.js";
import type { NodeMode, TunnelProtocol } from "../protocol/enums.js";
import * as configsRepo from "../store/configs.repository.js";
import type { AfterCommit, Db, Store } from "../store/db.js";
import * as pairsRepo from "../store/mesh-pairs.repository.js";
import * as nodesRepo from "../store/nodes.repository.js";
import * as forwardsRepo from "../store/port-forwards.repository.js";
import type { ConfigRow, NodeRow } from "../store/schema.js";
import { materializeStaged, stageChanged, StagedRendering } from "./rendering.service.js";
import { clearClientCredentials } from "./control.service.js";
import { requireConfig, requireNode } from "./node-lookup.js";
import * as lists from "./lists.js";
import { nextMeshSeq } from "../store/mesh-policy.js";
import { dedupe, forwardKey, requirePair } from "./mesh/mesh-helpers.js";
import {
  DEFAULT_EAGER_PEER_BUDGET,
  DEFAULT_LISTEN_PORT,
  type ConfigDetailView,
  type CreateConfigInput,
  type CreateNodeInput,
  type MeshChange,
  type MeshHooks,
  type MeshPairListQuery,
  type MeshServiceDeps,
  type PortForwardInput,
  type TagView,
  type UpdateConfigInput,
  type UpdateNodeInput,
} from "./mesh/mesh-types.js";
import { checkedAddress, newConfigRow, newNodeRow, newPortForwardRow, patchedPortForward, requireHubEndpoint } from "./mesh/mesh-rows.js";
import { configNodeViews, nodeViewOf, pairPage, tagViews } from "./mesh/mesh-views.js";
import { changedByHubs, changedByNodeCreated, changedByNodeDeleted, changedByNodeUpdated, changedByPair, pairWrite } from "./mesh/staged-changes.js";
import { HubGraph } from "../domain/render.js";
import { readHubGraph } from "../store/render-job.js";
import { PAIR_PAGE_LIMIT_MAX } from "../protocol/rest.schema.js";
import * as tokensRepo from "../store/tokens.repository.js";
import { configView, meshPairView, portForwardView, type ConfigView, type MeshPairView, type NodeView, type PortForwardView } from "./views.js";

export {
  DEFAULT_EAGER_PEER_BUDGET,
  DEFAULT_INTERFACE_NAME,
  DEFAULT_LISTEN_PORT,
  type ConfigDetailView,
  type CreateConfigInput,
  type CreateNodeInput,
  type MeshChange,
  type MeshHooks,
  type MeshPairListQuery,
  type MeshServiceDeps,
  type PortForwardInput,
  type TagView,
  type UpdateConfigInput,
  type UpdateNodeInput,
} from "./mesh/mesh-types.js";

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
  #staged: StagedRendering | undefined;

  constructor(deps: MeshServiceDeps) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#mqttEnabled = deps.mqttEnabled;
    this.#hooks = deps.hooks;
    this.#eagerPeerBudget = deps.eagerPeerBudget ?? DEFAULT_EAGER_PEER_BUDGET;
    this.#log = deps.log;
  }

  // ---- configs -------------------------------------------------------------------------

  /** One page of configs (keyset, src/services/lists.ts). @throws AppError INVALID_CURSOR */
  listConfigPage(query: Parameters<typeof lists.listConfigPage>[1]): ReturnType<typeof lists.listConfigPage> {
    return lists.listConfigPage(this.#store, query);
  }

  /** One page of a config's nodes (keyset, src/services/lists.ts). @throws AppError NOT_FOUND, INVALID_CURSOR */
  listNodePage(configId: string, query: Parameters<typeof lists.listNodePage>[3]): ReturnType<typeof lists.listNodePage> {
    return lists.listNodePage(this.#store, this.#mqttEnabled, configId, query);
  }

  /** A config's nodes counted by state (src/services/lists.ts). @throws AppError NOT_FOUND */
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
      const row = newConfigRow(input, cidr, now);
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
      // The apply mode reaches no text: it only says how the next pushes are applied.
      if (input.apply_mode !== undefined) patch.apply_mode = input.apply_mode;
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
      const change: MeshChange = { configId, configDeleted: true, created: [], deleted: nodes.map((n) => n.node_id), modeChanged: [], staged: [], touched: [] };
      const applied = this.#hooks?.inCommit?.(change);
      afterCommit(() => (applied?.(), this.#hooks?.afterCommit(change)));
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
      const row = newNodeRow(config, input, await nodesRepo.listNodeAddresses(trx, configId), now, await nextMeshSeq(trx));
      const hubsBefore = row.hub === 1 ? await readHubGraph(trx, configId) : HubGraph.EMPTY;
      await nodesRepo.insertNode(trx, row, now);
      await nodesRepo.replaceNodeTags(trx, row.node_id, dedupe(input.tags ?? []));
      const hubsAfter = await readHubGraph(trx, configId);
      const changed = await changedByNodeCreated(trx, row, hubsAfter);
      // A new hub may carry pairs that had none, or go ahead of the hub they had.
      if (row.hub === 1) changed.push(...(await changedByHubs(trx, configId, hubsBefore, hubsAfter, row.node_id)));
      await this.#changed(trx, afterCommit, configId, now, changed, { created: [row] });
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
      if (input.address !== undefined && input.address !== node.address) patch.address = checkedAddress(await requireConfig(trx, configId), input.address, await nodesRepo.listNodeAddresses(trx, configId));
      if (input.mode !== undefined) patch.mode = input.mode;
      if (input.interface_name !== undefined) patch.interface_name = input.interface_name;
      if (input.public_address !== undefined) patch.public_address = input.public_address;
      if (input.listen_port !== undefined) patch.listen_port = input.listen_port;
      if (input.hub !== undefined) patch.hub = input.hub ? 1 : 0;
      const publicAddress = patch.public_address !== undefined ? patch.public_address : node.public_address;
      const listenPort = patch.listen_port !== undefined ? patch.listen_port : node.listen_port;
      if (publicAddress !== null && listenPort === null) patch.listen_port = DEFAULT_LISTEN_PORT;
      if ((patch.hub ?? node.hub) === 1) requireHubEndpoint(publicAddress);
      const hubChanged = patch.hub !== undefined && patch.hub !== node.hub;
      const hubsBefore = await readHubGraph(trx, configId);
      await nodesRepo.updateNode(trx, nodeId, patch);
      const hubsAfter = hubChanged ? await readHubGraph(trx, configId) : hubsBefore;
      const changed = await changedByNodeUpdated(trx, node, { ...node, ...patch }, hubsBefore, hubsAfter);
      if (hubChanged) changed.push(...(await changedByHubs(trx, configId, hubsBefore, hubsAfter, nodeId)));
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
      const pairs = await pairsRepo.listPairsOfNode(trx, nodeId, () => nextTurn());
      const unpaired = pairs.map((p) => p.peer.node_id);
      await tokensRepo.deleteDownloadTokensOf(trx, "node_config", `${configId}/${nodeId}`);
      const changed = await changedByNodeDeleted(trx, node, pairs, () => nodesRepo.deleteNode(trx, nodeId));
      await this.#changed(trx, afterCommit, configId, now, changed, { deleted: [nodeId], unpaired });
    });
  }

  /** The staged config of a node (admin only: it holds the private key). */
  async getStagedConfig(
    configId: string,
    nodeId: string,
  ): Promise<{ node: NodeRow; config_name: string; tunnel_protocol: TunnelProtocol; config_version: number; config_sha256: string; config_text: string }> {
    const node = await requireNode(this.#store.db, configId, nodeId);
    const { name: configName, tunnel_protocol } = await requireConfig(this.#store.db, configId);
    // Rendered on first demand after a write changed it (lazy staging, src/services/rendering.service.ts).
    const staged = await materializeStaged(this.#store.db, node);
    if (staged === null) {
      // Every write stages, so this only happens on a database edited by hand.
      throw new AppError("NOT_FOUND", "the node has no staged config");
    }
    return { node, config_name: configName, tunnel_protocol, ...staged };
  }

  // ---- mesh pairs ----------------------------------------------------------------------

  /**
   * One page of a config's mesh pairs with their connection integrity (spec §6.5), in creation
   * order (`created_at`, `pair_id`); with `node_id` only that node's pairs. Reads the page's rows
   * and their sides only: O(page), never the config's n²/2 pairs (499,500 at 1,000 nodes).
   * @throws AppError NOT_FOUND (config, or the `node_id` in it), INVALID_CURSOR (not this list's cursor)
   */
  async listPairs(configId: string, query: MeshPairListQuery = { limit: PAIR_PAGE_LIMIT_MAX }): Promise<{ mesh_pairs: MeshPairView[]; next_cursor: string | null }> {
    return pairPage(this.#store.db, configId, query);
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
      const hubsBefore = await readHubGraph(trx, configId);
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
      const hubsAfter = nodeA.hub === 1 || nodeB.hub === 1 ? await readHubGraph(trx, configId) : hubsBefore;
      await this.#changed(trx, afterCommit, configId, now, await changedByPair(trx, [nodeA, nodeB], null, row.enabled === 1, hubsBefore, hubsAfter), { paired: [a, b] });
      return meshPairView(row, await pairsRepo.pairSides(trx, [a, b]), hubsAfter);
    });
  }

  async updatePair(configId: string, pairId: string, input: { enabled: boolean }): Promise<MeshPairView> {
    const now = this.#clock.now();
    return this.#store.transaction(async (trx, afterCommit) => {
      const pair = await requirePair(trx, configId, pairId);
      const hubs = await pairWrite(trx, configId, pair, () => pairsRepo.setPairEnabled(trx, pair, input.enabled, now), input.enabled);
      await this.#changed(trx, afterCommit, configId, now, hubs.changed, { paired: [pair.node_a, pair.node_b] });
      return meshPairView(
        { ...pair, enabled: input.enabled ? 1 : 0, updated_at: now },
        await pairsRepo.pairSides(trx, [pair.node_a, pair.node_b]),
        hubs.after,
      );
    });
  }

  async deletePair(configId: string, pairId: string): Promise<void> {
    const now = this.#clock.now();
    await this.#store.transaction(async (trx, afterCommit) => {
      const pair = await requirePair(trx, configId, pairId);
      const { changed } = await pairWrite(trx, configId, pair, () => pairsRepo.deletePair(trx, pair), null);
      await this.#changed(trx, afterCommit, configId, now, changed, { paired: [pair.node_a, pair.node_b] });
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
      const row = newPortForwardRow(nodeId, input, now);
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
      const next = patchedPortForward(current, input, now);
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
   * src/services/mesh/staged-changes.ts), and the change report handed to the hooks after commit.
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
    const applied = this.#hooks?.inCommit?.(change);
    afterCommit(() => {
      applied?.();
      const settled = this.#hooks?.afterCommit(change);
      if (deferred.length > 0) this.#rendering().afterCommit(configId, deferred);
      return settled;
    });
  }

  /**
   * The after-commit rendering of large writes' dynamic nodes (src/services/rendering.service.ts),
   * reported through the hooks in batches (node actors: `config.staged`, then the debounced push).
   */
  #rendering(): StagedRendering {
    this.#staged ??= new StagedRendering({
      store: this.#store,
      log: this.#log,
      report: (configId, staged) => this.#hooks?.afterCommit({ configId, created: [], deleted: [], modeChanged: [], touched: [], rendered: true, staged }),
    });
    return this.#staged;
  }

  /**
   * Renders the dynamic nodes a previous run left staged but unrendered (it stopped between a
   * large write's commit and its after-commit rendering), so their actors learn the staged sha
   * and push it. Call once the hooks' node actors run (start-up); {@link settled} covers it.
   */
  resumeRendering(): void {
    this.#rendering().resume();
  }

  /** Resolves once every write's after-commit rendering has finished (tests, benchmarks, shutdown). */
  settled(): Promise<void> {
    return this.#rendering().settled();
  }


  /** Every node's view of a config, in list order (src/services/mesh/node-views.ts). */
  #nodeViews(configId: string): Promise<NodeView[]> {
    return configNodeViews(this.#store, configId, this.#mqttEnabled);
  }

  /** One node's view: reads that node's tags and client state only (O(1) in the config's size). */
  #nodeView(db: Db, node: NodeRow): Promise<NodeView> {
    return nodeViewOf(db, node, this.#mqttEnabled);
  }

}
