/**
 * The mesh page's writes: nodes (add, bulk push and delete), pairs, the protocol switch and the
 * bulk config package. Each puts the answer it holds into the cache at once; what else changed
 * arrives through the stream.
 */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api, ApiError, errorMessage } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import type { ConfigDetailView, CreateNodeBody, LinkMatrixAnswer, MeshPairListAnswer, MeshPairView, NodeView, TunnelProtocol } from "../../api/types.js";

/** `POST /api/v1/configs/{id}/nodes`; the node joins the cached detail. */
export function useCreateNode(configId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: CreateNodeBody) => api.createNode({ params: { config_id: configId }, body }),
    onSuccess: (node) =>
      queryClient.setQueryData<ConfigDetailView>(keys.config(configId), (old) =>
        old && !old.nodes.some((n) => n.node_id === node.node_id) ? { ...old, nodes: [...old.nodes, node] } : old,
      ),
  });
}

/** `PATCH /api/v1/configs/{id}` with the new protocol; the detail reads again (every node is re-rendered). */
export function useSwitchProtocol(configId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (tunnel_protocol: TunnelProtocol) => api.updateConfig({ params: { config_id: configId }, body: { tunnel_protocol } }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: keys.config(configId), exact: true }),
  });
}

/** `POST /api/v1/tools/download/config-bulk/package` for this config: a 5-minute download link. */
export function useConfigPackage(configId: string) {
  return useMutation({ mutationFn: () => api.buildConfigPackage({ body: { config_ids: [configId] } }) });
}

/** Runs `what` for each node in turn; the failures, one line per node name. */
async function eachNode(nodes: readonly NodeView[], what: (n: NodeView) => Promise<unknown>): Promise<string[]> {
  const failures: string[] = [];
  for (const n of nodes) {
    try {
      await what(n);
    } catch (err) {
      failures.push(`${n.name}: ${errorMessage(err)}`);
    }
  }
  return failures;
}

/** `POST …/control {action: "push_config"}` to each node, one request per node; the failures by name. */
export function usePushConfigToNodes(configId: string) {
  return useMutation({
    mutationFn: (nodes: readonly NodeView[]) =>
      eachNode(nodes, (n) => api.sendControlCommand({ params: { config_id: configId, node_id: n.node_id }, body: { action: "push_config" } })),
  });
}

/**
 * `DELETE …/nodes/{node_id}` for each node; the detail and the node table read again. A node
 * another operator deleted meanwhile (NOT_FOUND) counts as deleted: what was asked holds.
 */
export function useDeleteNodes(configId: string) {
  const queryClient = useQueryClient();
  const deleteNode = (n: NodeView) =>
    api.deleteNode({ params: { config_id: configId, node_id: n.node_id } }).catch((err: unknown) => {
      if (!(err instanceof ApiError && err.code === "NOT_FOUND")) throw err;
    });
  return useMutation({
    mutationFn: (nodes: readonly NodeView[]) => eachNode(nodes, deleteNode),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: keys.config(configId), exact: true });
      void queryClient.invalidateQueries({ queryKey: keys.nodeLists(configId) });
    },
  });
}

/** The cached pair list with `pair` replaced (or removed when `next` is null). */
function usePairInCache(pair: MeshPairView) {
  const queryClient = useQueryClient();
  return (next: MeshPairView | null) =>
    queryClient.setQueryData<MeshPairListAnswer>(keys.pairs(pair.config_id), (old) =>
      old && { ...old, mesh_pairs: next === null ? old.mesh_pairs.filter((p) => p.pair_id !== pair.pair_id) : old.mesh_pairs.map((p) => (p.pair_id === pair.pair_id ? next : p)) },
    );
}

/** `PATCH …/mesh-pairs/{pair_id}` toggling `enabled`; the answer replaces the cached pair. */
export function useTogglePair(pair: MeshPairView) {
  const replace = usePairInCache(pair);
  return useMutation({
    mutationFn: () => api.updateMeshPair({ params: { config_id: pair.config_id, pair_id: pair.pair_id }, body: { enabled: !pair.enabled } }),
    onSuccess: replace,
  });
}

/** `DELETE …/mesh-pairs/{pair_id}`; the pair leaves the cached list. */
export function useDeletePair(pair: MeshPairView) {
  const replace = usePairInCache(pair);
  return useMutation({
    mutationFn: () => api.deleteMeshPair({ params: { config_id: pair.config_id, pair_id: pair.pair_id } }),
    onSuccess: () => replace(null),
  });
}

/** `POST /api/v1/configs/{id}/mesh-pairs`; the pair joins the cached list. */
export function useCreatePair(configId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (pair: { node_a: string; node_b: string }) => api.createMeshPair({ params: { config_id: configId }, body: pair }),
    onSuccess: (pair) =>
      queryClient.setQueryData<MeshPairListAnswer>(keys.pairs(configId), (old) =>
        old && !old.mesh_pairs.some((p) => p.pair_id === pair.pair_id) ? { ...old, mesh_pairs: [...old.mesh_pairs, pair] } : old,
      ),
  });
}

/**
 * `POST /api/v1/configs/{id}/links/refresh`: asks every online bound host for its peers and
 * answers once each reported or timed out; the matrix it holds replaces the cached one.
 */
export function useRefreshLinks(configId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => api.refreshConfigLinks({ params: { config_id: configId } }),
    onSuccess: (answer) => queryClient.setQueryData<LinkMatrixAnswer>(keys.links(configId), { config_id: answer.config_id, links: answer.links, drift: answer.drift }),
  });
}
