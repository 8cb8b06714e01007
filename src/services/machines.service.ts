import type { AnyStateNode, AnyTransitionDefinition } from "xstate";
import { activeStateIds } from "../actors/recorder.js";
import type { NodeActorRegistry } from "../actors/registry.js";
import { isoTime } from "../lib/clock.js";
import { NODE_MACHINE_VERSION, initialNodeContext, nodeMachine, type NodeContext } from "../machines/node.machine.js";
import type {
  ConfigLatestTransitions,
  MachineGraph,
  NodeMachineView,
  NodeTimeline,
  RegionValues,
} from "../protocol/machine.schema.js";
import type { Store } from "../store/db.js";
import { latestNodeTransitionsOfConfig, listNodeTransitions, type NodeTransitionRow } from "../store/node-transitions.repository.js";
import { requireConfig, requireNode } from "./node-lookup.js";

export interface MachinesServiceDeps {
  store: Store;
  registry: NodeActorRegistry;
  /** The service's detect timeout, ms (what a `detectTimeout` timer waits when entered now). */
  detectTimeoutMs: number;
  /** The bind token TTL, ms (what a `bindTokenTtl` timer waits when entered now). */
  bindTokenTtlMs: number;
  /** The online TTL, ms (shown in a fresh context). */
  onlineTtlMs: number;
  /**
   * `SVC_TIMELINE_MAX_PER_NODE`: a timeline answers at most this many newest rows of a node, even
   * while retention has not yet pruned the ones past it (it prunes in batches of a cap/8).
   * Default: no limit.
   */
  timelineMaxPerNode?: number;
}

/**
 * The read side of the node statechart for the console's State machine tab: the statechart as data (generated from
 * `src/machines/node.machine.ts` itself, never a hand-written copy), a node's live state, and
 * its flight recorder (`node_transitions`, written by the registry's group commit).
 */
export class MachinesService {
  readonly #d: MachinesServiceDeps;
  #graph: MachineGraph | undefined;

  constructor(deps: MachinesServiceDeps) {
    this.#d = deps;
  }

  /**
   * The node statechart (`GET /api/v1/machines/node`): every state node of `nodeMachine.root`
   * (id, parent, kind, initial child) and every transition it defines (`on`, `after`, `always`)
   * with its targets, event type, guard name and, for timers, the delay in ms when entered now
   * with this service's settings. Built once.
   */
  graph(): MachineGraph {
    this.#graph ??= machineGraph(nodeMachine.root, (name) => this.#delayMs(name));
    return this.#graph;
  }

  /**
   * A node's state (`GET .../nodes/{node_id}/machine`): its active state per region and a context
   * summary from the live actor, or from the stored snapshot of a dormant node.
   * @throws AppError NOT_FOUND for an unknown config, or a node not in it
   */
  async machine(configId: string, nodeId: string): Promise<NodeMachineView> {
    await requireNode(this.#d.store.db, configId, nodeId);
    const state = this.#d.registry.machineState(configId, nodeId);
    if (state === undefined) {
      return { config_id: configId, node_id: nodeId, origin: "none", regions: {}, active_states: [], context: null };
    }
    return {
      config_id: configId,
      node_id: nodeId,
      origin: state.live ? "live" : "stored",
      regions: regionValues(state.value),
      active_states: activeStates(state.value),
      context: contextView(state.context),
    };
  }

  /**
   * One page of a node's flight recorder (`GET .../nodes/{node_id}/timeline`), newest first:
   * rows with `transition_id` below `before` (all when absent), at most `limit`.
   * @throws AppError NOT_FOUND for an unknown config, or a node not in it
   */
  async timeline(configId: string, nodeId: string, before: number | undefined, limit: number): Promise<NodeTimeline> {
    await requireNode(this.#d.store.db, configId, nodeId);
    // One more than asked: tells whether an older page exists without a count.
    const rows = await this.#d.store.read((conn) => listNodeTransitions(conn, nodeId, before ?? Number.MAX_SAFE_INTEGER, limit + 1, this.#d.timelineMaxPerNode));
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      transitions: page.map(transitionRowView),
      next_before: rows.length > limit && last !== undefined ? last.transition_id : null,
    };
  }

  /**
   * The newest recorded transition of each node of a config
   * (`GET /api/v1/configs/{config_id}/timeline/latest`, the mesh page's "last transition"),
   * ordered by `node_id`.
   * @throws AppError NOT_FOUND for an unknown config
   */
  async latestTransitions(configId: string): Promise<ConfigLatestTransitions> {
    await requireConfig(this.#d.store.db, configId);
    return {
      transitions: (await this.#d.store.read((conn) => latestNodeTransitionsOfConfig(conn, configId))).map((r) => ({ node_id: r.node_id, ...transitionRowView(r) })),
    };
  }

  /** A named delay of the machine, evaluated as if its state were entered now (ms). */
  #delayMs(name: string): number | null {
    const delay = (nodeMachine.implementations.delays as Record<string, unknown>)[name];
    if (typeof delay === "number") return delay;
    if (typeof delay !== "function") return null;
    const context: NodeContext = {
      ...initialNodeContext({ configId: "", nodeId: "", mode: "dynamic", onlineTtlMs: this.#d.onlineTtlMs, detectTimeoutMs: this.#d.detectTimeoutMs }),
      detectSentAt: 0,
      bindTokenExpiresAt: this.#d.bindTokenTtlMs,
    };
    const ms: unknown = (delay as (args: unknown) => unknown)({ context, event: { type: "xstate.init", at: 0 } });
    return typeof ms === "number" ? ms : null;
  }
}

/** A stored `node_transitions` row as the wire shows it (times ISO, values per region). */
function transitionRowView(r: NodeTransitionRow): NodeTimeline["transitions"][number] {
  return {
    transition_id: r.transition_id,
    at: isoTime(r.at),
    event: r.event,
    source: r.source,
    request_id: r.request_id,
    route: r.route,
    before: r.value_before === null ? null : regionValues(JSON.parse(r.value_before)),
    after: regionValues(JSON.parse(r.value_after)),
    changes: JSON.parse(r.changes) as Record<string, [unknown, unknown]>,
  };
}

/**
 * The statechart of `root` as data: states in document order, then each state's transitions
 * (`on` and `after` from `transitions`, then `always`).
 */
export function machineGraph(root: AnyStateNode, delayMs: (name: string) => number | null): MachineGraph {
  const graph: MachineGraph = { machine_id: root.machine.id, machine_version: NODE_MACHINE_VERSION, states: [], transitions: [] };
  const walk = (node: AnyStateNode) => {
    graph.states.push({
      id: node.id,
      key: node.key,
      parent: node.parent?.id ?? null,
      kind: node.type,
      initial: node.type === "compound" ? (node.initial.target[0]?.id ?? null) : null,
    });
    const delays = new Map(node.after.map((t) => [t.eventType, t.delay]));
    for (const [event, list] of node.transitions) {
      const delay = delays.get(event);
      const name = delay === undefined ? null : String(delay);
      for (const t of list) {
        graph.transitions.push(transitionView(node, t, {
          trigger: delay === undefined ? "event" : "after",
          event,
          delay: name,
          delay_ms: typeof delay === "number" ? delay : name === null ? null : delayMs(name),
        }));
      }
    }
    for (const t of node.always ?? []) {
      graph.transitions.push(transitionView(node, t, { trigger: "always", event: null, delay: null, delay_ms: null }));
    }
    for (const child of Object.values(node.states)) walk(child);
  };
  walk(root);
  return graph;
}

function transitionView(
  node: AnyStateNode,
  t: AnyTransitionDefinition,
  what: Pick<MachineGraph["transitions"][number], "trigger" | "event" | "delay" | "delay_ms">,
): MachineGraph["transitions"][number] {
  return {
    source: node.id,
    targets: (t.target ?? []).map((s) => s.id),
    ...what,
    guard: guardName(t.guard),
    reenter: t.reenter,
  };
}

/** A guard's name: the named guard, the type of a parameterized one, or the function's name. */
function guardName(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === "string") return guard;
  if (typeof guard === "function") return guard.name || "inline";
  const type = (guard as { type?: unknown }).type;
  return typeof type === "string" ? type : "inline";
}

/**
 * A state value region by region: a region in an atomic state answers its key, one in a
 * compound state the dotted path (`online.fresh`).
 */
export function regionValues(value: unknown): RegionValues {
  const out: RegionValues = {};
  if (value === null || typeof value !== "object") return out;
  for (const [region, v] of Object.entries(value)) out[region] = dottedPath(v);
  return out;
}

function dottedPath(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === null || typeof v !== "object") return "";
  const [first] = Object.entries(v);
  return first === undefined ? "" : `${first[0]}${first[1] === undefined ? "" : `.${dottedPath(first[1])}`}`;
}

/** Ids of every active state of a state value of the node machine (root excluded). */
export function activeStates(value: unknown): string[] {
  return activeStateIds(value, nodeMachine.id);
}

/** The context summary of a node: timestamps as ISO strings, versions, the client's version. */
function contextView(c: NodeContext): NonNullable<NodeMachineView["context"]> {
  const time = (ms: number | null) => (ms === null ? null : isoTime(ms));
  return {
    mode: c.mode,
    online_ttl_ms: c.onlineTtlMs,
    detect_timeout_ms: c.detectTimeoutMs,
    last_signal_at: time(c.lastSignalAt),
    last_reachable_at: time(c.lastReachableAt),
    detect_sent_at: time(c.detectSentAt),
    bind_token_expires_at: time(c.bindTokenExpiresAt),
    staged_version: c.stagedVersion,
    staged_sha256: c.stagedSha,
    confirmed_version: c.confirmedVersion,
    confirmed_sha256: c.confirmedSha,
    confirmed_tunnel_protocol: c.confirmedProtocol ?? null,
    client_version: c.clientVersion,
  };
}
