import type { z } from "zod";
import { controlLogView, type ControlLogView } from "../actors/commands.js";
import {
  configCursorSchema,
  controlLogCursorSchema,
  nodeCursorSchema,
  type configListAnswer,
  type configListQuery,
  type controlLogListAnswer,
  type controlLogListQuery,
  type nodeCountsAnswer,
  type nodeFilterQuery,
  type nodeListAnswer,
  type nodeListQuery,
} from "../protocol/rest.schema.js";
import { configPage, countConfigs } from "../store/configs.repository.js";
import { controlLogPage, countControlLogsByKind } from "../store/control-logs.repository.js";
import type { Store } from "../store/db.js";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { emptyNodeStateCounts, nodePage, nodeScanBoundary, nodeStateCounts, tagsOfNodes, type NodeListFilter, type NodeListPosition } from "../store/node-list.repository.js";
import { decodeCursor, encodeCursor } from "./list-cursor.js";
import { requireConfig, requireNode } from "./node-lookup.js";
import { configView, nodeView } from "./views.js";

/**
 * The paginated lists, so that a fleet of thousands of nodes is read a page at a time
 * (docs/history/decisions-2026.md "lists for big fleets"): nodes of a config, configs, a node's
 * control logs. Each answers one keyset page of the
 * `*ListAnswer` shape of src/protocol/rest.schema.ts with `next_cursor` (null on the last page).
 * Every function throws AppError NOT_FOUND for an unknown config/node and INVALID_CURSOR (400)
 * for a cursor that is not this list's.
 */

type NodeListQuery = z.output<typeof nodeListQuery>;
type NodeFilterQuery = z.output<typeof nodeFilterQuery>;

function nodeFilter(query: NodeFilterQuery): NodeListFilter {
  return { presence: query.presence, mode: query.mode, sync: query.sync, q: query.q };
}

/**
 * Most index entries one filtered page request examines (docs/history/decisions-2026.md "lists for
 * big fleets"): a filter that matches few nodes would otherwise scan the whole config in one
 * statement. A page that reaches this bound before it is full is answered short (even empty),
 * with a `next_cursor` that continues the scan.
 */
export const NODE_SCAN_BUDGET = 2_000;

/** Nodes counted per statement by {@link countNodes}; the event loop runs between statements. */
export const NODE_COUNT_CHUNK = 5_000;

const hasFilter = (f: NodeListFilter) => f.presence !== undefined || f.mode !== undefined || f.sync !== undefined || (f.q !== undefined && f.q !== "");

/**
 * One page of a config's nodes in creation order (`created_at`, then `node_id`), filtered by
 * derived presence (spec §3.1), stored mode, derived sync state (spec §3.5) and text. The node
 * views are those of `GET …/nodes/{node_id}` (one derivation, spec §6.5 rule 7). A filtered page
 * examines at most {@link NODE_SCAN_BUDGET} nodes, so it may be short with a `next_cursor`.
 */
export async function listNodePage(store: Store, mqttEnabled: boolean, configId: string, query: NodeListQuery): Promise<z.output<typeof nodeListAnswer>> {
  await requireConfig(store.db, configId);
  const cursor = decodeCursor(nodeCursorSchema, query.cursor, (p) => p.c === configId);
  const after = cursor && { created_at: cursor.at, node_id: cursor.id };
  const filter = nodeFilter(query);
  const { until, rows, page, tags } = await store.read((conn) => {
    const until = hasFilter(filter) ? nodeScanBoundary(conn, configId, after, NODE_SCAN_BUDGET) : undefined;
    const rows = nodePage(conn, configId, filter, after, query.limit, mqttEnabled, until);
    const page = rows.slice(0, query.limit);
    return { until, rows, page, tags: tagsOfNodes(conn, page.map((r) => r.node.node_id)) };
  });
  const last = page[page.length - 1];
  // More rows matched than the page holds: continue after its last; else, a bounded scan that
  // stopped before the end continues after its bound; else this was the last page.
  const next: NodeListPosition | undefined = rows.length > query.limit && last !== undefined ? last.node : until;
  return {
    nodes: page.map((r) => nodeView(r.node, tags.get(r.node.node_id) ?? [], r.client, mqttEnabled)),
    next_cursor: next === undefined ? null : encodeCursor({ l: "nodes", c: configId, at: next.created_at, id: next.node_id }),
  };
}

/**
 * A config's nodes counted by derived presence, stored mode and derived sync state, and how many
 * match the filter. Counted {@link NODE_COUNT_CHUNK} nodes per statement, yielding to the event
 * loop between them: at 100,000 nodes no statement holds it for long, and the counts are a sum
 * over ranges read one after the other (a write between two ranges may show in one of them).
 */
export async function countNodes(store: Store, mqttEnabled: boolean, configId: string, query: NodeFilterQuery): Promise<z.output<typeof nodeCountsAnswer>> {
  await requireConfig(store.db, configId);
  const filter = nodeFilter(query);
  const counts = emptyNodeStateCounts();
  let after: NodeListPosition | undefined;
  for (;;) {
    const from = after;
    const until = await store.read((conn) => {
      const end = nodeScanBoundary(conn, configId, from, NODE_COUNT_CHUNK);
      nodeStateCounts(conn, configId, filter, mqttEnabled, { after: from, until: end }, counts);
      return end;
    });
    if (until === undefined) return counts;
    after = until;
    await yieldToEventLoop();
  }
}

/** One page of configs in creation order, with how many there are and how many match `q`. */
export async function listConfigPage(store: Store, query: z.output<typeof configListQuery>): Promise<z.output<typeof configListAnswer>> {
  const after = decodeCursor(configCursorSchema, query.cursor);
  const [rows, counts] = await Promise.all([
    configPage(store.db, query.q, after && { created_at: after.at, config_id: after.id }, query.limit),
    countConfigs(store.db, query.q),
  ]);
  const page = rows.slice(0, query.limit);
  const last = page[page.length - 1];
  return {
    configs: page.map(configView),
    next_cursor: rows.length > query.limit && last !== undefined ? encodeCursor({ l: "configs", at: last.created_at, id: last.config_id }) : null,
    ...counts,
  };
}

/** One page of a node's control logs, newest first, with the node's rows counted by kind. */
export async function listControlLogPage(
  store: Store,
  configId: string,
  nodeId: string,
  query: z.output<typeof controlLogListQuery>,
): Promise<z.output<typeof controlLogListAnswer>> {
  await requireNode(store.db, configId, nodeId);
  const after = decodeCursor(controlLogCursorSchema, query.cursor, (p) => p.n === nodeId);
  const [rows, counts] = await Promise.all([
    controlLogPage(store.db, nodeId, { kind: query.kind, status: query.status }, after && { log_id: after.id }, query.limit),
    countControlLogsByKind(store.db, nodeId),
  ]);
  const page = rows.slice(0, query.limit);
  const last = page[page.length - 1];
  const logs: ControlLogView[] = page.map(controlLogView);
  return {
    logs,
    next_cursor:
      rows.length > query.limit && last !== undefined ? encodeCursor({ l: "control_logs", n: nodeId, id: last.log_id }) : null,
    counts,
  };
}
