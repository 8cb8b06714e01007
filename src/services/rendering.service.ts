/**
 * Rendering of staged node configs (DESIGN §3 Config versions): what to render, when and on
 * which thread. The store keeps the SQL (staged texts, render inputs, the render jobs the store
 * worker runs: src/store/render-job.ts); this module decides.
 *
 * Lazy staging: a mesh write does not render anything for static nodes. It works out, from the
 * write alone, exactly which nodes' rendered text changes (src/services/mesh/staged-changes.ts)
 * and bumps their `staged_config_version` with one UPDATE, clearing `staged_config_sha256`/`_text`.
 * A row with `staged_config_version >= 1` and a NULL sha is "staged but not rendered yet": its
 * text is, by construction, the rendering of the current inputs, and {@link materializeStaged}
 * renders, hashes and stores it on demand (downloads, pushes, bulk packages, snapshots). Dynamic
 * nodes are rendered in the write itself, or, for a large write, after its commit in small steps
 * on the store worker ({@link StagedRendering}), so their actors learn the new `(version, sha)`
 * (spec §3.5, §3.8: the agent receives the text whose SHA-256 is the staged sha).
 * `test/store/incremental-render.test.ts` proves this gives byte-for-byte the versions, texts and
 * shas of {@link restageConfig} after every write.
 */
import { performance } from "node:perf_hooks";
import { hasPublicEndpoint, HubGraph, renderNodeConfig, stageConfig, ConfigRenderer, type RenderInput, type RenderPeer } from "../domain/render.js";
// The next turn of a background task: one background step per loop iteration.
import { backgroundTurn as nextTurn } from "../lib/background-turn.js";
import type { Logger } from "../logger.js";
import { findConfig } from "../store/configs.repository.js";
import type { Db, Store } from "../store/db.js";
import { listPairs, listPairsOfNode, type PairOfNode } from "../store/mesh-pairs.repository.js";
import {
  bumpStagedVersions,
  findNodeById,
  findStagedText,
  listDynamicNodeIdsAmong,
  listNodes,
  listNodesAmong,
  listUnrenderedDynamicNodes,
  putStagedText,
  storeStagedRendering,
  updateNode,
} from "../store/nodes.repository.js";
import { listPortForwards, listPortForwardsOfConfig } from "../store/port-forwards.repository.js";
import { listPortForwardsAmong, listRenderSides, type RenderSideRow } from "../store/render-inputs.repository.js";
import {
  enabledForwards,
  isPairRendered,
  nodeInput,
  openRenderJob,
  peerIdsOf,
  readHubGraph,
  readRenderedPeers,
  renderCommon,
  renderPeer,
  routedOf,
  routedThrough,
  yieldIfSpent,
  type ChunkSource,
  type RenderedChunk,
  type SelfSide,
  type StagedChange,
  type Turn,
} from "../store/render-job.js";
import type { ConfigRow, MeshPairRow, NodeRow, PortForwardRow } from "../store/schema.js";

export type { StagedChange } from "../store/render-job.js";

/** The renderer's input for one node, from stored rows (peers already selected). */
function renderInput(config: ConfigRow, node: SelfSide, peers: RenderPeer[], forwards: readonly PortForwardRow[]): RenderInput {
  return { ...renderCommon(config), node: nodeInput(node), peers, port_forwards: enabledForwards(forwards) };
}

/**
 * Renders `self` against its pairs as given (lets a caller render a node before and after a
 * patch): the pairs one side can initiate as peers, and, through the hubs of `hubs`, the
 * addresses of the pairs neither side can.
 */
export function renderWith(config: ConfigRow, self: SelfSide, pairs: readonly PairOfNode[], forwards: readonly PortForwardRow[], hubs: HubGraph = HubGraph.EMPTY): string {
  const routed = routedThrough(self, pairs, hubs);
  const peers = pairs
    .filter((p) => isPairRendered(self, p.peer, p.enabled === 1))
    .map((p) => ({ ...renderPeer(p.peer), routed_addresses: routed.get(p.peer.node_id) ?? [] }));
  return renderNodeConfig(renderInput(config, self, peers, forwards));
}

/**
 * Renders one node as it was (`before`) and as it is (`after`) a patch of its own row, against
 * the same pairs and port forwards, each with its config's hubs: the two texts {@link renderWith}
 * gives for them, byte for byte. Each peer is validated and its `[Peer]` block built once for both
 * renderings ({@link ConfigRenderer}), where two calls of `renderWith` did it twice (at 5,000
 * nodes, 2 × 4,999 peer validations in a single endpoint change).
 * @param between awaited between the two renderings (a write yields a turn of the event loop
 *   there: each is O(pairs) of CPU, ~20 ms at 5,000 nodes)
 * @returns [text before, text after]
 * @throws AppError `VALIDATION_FAILED` from the renderer on bad stored input (as `renderWith` would)
 */
export async function renderBeforeAndAfter(
  config: ConfigRow,
  [before, after]: readonly [SelfSide, SelfSide],
  pairs: readonly PairOfNode[],
  forwards: readonly PortForwardRow[],
  [hubsBefore, hubsAfter]: readonly [HubGraph, HubGraph],
  between?: () => Promise<void>,
): Promise<[string, string]> {
  const renderer = new ConfigRenderer(renderCommon(config), pairs.map((p) => renderPeer(p.peer)));
  const ports = enabledForwards(forwards);
  const render = (self: SelfSide, hubs: HubGraph) => {
    const peerIds = new Set(pairs.filter((p) => isPairRendered(self, p.peer, p.enabled === 1)).map((p) => p.peer.node_id));
    return renderer.render(nodeInput(self), peerIds, ports, routedThrough(self, pairs, hubs));
  };
  const textBefore = render(before, hubsBefore);
  await between?.();
  return [textBefore, render(after, hubsAfter)];
}

/**
 * The hubs a node's rendering needs: none for a node with a public endpoint or without a pair
 * with a hub (nothing is read), else the config's hub graph (O(hubs × nodes of the config)).
 */
export async function hubsFor(db: Db, configId: string, self: SelfSide, pairs: readonly PairOfNode[]): Promise<HubGraph> {
  if (hasPublicEndpoint(self) || !pairs.some((p) => p.peer.hub === 1 && p.enabled === 1)) return HubGraph.EMPTY;
  return readHubGraph(db, configId);
}

/**
 * The config text of one node from the current stored inputs: O(pairs of the node), plus the
 * config's hubs when the node routes through one.
 * @throws AppError `NOT_FOUND` never; `VALIDATION_FAILED` from the renderer on bad stored input
 */
export async function renderCurrentConfig(db: Db, node: NodeRow): Promise<string | null> {
  const config = await findConfig(db, node.config_id);
  if (!config) return null;
  const [pairs, forwards] = await Promise.all([listPairsOfNode(db, node.node_id), listPortForwards(db, node.node_id)]);
  return renderWith(config, node, pairs, forwards, await hubsFor(db, node.config_id, node, pairs));
}

/**
 * The staged config of a node, rendered and stored on demand (`node_staged_texts` is the cache,
 * keyed by the node's `staged_config_version` and sha: a write that changes the text clears the
 * sha, and the stale text is not served).
 * @returns null when the node was never staged (`staged_config_version` 0) or its config is gone
 */
export async function materializeStaged(
  db: Db,
  node: NodeRow,
): Promise<{ config_version: number; config_sha256: string; config_text: string } | null> {
  let row: NodeRow | undefined = node;
  for (let attempt = 0; row !== undefined && attempt < 3; attempt++) {
    if (row.staged_config_sha256 !== null) {
      const stored = await findStagedText(db, row.node_id, row.staged_config_version, row.staged_config_sha256);
      if (stored !== undefined) return { config_version: row.staged_config_version, config_sha256: row.staged_config_sha256, config_text: stored };
    }
    if (row.staged_config_version < 1) return null;
    const text = await renderCurrentConfig(db, row);
    if (text === null) return null;
    const sha = stageConfig(null, text).config_sha256;
    // Not the version: the text of this version was unknown, not different. Stored only if no
    // write bumped the node between the read and now (else read again and render again).
    if (await storeStagedRendering(db, row.node_id, row.staged_config_version, sha, text)) {
      return { config_version: row.staged_config_version, config_sha256: sha, config_text: text };
    }
    row = await findNodeById(db, row.node_id);
  }
  return null;
}

/**
 * Applies a write's changed set: bumps the versions (one UPDATE per 500 nodes). A small write
 * (`changed × configSize <= eagerPeerBudget` peer lines) renders every node it changed right
 * away, as before; a larger one leaves the static ones lazy and hands back the dynamic ones, for
 * rendering after the commit in small steps ({@link renderDeferred}): their actors push them.
 * `render`: further nodes to render (not bump) when dynamic, e.g. a node just made dynamic.
 * @returns `staged`: the changes rendered now, for the node actors (DESIGN §3 Config versions);
 *   `deferred`: ids of dynamic nodes still to render
 */
export async function stageChanged(
  db: Db,
  nodeIds: readonly string[],
  now: number,
  opts: { render?: readonly string[]; eagerPeerBudget?: number; configSize?: number } = {},
): Promise<{ staged: StagedChange[]; deferred: string[] }> {
  const unique = [...new Set(nodeIds)];
  if (unique.length > 0) await bumpStagedVersions(db, unique, now);
  const eager = unique.length * (opts.configSize ?? Infinity) <= (opts.eagerPeerBudget ?? 0);
  const toRender = [...new Set([...unique, ...(opts.render ?? [])])];
  if (!eager) return { staged: [], deferred: await listDynamicNodeIdsAmong(db, toRender) };
  const staged: StagedChange[] = [];
  for (const node of await listNodesAmong(db, toRender)) {
    const s = await materializeStaged(db, node);
    if (s) staged.push({ nodeId: node.node_id, version: s.config_version, sha: s.config_sha256 });
  }
  return { staged, deferred: [] };
}

/** Render jobs run in this thread ({@link openRenderJob}), yielding whenever a turn has run `stepMs` ms. */
export function inThreadJobs(db: Db, stepMs = 10): ChunkSource {
  return { ahead: 0, open: (configId, ids) => openRenderJob(db, configId, ids, { start: performance.now(), stepMs }) };
}

/**
 * Renders the staged configs of nodes of one config outside any transaction, in steps of `chunk`
 * nodes, and reports them in batches of up to `batch` nodes (or every `sliceMs` ms) to
 * `onStaged`. The renderings come from a {@link RenderJob} of `opts.source` (inputs read once
 * per job, each peer checked once: {@link openRenderJob}); this function stores them and reports
 * them. With the store worker as source, the next step is rendered on another thread while this
 * one stores. A rendering is stored only if its node is still at the
 * version read before the inputs (`storeStagedRendering`); a node a write bumped meanwhile is
 * rendered again from fresh inputs ({@link materializeStaged}). Yields to the event loop before
 * each step and whenever a turn has run `stepMs` ms: no turn of the event loop blocks long.
 * A node deleted, of another config or never staged is skipped; one already rendered is reported
 * with its stored rendering.
 * @throws AppError `VALIDATION_FAILED` from the renderer on bad stored input (the rest of the
 *   nodes are then not rendered)
 */
export async function renderDeferred(
  db: Db,
  configId: string,
  nodeIds: readonly string[],
  onStaged: (batch: StagedChange[]) => Promise<unknown> | void,
  opts: { batch?: number; sliceMs?: number; chunk?: number; stepMs?: number; source?: ChunkSource } = {},
): Promise<void> {
  const { batch = 50, sliceMs = 20, chunk = 16, stepMs = 10 } = opts;
  const source = opts.source ?? inThreadJobs(db, stepMs);
  let pending: StagedChange[] = [];
  let since = performance.now();
  const report = async (force: boolean): Promise<void> => {
    if (pending.length === 0 || (!force && pending.length < batch && performance.now() - since < sliceMs)) return;
    const out = pending;
    pending = [];
    await onStaged(out);
    since = performance.now();
  };
  const onNode = async (s: StagedChange): Promise<void> => {
    pending.push(s);
    await report(false);
  };
  const job = source.open(configId, nodeIds);
  // Steps asked and not yet stored, in order: up to `source.ahead` beyond the current one.
  const inFlight: Array<Promise<RenderedChunk | null>> = [];
  const turn: Turn = { start: performance.now(), stepMs };
  try {
    for (;;) {
      while (inFlight.length <= source.ahead) inFlight.push(job.next(chunk));
      await nextTurn();
      turn.start = performance.now();
      const step = await inFlight.shift();
      if (!step) break;
      await storeChunk(db, step, turn, onNode);
    }
  } finally {
    // A step asked ahead of the end or of a failure is dropped, never left unhandled.
    for (const p of inFlight) p.catch(() => undefined);
    job.close();
  }
  await report(true);
}

/**
 * Stores one step's renderings and reports each node, yielding whenever the turn has run its
 * step. A node a write bumped after its version was read is rendered again from fresh inputs.
 */
async function storeChunk(db: Db, chunk: RenderedChunk, turn: Turn, onNode: (s: StagedChange) => Promise<void>): Promise<void> {
  for (const s of chunk.stored) await onNode(s);
  for (const r of chunk.rendered) {
    await yieldIfSpent(turn);
    if (await storeStagedRendering(db, r.nodeId, r.version, r.sha, r.text)) {
      await onNode({ nodeId: r.nodeId, version: r.version, sha: r.sha });
      continue;
    }
    const fresh = await findNodeById(db, r.nodeId);
    const s = fresh ? await materializeStaged(db, fresh) : null;
    if (s) await onNode({ nodeId: r.nodeId, version: s.config_version, sha: s.config_sha256 });
  }
}

/**
 * Re-renders the config of every node of one config and stores the staged
 * `(config_version, config_sha256, config_text)` (DESIGN §3 Config versions): the version
 * increments only for nodes whose rendered text changed. A node staged lazily (version >= 1,
 * no sha) keeps its version: its text is the rendering of the current inputs. O(n²) peer lines
 * in a full mesh, rendered in chunks of `chunk` nodes after one read of the config's pairs
 * ({@link readRenderedPeers}), each peer checked once ({@link ConfigRenderer}), yielding to the
 * event loop before each chunk and whenever a turn has run `stepMs` ms. The reference the lazy
 * path is proven against stays {@link renderConfigTexts} (`renderNodeConfig` per node).
 *
 * With `lazy` (snapshot import and restore: what a mesh write stores), no static node's text is
 * written: one staged lazily stays so after the renderer's checks only
 * ({@link ConfigRenderer.check}, no text assembled), one never staged becomes version 1 lazily,
 * and one with a stored sha is rendered and compared: the same text keeps its version, sha and
 * stored text, another moves on by one and is left lazy (sha cleared, as a write leaves it; its
 * old text is no longer served). Dynamic nodes are rendered and stored as without `lazy` (their
 * actors learn the sha, as after a write). What is written is then O(nodes + dynamic nodes'
 * texts), not the O(n²) bytes of a full mesh's texts.
 *
 * Peers of a node are the other sides of its enabled mesh pairs whose connection integrity is
 * not broken (a pair no side can initiate is left out rather than rendered half-way).
 *
 * @returns the nodes whose staged config changed, with their new version and sha (with `lazy`,
 *   rendered ones only)
 * @throws AppError `VALIDATION_FAILED` from the renderer on bad stored input, lazily staged nodes included
 */
export async function restageConfig(db: Db, configId: string, now: number, opts: { chunk?: number; stepMs?: number; lazy?: boolean } = {}): Promise<StagedChange[]> {
  const { chunk = 16, stepMs = 10, lazy = false } = opts;
  const config = await findConfig(db, configId);
  if (!config) return [];
  const nodes = await listRenderSides(db, configId);
  if (nodes.length === 0) return [];
  // Every node of the config is a candidate peer: each is checked and its [Peer] block built once.
  const renderer = new ConfigRenderer(renderCommon(config), nodes.map(renderPeer));
  const changed: StagedChange[] = [];
  const turn: Turn = { start: performance.now(), stepMs };
  const peers = await readRenderedPeers(db, configId, nodes, turn);
  for (let i = 0; i < nodes.length; i += chunk) {
    await nextTurn();
    turn.start = performance.now();
    const part = nodes.slice(i, i + chunk);
    const forwards = await listPortForwardsAmong(db, part.map((n) => n.node_id));
    for (const node of part) {
      await yieldIfSpent(turn);
      const inputs = [nodeInput(node), peerIdsOf(peers, node.node_id), enabledForwards(forwards.get(node.node_id) ?? []), routedOf(peers, node.node_id)] as const;
      const leaveLazy = lazy && node.mode !== "dynamic";
      const unrendered = node.staged_config_sha256 === null;
      if (leaveLazy && unrendered) {
        renderer.check(...inputs);
        if (node.staged_config_version < 1) await updateNode(db, node.node_id, { staged_config_version: 1, updated_at: now });
        continue;
      }
      const text = renderer.render(...inputs);
      const s = await restageNode(db, node, text, now, leaveLazy);
      if (s) changed.push(s);
    }
  }
  return changed;
}

/**
 * Stages one node's fresh rendering `text` against its stored version and sha (see
 * {@link restageConfig}); `leaveLazy`: a changed text is not stored, the version moves on and
 * the sha is cleared (staged lazily).
 * @returns the change when the node's staged config changed and was rendered, else null
 */
async function restageNode(db: Db, node: RenderSideRow, text: string, now: number, leaveLazy: boolean): Promise<StagedChange | null> {
  const lazy = node.staged_config_sha256 === null && node.staged_config_version >= 1;
  const previous = node.staged_config_sha256 === null ? null : { config_version: node.staged_config_version, config_sha256: node.staged_config_sha256 };
  const staged = lazy ? { ...stageConfig(null, text), config_version: node.staged_config_version } : stageConfig(previous, text);
  if (staged.config_sha256 === node.staged_config_sha256) return null;
  if (leaveLazy) {
    await updateNode(db, node.node_id, { staged_config_version: staged.config_version, staged_config_sha256: null, updated_at: now });
    return null;
  }
  await putStagedText(db, node.node_id, staged.config_version, staged.config_sha256, staged.config_text);
  await updateNode(db, node.node_id, {
    staged_config_version: staged.config_version,
    staged_config_sha256: staged.config_sha256,
    ...(lazy ? {} : { updated_at: now }),
  });
  return lazy ? null : { nodeId: node.node_id, version: staged.config_version, sha: staged.config_sha256 };
}

/**
 * The full re-render of every node of a config from the stored inputs, writing nothing: the
 * reference the lazy path is proven against. O(n²) in a full mesh.
 * @returns one entry per node, in `listNodes` order; empty when the config does not exist
 */
export async function renderConfigTexts(db: Db, configId: string): Promise<Array<{ node: NodeRow; text: string }>> {
  const config = await findConfig(db, configId);
  if (!config) return [];
  const [nodes, pairs, forwards] = await Promise.all([listNodes(db, configId), listPairs(db, configId), listPortForwardsOfConfig(db, configId)]);
  return renderConfigTextsOf(config, nodes, pairs, forwards);
}

/**
 * The full re-render of given nodes against given pairs, reading nothing (a model's pairs can be
 * rendered against the store's: the full-mesh policy is proven against explicit rows this way).
 * @param pairs every pair of the config, each once, `node_a`/`node_b` in any order
 * @param forwards node_id → its port forwards
 * @returns one entry per node, in the order given
 */
export function renderConfigTextsOf(
  config: ConfigRow,
  nodes: readonly NodeRow[],
  pairs: ReadonlyArray<Pick<MeshPairRow, "node_a" | "node_b" | "enabled">>,
  forwards: ReadonlyMap<string, readonly PortForwardRow[]>,
): Array<{ node: NodeRow; text: string }> {
  const byId = new Map(nodes.map((n) => [n.node_id, n]));
  // Every hub with the nodes it has an enabled pair with: who forwards for pairs no side can initiate.
  const partners = new Map(nodes.filter((n) => n.hub === 1).map((n) => [n.node_id, [] as string[]]));
  for (const pair of pairs.filter((p) => p.enabled === 1)) {
    partners.get(pair.node_a)?.push(pair.node_b);
    partners.get(pair.node_b)?.push(pair.node_a);
  }
  const hubs = new HubGraph(partners);
  const peersOf = new Map<string, RenderPeer[]>();
  const routedOfNode = new Map<string, Map<string, string[]>>();
  for (const pair of pairs) {
    const a = byId.get(pair.node_a);
    const b = byId.get(pair.node_b);
    if (!a || !b || pair.enabled !== 1) continue;
    const direct = isPairRendered(a, b, true);
    const hub = direct || hasPublicEndpoint(a) || hasPublicEndpoint(b) ? null : hubs.hubFor(a.node_id, b.node_id);
    for (const [self, other] of [[a, b], [b, a]] as const) {
      if (direct) peersOf.set(self.node_id, [...(peersOf.get(self.node_id) ?? []), renderPeer(other)]);
      if (hub === null) continue;
      const byHub = routedOfNode.get(self.node_id) ?? new Map<string, string[]>();
      byHub.set(hub, [...(byHub.get(hub) ?? []), other.address]);
      routedOfNode.set(self.node_id, byHub);
    }
  }
  return nodes.map((node) => {
    const routed = routedOfNode.get(node.node_id);
    const peers = (peersOf.get(node.node_id) ?? []).map((p) => ({ ...p, routed_addresses: routed?.get(p.node_id) ?? [] }));
    return { node, text: renderNodeConfig(renderInput(config, node, peers, forwards.get(node.node_id) ?? [])) };
  });
}

/** What {@link StagedRendering} reports to: the node actors and SSE, through the mesh hooks. */
export interface StagedRenderingDeps {
  store: Store;
  /** Called with each batch of nodes rendered after a commit (node actors: `config.staged`, then the debounced push). */
  report(configId: string, staged: StagedChange[]): Promise<unknown> | void;
  /** Where failures of after-commit rendering are logged. */
  log?: Logger | undefined;
}

/**
 * The after-commit rendering of large writes' dynamic nodes, and its resumption at start-up:
 * rendered on the store worker (in this thread for an in-memory store), reported in batches,
 * one write after another; {@link settled} resolves when all are done.
 */
export class StagedRendering {
  readonly #deps: StagedRenderingDeps;
  #background: Promise<void> = Promise.resolve();

  constructor(deps: StagedRenderingDeps) {
    this.#deps = deps;
  }

  /** Renders `nodeIds` (dynamic nodes of `configId` a committed write left unrendered) in the background. */
  afterCommit(configId: string, nodeIds: readonly string[]): void {
    this.#inBackground(() => this.#renderAndReport(configId, nodeIds));
  }

  /**
   * Renders the dynamic nodes a previous run left staged but unrendered (it stopped between a
   * large write's commit and its after-commit rendering), so their actors learn the staged sha
   * and push it. Call once the node actors run (start-up); {@link settled} covers it.
   */
  resume(): void {
    this.#inBackground(async () => {
      const byConfig = new Map<string, string[]>();
      for (const r of await listUnrenderedDynamicNodes(this.#deps.store.db)) {
        byConfig.set(r.config_id, [...(byConfig.get(r.config_id) ?? []), r.node_id]);
      }
      for (const [configId, ids] of byConfig) await this.#renderAndReport(configId, ids);
    });
  }

  /** Resolves once every after-commit rendering asked so far has finished (tests, benchmarks, shutdown). */
  settled(): Promise<void> {
    return this.#background;
  }

  #renderAndReport(configId: string, nodeIds: readonly string[]): Promise<void> {
    const { store } = this.#deps;
    const source = store.worker() ?? undefined;
    return renderDeferred(store.db, configId, nodeIds, (staged) => this.#deps.report(configId, staged), source === undefined ? {} : { source });
  }

  /** Chains background work after the previous one; a failure is logged, never thrown. */
  #inBackground(work: () => Promise<void>): void {
    this.#background = this.#background.then(work).catch((err: unknown) => this.#deps.log?.error({ err }, "rendering staged configs in the background failed"));
  }
}
