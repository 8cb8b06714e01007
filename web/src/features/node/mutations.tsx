/**
 * The node page's writes: control commands, reset, the mode change, the client download and bind
 * command (dynamic nodes); the download link, tags and port forwards (static nodes). Each puts the
 * answer it holds into the cache; what else changed arrives through the stream.
 */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import { withLogReport, withNode, type LiveLog } from "../../api/patches.js";
import type { ArtifactRequestBody, ConfigDetailView, ControlAction, CreatePortForwardBody, NodeView, PortForwardListAnswer, PortForwardView, UpdateNodeBody } from "../../api/types.js";

const ids = (configId: string, nodeId: string) => ({ config_id: configId, node_id: nodeId });

/** `POST …/control` (spec §6.3 actions); the command's log row joins the open control log at once. */
export function useSendControl(configId: string, nodeId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (action: ControlAction) => api.sendControlCommand({ params: ids(configId, nodeId), body: { action } }),
    onSuccess: (answer) => queryClient.setQueryData<LiveLog>(keys.controlLogLive(configId, nodeId), (old) => withLogReport(old ?? new Map(), answer.log)),
  });
}

/** `POST …/reset-client` (spec §4 rule 12); the node reads again (back to the initialization page). */
export function useResetClient(configId: string, nodeId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => api.resetClient({ params: ids(configId, nodeId) }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: keys.node(configId, nodeId), exact: true }),
  });
}

/** `PATCH …/nodes/{node_id}` to `mode: "static"` (spec §3.1); the answer is the node's view. */
export function useMakeStatic(configId: string, nodeId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => api.updateNode({ params: ids(configId, nodeId), body: { mode: "static" } }),
    onSuccess: (view) => queryClient.setQueryData(keys.node(configId, nodeId), view),
  });
}

/** The config's cached detail with `view` in place of its node (the static page reads the node from there). */
function useNodeInDetail(configId: string) {
  const queryClient = useQueryClient();
  return (view: NodeView) =>
    queryClient.setQueryData<ConfigDetailView>(keys.config(configId), (old) => {
      const nodes = old && withNode(old.nodes, view.node_id, () => view);
      return old && nodes ? { ...old, nodes } : old;
    });
}

/**
 * `PATCH …/nodes/{node_id}` with the changed fields (name, public address, listen port, interface
 * name); the answer replaces the node wherever the page reads it. A changed endpoint re-stages
 * its peers, which the stream reports.
 */
export function useUpdateNode(configId: string, nodeId: string) {
  const queryClient = useQueryClient();
  const inDetail = useNodeInDetail(configId);
  return useMutation({
    mutationFn: (body: UpdateNodeBody) => api.updateNode({ params: ids(configId, nodeId), body }),
    onSuccess: (view) => {
      queryClient.setQueryData(keys.node(configId, nodeId), view);
      inDetail(view);
    },
  });
}

/** `DELETE …/nodes/{node_id}`: the node with its pairs, port forwards and download links; the config's lists read again. */
export function useDeleteNode(configId: string, nodeId: string) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => api.deleteNode({ params: ids(configId, nodeId) }),
    // The node's own queries are left to expire: the page leaves it (removing them while it is
    // still shown would read the deleted node again).
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: keys.config(configId), exact: true });
      void queryClient.invalidateQueries({ queryKey: keys.nodeLists(configId) });
    },
  });
}

/** `PATCH …/nodes/{node_id}` with new tags; the answer replaces the node in the config's detail. */
export function useSaveTags(configId: string, nodeId: string) {
  const inDetail = useNodeInDetail(configId);
  return useMutation({
    mutationFn: (tags: string[]) => api.updateNode({ params: ids(configId, nodeId), body: { tags } }),
    onSuccess: inDetail,
  });
}

/** `POST /api/v1/tools/download/client-artifacts/download-grant` (spec §4 rule 6): the client zip behind a token link. */
export function useClientDownload() {
  return useMutation({ mutationFn: (body: ArtifactRequestBody) => api.grantClientArtifactDownload({ body }) });
}

/** `POST …/bind-command` (spec §3.6): the one-time command to run on the endpoint host. */
export function useBindCommand(configId: string, nodeId: string) {
  return useMutation({ mutationFn: () => api.issueBindCommand({ params: ids(configId, nodeId) }) });
}

/** `POST …/download-token`: a 5-minute link to the node's config file. */
export function useConfigDownload(configId: string, nodeId: string) {
  return useMutation({ mutationFn: () => api.grantNodeConfigDownload({ params: ids(configId, nodeId) }) });
}

/** Port forwards of a static node: create, enable/disable, delete; each answer goes into the cached list. */
export function usePortForwardWrites(configId: string, nodeId: string) {
  const queryClient = useQueryClient();
  const key = keys.portForwards(configId, nodeId);
  const edit = (fn: (list: PortForwardView[]) => PortForwardView[]) =>
    queryClient.setQueryData<PortForwardListAnswer>(key, (old) => old && { port_forwards: fn(old.port_forwards) });
  const forward = (pf: PortForwardView) => ({ ...ids(configId, nodeId), forward_id: pf.forward_id });
  const create = useMutation({
    mutationFn: (body: CreatePortForwardBody) => api.createPortForward({ params: ids(configId, nodeId), body }),
    onSuccess: (pf) => edit((list) => [...list.filter((x) => x.forward_id !== pf.forward_id), pf]),
  });
  const toggle = useMutation({
    mutationFn: (pf: PortForwardView) => api.updatePortForward({ params: forward(pf), body: { enabled: !pf.enabled } }),
    onSuccess: (pf) => edit((list) => list.map((x) => (x.forward_id === pf.forward_id ? pf : x))),
  });
  const remove = useMutation({
    mutationFn: (pf: PortForwardView) => api.deletePortForward({ params: forward(pf) }),
    onSuccess: (_v, pf) => edit((list) => list.filter((x) => x.forward_id !== pf.forward_id)),
  });
  return { create, toggle, remove };
}
