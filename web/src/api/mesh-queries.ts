/**
 * Queries and live updates of the configs page, the mesh page and the static node page (issue 12).
 * Kept apart from `queries.ts` so the pages can grow without touching the shared file; the keys
 * are the shared `queryKeys` where one exists, so an invalidation from any page reaches them.
 *
 * Live rules (spec §6.5 rule 7, docs/console.md): a payload that *is* the projection patches the
 * cache (`config.overview.updated` carries the config detail, `node.workspace.updated` a node
 * view, `endpoint.status.updated` the node's client state as the backend computed it); anything
 * else invalidates the one key it concerns, and only for the config on screen. Nothing here
 * computes presence, sync or integrity: every field shown is a field the backend sent.
 */
import { keepPreviousData, useInfiniteQuery, useQuery, useQueryClient, type InfiniteData, type QueryClient, type QueryKey } from "@tanstack/react-query";
import { useEffect, useMemo, useRef } from "react";
import { useSseEvent } from "../sse/provider.js";
import { apiFetch } from "./client.js";
import { withEndpointStatus } from "./node-status.js";
import { configListOf, queryKeys } from "./queries.js";
import type {
  ConfigDetailView,
  ConfigListAnswer,
  MeshPairListAnswer,
  NodeCountsAnswer,
  NodeFilterQuery,
  NodeListAnswer,
  NodeView,
  PortForwardListAnswer,
  StagedConfigAnswer,
} from "./types.js";

/** Keys of this module's projections (all under the config's key, so deleting a config drops them). */
export const meshKeys = {
  pairs: (configId: string) => ["configs", configId, "mesh-pairs"] as const,
  stagedConfig: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "staged-config"] as const,
  portForwards: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "port-forwards"] as const,
  /** Every page list and count of the config's nodes (a prefix: invalidates all filters at once). */
  nodeLists: (configId: string) => ["configs", configId, "node-lists"] as const,
  nodePages: (configId: string, filters: NodeFilterQuery) => ["configs", configId, "node-lists", "pages", filters] as const,
  nodeCounts: (configId: string, filters: NodeFilterQuery) => ["configs", configId, "node-lists", "counts", filters] as const,
};

/** Rows per page of the mesh page's nodes table (issue 14 item 5). */
export const NODE_PAGE_SIZE = 100;

/** The query string of a node filter: only the fields that filter. */
function filterParams(filters: NodeFilterQuery): URLSearchParams {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(filters)) if (typeof value === "string" && value !== "") params.set(key, value);
  return params;
}

/**
 * `GET /api/v1/configs/{id}/nodes` page by page (issue 14 item 5): the server filters, orders
 * (creation order) and pages with a cursor; `fetchNextPage` loads the next page as the table
 * scrolls. While new filters load, the previous rows stay on screen.
 */
export function useNodePages(configId: string, filters: NodeFilterQuery) {
  return useInfiniteQuery({
    queryKey: meshKeys.nodePages(configId, filters),
    queryFn: ({ pageParam, signal }) => {
      const params = filterParams(filters);
      params.set("limit", String(NODE_PAGE_SIZE));
      if (pageParam !== null) params.set("cursor", pageParam);
      return apiFetch<NodeListAnswer>(`/api/v1/configs/${enc(configId)}/nodes?${params}`, { signal });
    },
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_cursor,
    placeholderData: keepPreviousData,
  });
}

/** `GET /api/v1/configs/{id}/node-counts`: the config's nodes by state, and how many match `filters`. */
export function useNodeCounts(configId: string, filters: NodeFilterQuery) {
  return useQuery({
    queryKey: meshKeys.nodeCounts(configId, filters),
    queryFn: ({ signal }) => apiFetch<NodeCountsAnswer>(`/api/v1/configs/${enc(configId)}/node-counts?${filterParams(filters)}`, { signal }),
    placeholderData: keepPreviousData,
  });
}

const enc = encodeURIComponent;

/** `GET /api/v1/configs`; replaced by `config.list.updated` (its payload is the list). */
export function useConfigs() {
  const queryClient = useQueryClient();
  useSseEvent("config.list.updated", (payload) => queryClient.setQueryData<ConfigListAnswer>(queryKeys.configs, configListOf(payload.configs)));
  return useQuery({ queryKey: queryKeys.configs, queryFn: ({ signal }) => apiFetch<ConfigListAnswer>("/api/v1/configs", { signal }) });
}

/** `GET /api/v1/configs/{id}`: the config with its nodes and tags. */
export function useConfigDetail(configId: string) {
  return useQuery({
    queryKey: queryKeys.config(configId),
    queryFn: ({ signal }) => apiFetch<ConfigDetailView>(`/api/v1/configs/${enc(configId)}`, { signal }),
  });
}

/** `GET /api/v1/configs/{id}/mesh-pairs`: pairs with their connection integrity (spec §2.4). */
export function useMeshPairs(configId: string) {
  return useQuery({
    queryKey: meshKeys.pairs(configId),
    queryFn: ({ signal }) => apiFetch<MeshPairListAnswer>(`/api/v1/configs/${enc(configId)}/mesh-pairs`, { signal }),
  });
}

/** `GET …/nodes/{node_id}/config`: the staged config text. */
export function useStagedConfig(configId: string, nodeId: string, enabled = true) {
  return useQuery({
    queryKey: meshKeys.stagedConfig(configId, nodeId),
    queryFn: ({ signal }) => apiFetch<StagedConfigAnswer>(`/api/v1/configs/${enc(configId)}/nodes/${enc(nodeId)}/config`, { signal }),
    enabled,
  });
}

/** `GET …/nodes/{node_id}/port-forwards`. */
export function usePortForwards(configId: string, nodeId: string) {
  return useQuery({
    queryKey: meshKeys.portForwards(configId, nodeId),
    queryFn: ({ signal }) => apiFetch<PortForwardListAnswer>(`/api/v1/configs/${enc(configId)}/nodes/${enc(nodeId)}/port-forwards`, { signal }),
  });
}

/**
 * Invalidates keys at most once per `windowMs` (a burst of events for one config becomes one
 * refetch, not one per event: the 200 events/s of the console benchmark). Returns `mark(key)`;
 * `mark(key, false)` invalidates every query under the key (a prefix), not only the key itself.
 */
export function useCoalescedInvalidate(windowMs = 250): (key: QueryKey, exact?: boolean) => void {
  const queryClient = useQueryClient();
  const pending = useRef(new Map<string, { key: QueryKey; exact: boolean }>());
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(
    () => () => {
      if (timer.current !== null) clearTimeout(timer.current);
    },
    [],
  );
  return useMemo(
    () => (key: QueryKey, exact = true) => {
      pending.current.set(`${exact}${JSON.stringify(key)}`, { key, exact });
      if (timer.current !== null) return;
      timer.current = setTimeout(() => {
        timer.current = null;
        const keys = [...pending.current.values()];
        pending.current.clear();
        for (const k of keys) void queryClient.invalidateQueries({ queryKey: k.key, exact: k.exact });
      }, windowMs);
    },
    [queryClient, windowMs],
  );
}

/** Replaces one node of the cached config detail (same order); no-op when the detail is not cached. */
function patchNode(queryClient: QueryClient, configId: string, nodeId: string, patch: (n: NodeView) => NodeView): boolean {
  let found = false;
  queryClient.setQueryData<ConfigDetailView>(queryKeys.config(configId), (old) => {
    if (old === undefined) return old;
    const i = old.nodes.findIndex((n) => n.node_id === nodeId);
    if (i < 0) return old;
    found = true;
    const nodes = old.nodes.slice();
    nodes[i] = patch(old.nodes[i]!);
    return { ...old, nodes };
  });
  return found;
}

/**
 * Replaces one node in every cached page list of the config (any filters); false when no page
 * holds it. A patched row stays where it is even if it no longer matches the filter: the next
 * refetch (the counts are invalidated with it) decides.
 */
function patchNodePages(queryClient: QueryClient, configId: string, nodeId: string, patch: (n: NodeView) => NodeView): boolean {
  let found = false;
  queryClient.setQueriesData<InfiniteData<NodeListAnswer, string | null>>({ queryKey: [...meshKeys.nodeLists(configId), "pages"] }, (old) => {
    if (old === undefined) return old;
    let changed = false;
    const pages = old.pages.map((page) => {
      const i = page.nodes.findIndex((n) => n.node_id === nodeId);
      if (i < 0) return page;
      changed = true;
      const nodes = page.nodes.slice();
      nodes[i] = patch(page.nodes[i]!);
      return { ...page, nodes };
    });
    if (!changed) return old;
    found = true;
    return { ...old, pages };
  });
  return found;
}

/**
 * Keeps the config `configId` (detail, pairs, and a node's staged config/port forwards when
 * `nodeId` is given) live while mounted. Events of other configs are ignored (rule 7).
 */
export function useLiveConfig(configId: string, nodeId?: string) {
  const queryClient = useQueryClient();
  const invalidate = useCoalescedInvalidate();
  // The nodes table's pages and counts (issue 14 item 5): a row in a loaded page is patched in
  // place; anything that may add, remove or move rows refetches them (coalesced). Counts pass
  // over the whole config (0.4 s of server time at 100,000 nodes): at most one refetch per 2 s.
  const invalidateCounts = useCoalescedInvalidate(2_000);
  useSseEvent("config.overview.updated", (p) => {
    if (p.config_id !== configId) return;
    queryClient.setQueryData<ConfigDetailView>(queryKeys.config(configId), p.overview);
    invalidate(meshKeys.nodeLists(configId), false);
  });
  useSseEvent("node.workspace.updated", (p) => {
    if (p.config_id !== configId) return;
    if (!patchNode(queryClient, configId, p.node_id, () => p.workspace)) invalidate(queryKeys.config(configId));
    patchNodePages(queryClient, configId, p.node_id, () => p.workspace);
    invalidateCounts([...meshKeys.nodeLists(configId), "counts"], false);
  });
  useSseEvent("endpoint.status.updated", (p) => {
    if (p.config_id !== configId) return;
    if (!patchNode(queryClient, configId, p.node_id, (n) => withEndpointStatus(n, p.status))) invalidate(queryKeys.config(configId));
    patchNodePages(queryClient, configId, p.node_id, (n) => withEndpointStatus(n, p.status));
    invalidateCounts([...meshKeys.nodeLists(configId), "counts"], false);
  });
  useSseEvent("mesh.workspace.updated", (p) => {
    if (p.config_id !== configId) return;
    invalidate(meshKeys.pairs(configId));
  });
  useSseEvent("node.apply.updated", (p) => {
    if (p.config_id !== configId) return;
    if (nodeId !== undefined && p.node_id === nodeId) invalidate(meshKeys.stagedConfig(configId, nodeId));
  });
  useSseEvent("config.list.updated", (p) => {
    // The config was deleted elsewhere: its detail is gone too.
    if (!p.configs.some((c) => c.config_id === configId)) invalidate(queryKeys.config(configId));
  });
}

/** Port forwards have no event of their own: a port-forward write re-stages the node (node.apply.updated). */
export function useLivePortForwards(configId: string, nodeId: string) {
  const invalidate = useCoalescedInvalidate();
  useSseEvent("node.apply.updated", (p) => {
    if (p.config_id === configId && p.node_id === nodeId) invalidate(meshKeys.portForwards(configId, nodeId));
  });
  useSseEvent("node.workspace.updated", (p) => {
    if (p.config_id === configId && p.node_id === nodeId) invalidate(meshKeys.portForwards(configId, nodeId));
  });
}

/** Every mutation of these pages goes through here: JSON in, JSON out, errors as ApiError. */
export function meshApi<T>(method: "POST" | "PATCH" | "DELETE", path: string, body?: unknown): Promise<T> {
  return apiFetch<T>(path, { method, ...(body === undefined ? {} : { body }) });
}
