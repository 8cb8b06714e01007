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
import { useQuery, useQueryClient, type QueryClient, type QueryKey } from "@tanstack/react-query";
import { useEffect, useMemo, useRef } from "react";
import { useSseEvent } from "../sse/provider.js";
import { apiFetch } from "./client.js";
import { withEndpointStatus } from "./node-status.js";
import { queryKeys } from "./queries.js";
import type {
  ConfigDetailView,
  ConfigListAnswer,
  MeshPairListAnswer,
  NodeView,
  PortForwardListAnswer,
  StagedConfigAnswer,
} from "./types.js";

/** Keys of this module's projections (all under the config's key, so deleting a config drops them). */
export const meshKeys = {
  pairs: (configId: string) => ["configs", configId, "mesh-pairs"] as const,
  stagedConfig: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "staged-config"] as const,
  portForwards: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "port-forwards"] as const,
};

const enc = encodeURIComponent;

/** `GET /api/v1/configs`; replaced by `config.list.updated` (its payload is the list). */
export function useConfigs() {
  const queryClient = useQueryClient();
  useSseEvent("config.list.updated", (payload) => queryClient.setQueryData<ConfigListAnswer>(queryKeys.configs, { configs: payload.configs }));
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
 * refetch, not one per event: the 200 events/s of the console benchmark). Returns `mark(key)`.
 */
export function useCoalescedInvalidate(windowMs = 250): (key: QueryKey) => void {
  const queryClient = useQueryClient();
  const pending = useRef(new Map<string, QueryKey>());
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(
    () => () => {
      if (timer.current !== null) clearTimeout(timer.current);
    },
    [],
  );
  return useMemo(
    () => (key: QueryKey) => {
      pending.current.set(JSON.stringify(key), key);
      if (timer.current !== null) return;
      timer.current = setTimeout(() => {
        timer.current = null;
        const keys = [...pending.current.values()];
        pending.current.clear();
        for (const k of keys) void queryClient.invalidateQueries({ queryKey: k, exact: true });
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
 * Keeps the config `configId` (detail, pairs, and a node's staged config/port forwards when
 * `nodeId` is given) live while mounted. Events of other configs are ignored (rule 7).
 */
export function useLiveConfig(configId: string, nodeId?: string) {
  const queryClient = useQueryClient();
  const invalidate = useCoalescedInvalidate();
  useSseEvent("config.overview.updated", (p) => {
    if (p.config_id !== configId) return;
    queryClient.setQueryData<ConfigDetailView>(queryKeys.config(configId), p.overview);
  });
  useSseEvent("node.workspace.updated", (p) => {
    if (p.config_id !== configId) return;
    if (!patchNode(queryClient, configId, p.node_id, () => p.workspace)) invalidate(queryKeys.config(configId));
  });
  useSseEvent("endpoint.status.updated", (p) => {
    if (p.config_id !== configId) return;
    if (!patchNode(queryClient, configId, p.node_id, (n) => withEndpointStatus(n, p.status))) invalidate(queryKeys.config(configId));
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
