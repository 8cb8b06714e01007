/**
 * What the mesh page reads (and the static node page, which shows its node inside the config).
 * Kept current by the SSE cache table (`sse/cache-effects.ts`): the config's overview replaces
 * its detail, node views and client states patch its node rows, anything else refetches what it
 * concerns.
 */
import { keepPreviousData, useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import type { NodeFilterQuery } from "../../api/types.js";
import { useStreamWasLive } from "../../sse/provider.js";

/** Rows per page of the mesh page's nodes table. */
export const NODE_PAGE_SIZE = 100;

/** `GET /api/v1/configs/{id}`: the config with its nodes and tags. */
export function useConfigDetail(configId: string) {
  return useQuery({ queryKey: keys.config(configId), queryFn: ({ signal }) => api.getConfig({ params: { config_id: configId }, signal }) });
}

/**
 * `GET /api/v1/configs/{id}/nodes` page by page: the server filters, orders (creation order) and
 * pages with a cursor; `fetchNextPage` loads the next page as the table scrolls. While new
 * filters load, the previous rows stay on screen.
 */
export function useNodePages(configId: string, filters: NodeFilterQuery) {
  return useInfiniteQuery({
    queryKey: keys.nodePages(configId, filters),
    queryFn: ({ pageParam, signal }) =>
      api.listNodes({ params: { config_id: configId }, query: { ...filters, limit: NODE_PAGE_SIZE, ...(pageParam === null ? {} : { cursor: pageParam }) }, signal }),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_cursor,
    placeholderData: keepPreviousData,
  });
}

/** `GET /api/v1/configs/{id}/node-counts`: the config's nodes by state, and how many match `filters`. */
export function useNodeCounts(configId: string, filters: NodeFilterQuery) {
  return useQuery({
    queryKey: keys.nodeCounts(configId, filters),
    queryFn: ({ signal }) => api.countNodes({ params: { config_id: configId }, query: filters, signal }),
    placeholderData: keepPreviousData,
  });
}

/** `GET /api/v1/configs/{id}/mesh-pairs`: pairs with their connection integrity (spec §2.4). */
export function useMeshPairs(configId: string) {
  return useQuery({ queryKey: keys.pairs(configId), queryFn: ({ signal }) => api.listMeshPairs({ params: { config_id: configId }, signal }) });
}

/**
 * `GET /api/v1/configs/{id}/timeline/latest`: the newest recorded transition of each node of the
 * config, as a map `node_id → row` (a node with none is absent), once the stream is live.
 */
export function useLatestTransitions(configId: string) {
  const live = useStreamWasLive();
  return useQuery({
    queryKey: keys.latestTransitions(configId),
    queryFn: ({ signal }) => api.getLatestTransitions({ params: { config_id: configId }, signal }),
    select: (answer) => new Map(answer.transitions.map((r) => [r.node_id, r])),
    enabled: live,
  });
}

/** `GET /api/v1/configs/{id}/links`: every configured pair's measured link state and the config's drift (docs/links.md). */
export function useConfigLinks(configId: string) {
  return useQuery({ queryKey: keys.links(configId), queryFn: ({ signal }) => api.getConfigLinks({ params: { config_id: configId }, signal }) });
}
