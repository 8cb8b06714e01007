import type { AnyStateNode } from "xstate";
import type { NodeActorRow } from "../store/node-client-state.repository.js";
import type { PersistedNode } from "./node-entries.js";

/**
 * The strict check of a stored machine snapshot before an actor is restored from it: a row that
 * fails it is quarantined (quarantine.ts), never a crash of start-up or of a reload.
 */

const isString = (v: unknown) => typeof v === "string";
const isCount = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;
const isPositive = (v: unknown) => Number.isSafeInteger(v) && (v as number) > 0;
const orNull = (check: (v: unknown) => boolean) => (v: unknown) => v === null || check(v);
const isSha = (v: unknown) => typeof v === "string" && /^[0-9a-f]{64}$/.test(v);

/**
 * The stored context of a node machine snapshot, field by field (src/machines/node.machine.ts
 * NodeContext); `confirmedProtocol` may be missing (older snapshots). Checked by hand rather than
 * with zod: zod measured 5.5 µs per node, +0.55 s on a 100k-node cold start (target ≤ 5 s);
 * this costs a tenth of that.
 */
const STORED_CONTEXT: Record<string, { check: (v: unknown) => boolean; optional?: true }> = {
  configId: { check: isString },
  nodeId: { check: isString },
  mode: { check: (v) => v === "static" || v === "dynamic" },
  onlineTtlMs: { check: isPositive },
  detectTimeoutMs: { check: isPositive },
  lastSignalAt: { check: orNull(isCount) },
  lastReachableAt: { check: orNull(isCount) },
  detectSentAt: { check: orNull(isCount) },
  bindTokenExpiresAt: { check: orNull(isCount) },
  stagedVersion: { check: isCount },
  stagedSha: { check: orNull(isSha) },
  confirmedVersion: { check: orNull(isCount) },
  confirmedSha: { check: orNull(isSha) },
  confirmedProtocol: { check: (v) => v === null || v === "wireguard" || v === "awg_2", optional: true },
  clientVersion: { check: orNull((v) => typeof v === "string" && v.length <= 64) },
};

/** Why `raw` is not a stored node snapshot (status, value object, context fields), or undefined. */
function storedShapeProblem(raw: unknown): string | undefined {
  if (raw === null || typeof raw !== "object") return "not an object";
  const { status, value, context } = raw as Record<string, unknown>;
  if (status !== "active") return "status must be active";
  if (value === null || typeof value !== "object" || Array.isArray(value)) return "value must be an object";
  if (context === null || typeof context !== "object" || Array.isArray(context)) return "context must be an object";
  const ctx = context as Record<string, unknown>;
  for (const k of Object.keys(ctx)) if (!(k in STORED_CONTEXT)) return `context.${k.slice(0, 40)} is not a context field`;
  for (const [k, rule] of Object.entries(STORED_CONTEXT)) {
    if (!(k in ctx)) {
      if (rule.optional) continue;
      return `context.${k} is missing`;
    }
    if (!rule.check(ctx[k])) return `context.${k} has a wrong type or value`;
  }
  return undefined;
}

/**
 * Parses a stored machine snapshot strictly (a stored row never crashes a start; docs/decisions.md
 * "Quarantine at start and reload"):
 * JSON, status `active`, a state value that names only states of the machine (every parallel
 * region, one child per compound state), a context of the right shape, and the row's own ids.
 * @throws Error naming the first problem
 */
export function parsePersistedNode(root: AnyStateNode, json: string, row: Pick<NodeActorRow, "config_id" | "node_id">): PersistedNode {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error("machine_snapshot is not JSON");
  }
  const shape = storedShapeProblem(raw);
  if (shape) throw new Error(`machine_snapshot: ${shape}`);
  const snapshot = raw as PersistedNode;
  const problem = stateValueProblem(root, snapshot.value, "value");
  if (problem) throw new Error(`machine_snapshot: ${problem}`);
  const ctx = snapshot.context;
  if (ctx.configId !== row.config_id || ctx.nodeId !== row.node_id) throw new Error("machine_snapshot belongs to another node");
  return snapshot;
}

/** Why `value` is not a state value of `node` (a parallel or compound state), or undefined. */
function stateValueProblem(node: AnyStateNode, value: unknown, path: string): string | undefined {
  const children = node.states as Record<string, AnyStateNode>;
  if (node.type === "parallel") {
    if (value === null || typeof value !== "object") return `${path} must be an object of regions`;
    const keys = Object.keys(value);
    const expected = Object.keys(children);
    if (keys.length !== expected.length || !expected.every((k) => keys.includes(k))) {
      return `${path} must hold exactly the regions ${expected.join(", ")}`;
    }
    for (const [k, child] of Object.entries(children)) {
      const p = stateValueProblem(child, (value as Record<string, unknown>)[k], `${path}.${k}`);
      if (p) return p;
    }
    return undefined;
  }
  if (typeof value === "string") {
    const child = children[value];
    if (!child) return `${path}: ${JSON.stringify(value.slice(0, 40))} is not a state`;
    return child.type === "atomic" || child.type === "final" ? undefined : `${path}.${value} needs its child state`;
  }
  const named = value !== null && typeof value === "object" ? Object.entries(value) : [];
  const [only] = named;
  if (named.length !== 1 || only === undefined) return `${path} must name one state`;
  const [name, inner] = only;
  const child = children[name];
  if (!child || child.type === "atomic" || child.type === "final") return `${path}: ${JSON.stringify(name.slice(0, 40))} is not a compound state`;
  return stateValueProblem(child, inner, `${path}.${name}`);
}
