/**
 * Query keys and REST snapshots of the node page's "State machine" tab (issue 13 item 4): the
 * node statechart (`GET /api/v1/machines/node`), a node's live state (`GET …/machine`) and its
 * flight recorder (`GET …/timeline`, newest first, paged with `before`). The same rules as
 * `queries.ts` apply (docs/console.md "Data"): no timers; the SSE stream says when to refetch.
 */
import { useInfiniteQuery, useQuery, useQueryClient } from "@tanstack/react-query";
import { useSseEvent } from "../sse/provider.js";
import { apiFetch } from "./client.js";
import { useCoalescedInvalidate } from "./mesh-queries.js";
import { nodePath, useStreamWasLive } from "./node-queries.js";
import type { ConfigLatestTransitions, MachineGraph, NodeMachineView, NodeTimeline } from "./types.js";

/** Rows per timeline page (the REST default is 50; 1..500). */
export const TIMELINE_PAGE = 20;

export const machineKeys = {
  graph: ["machines", "node"] as const,
  machine: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "machine"] as const,
  timeline: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "timeline"] as const,
};

/** `GET /api/v1/machines/node`: the statechart's structure (the same for every node; read once). */
export function useMachineGraph() {
  return useQuery({ queryKey: machineKeys.graph, queryFn: ({ signal }) => apiFetch<MachineGraph>("/api/v1/machines/node", { signal }) });
}

/** `GET …/nodes/:node_id/machine`: the active state per region, once the stream is live. */
export function useNodeMachine(configId: string, nodeId: string) {
  const live = useStreamWasLive();
  return useQuery({
    queryKey: machineKeys.machine(configId, nodeId),
    queryFn: ({ signal }) => apiFetch<NodeMachineView>(`${nodePath(configId, nodeId)}/machine`, { signal }),
    enabled: live,
  });
}

/** `GET …/nodes/:node_id/timeline?before=&limit=`: pages of recorded transitions, newest first. */
export function useNodeTimeline(configId: string, nodeId: string) {
  const live = useStreamWasLive();
  return useInfiniteQuery({
    queryKey: machineKeys.timeline(configId, nodeId),
    queryFn: ({ signal, pageParam }) =>
      apiFetch<NodeTimeline>(`${nodePath(configId, nodeId)}/timeline?limit=${TIMELINE_PAGE}${pageParam === null ? "" : `&before=${pageParam}`}`, { signal }),
    initialPageParam: null as number | null,
    getNextPageParam: (last) => last.next_before,
    enabled: live,
  });
}

/**
 * While mounted: `endpoint.status.updated` for this node (emitted after every recorded presence,
 * runtime, sync or client-version change, docs/decisions.md "Issue 13: flight recorder")
 * refetches its `/machine` and `/timeline`. The browser never derives a state itself.
 */
export function useLiveMachine(configId: string, nodeId: string): void {
  const queryClient = useQueryClient();
  useSseEvent("endpoint.status.updated", (payload) => {
    if (payload.config_id !== configId || payload.node_id !== nodeId) return;
    void queryClient.invalidateQueries({ queryKey: machineKeys.machine(configId, nodeId), exact: true });
    void queryClient.invalidateQueries({ queryKey: machineKeys.timeline(configId, nodeId), exact: true });
  });
}

// ---- issue 13 item 5: watch a whole config (the mesh page) ----

/** Query key of a config's newest transition per node. */
export const latestTransitionsKey = (configId: string) => ["configs", configId, "timeline", "latest"] as const;

/**
 * `GET /api/v1/configs/:config_id/timeline/latest`: the newest recorded transition of each node of
 * the config, as a map `node_id → row` (a node with none is absent), once the stream is live.
 */
export function useLatestTransitions(configId: string) {
  const live = useStreamWasLive();
  return useQuery({
    queryKey: latestTransitionsKey(configId),
    queryFn: ({ signal }) => apiFetch<ConfigLatestTransitions>(`/api/v1/configs/${encodeURIComponent(configId)}/timeline/latest`, { signal }),
    select: (answer) => new Map(answer.transitions.map((r) => [r.node_id, r])),
    enabled: live,
  });
}

/**
 * While mounted: `endpoint.status.updated` of this config (emitted after every recorded presence,
 * runtime, sync or client-version change) refetches the newest transitions, coalesced like the
 * mesh page's other refetches (one refetch per 250 ms window, however many nodes moved).
 */
export function useLiveLatestTransitions(configId: string): void {
  const invalidate = useCoalescedInvalidate();
  useSseEvent("endpoint.status.updated", (payload) => {
    if (payload.config_id === configId) invalidate(latestTransitionsKey(configId));
  });
}
