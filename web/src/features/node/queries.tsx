/**
 * What the node page reads: the node, its client's status and control log (dynamic nodes), its
 * staged config and port forwards (static nodes), its state machine and flight recorder. Kept
 * current by the SSE cache table (`sse/cache-effects.ts`); answers that must not miss an event
 * published while they load wait until the stream is live ({@link useStreamWasLive}).
 */
import { useInfiniteQuery, useQuery, useQueryClient } from "@tanstack/react-query";
import { useMemo } from "react";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import { logRank, type LiveLog, type LogRow } from "../../api/patches.js";
import { useStreamWasLive } from "../../sse/provider.js";

/** How many control log rows the page loads (the REST default; newest first). */
export const CONTROL_LOG_LIMIT = 100;
/** Rows per timeline page (the REST default is 50; 1..500). */
export const TIMELINE_PAGE = 20;

const ids = (configId: string, nodeId: string) => ({ config_id: configId, node_id: nodeId });

/** `GET /api/v1/configs/{id}/nodes/{node_id}`; replaced by its node view events, patched by its client's status. */
export function useNode(configId: string, nodeId: string) {
  return useQuery({ queryKey: keys.node(configId, nodeId), queryFn: ({ signal }) => api.getNode({ params: ids(configId, nodeId), signal }) });
}

/** `GET …/endpoint-status` (presence, runtime, sync; spec §3.1, §3.3, §3.5); replaced by `endpoint.status.updated`. */
export function useEndpointStatus(configId: string, nodeId: string) {
  const live = useStreamWasLive();
  return useQuery({
    queryKey: keys.endpointStatus(configId, nodeId),
    queryFn: ({ signal }) => api.getEndpointStatus({ params: ids(configId, nodeId), signal }),
    enabled: live,
  });
}

/**
 * The control log of a node: the REST snapshot (`GET …/control-logs`, taken once the stream is
 * live) merged with the rows `control.log.created` / `control.log.updated` brought while the
 * page is open (kept under `keys.controlLogLive`, dropped when the page closes), one row per
 * `log_id`: no duplicates, none lost across a reload. Of two reports of a row, the
 * further-advanced status wins (an event may arrive before or after the snapshot that holds it).
 * `add` puts a row the page itself caused (a command's answer) among them.
 */
export function useLiveControlLog(configId: string, nodeId: string) {
  const live = useStreamWasLive();
  const queryClient = useQueryClient();
  const query = useQuery({
    queryKey: keys.controlLogs(configId, nodeId),
    queryFn: ({ signal }) => api.listControlLogs({ params: ids(configId, nodeId), query: { limit: CONTROL_LOG_LIMIT }, signal }),
    enabled: live,
  });
  const liveKey = keys.controlLogLive(configId, nodeId);
  const reports = useQuery({
    queryKey: liveKey,
    // Not a REST answer: a refetch (a reconnect invalidates every query) keeps what was gathered.
    queryFn: () => queryClient.getQueryData<LiveLog>(liveKey) ?? new Map(),
    initialData: (): LiveLog => new Map(),
    gcTime: 0,
  }).data;

  const rows = useMemo(() => {
    const merged = new Map<number, LogRow>();
    for (const log of query.data?.logs ?? []) merged.set(log.log_id, { ...log, history: log.status === null ? [] : [log.status] });
    for (const [id, row] of reports ?? []) {
      const snap = merged.get(id);
      if (snap !== undefined && logRank(snap.status) > logRank(row.status)) continue;
      // Statuses the snapshot saw before the first one an event brought (a reload mid-command).
      const first = logRank(row.history[0] ?? null);
      const before = snap?.history.filter((st) => logRank(st) < first) ?? [];
      merged.set(id, { ...row, history: [...before, ...row.history] });
    }
    return [...merged.values()].sort((a, b) => b.log_id - a.log_id);
  }, [query.data, reports]);

  return { rows, error: query.isError ? query.error : null, loading: query.isPending };
}

/** `GET …/nodes/{node_id}/config`: the staged config text; read again after `node.apply.updated`. */
export function useStagedConfig(configId: string, nodeId: string, enabled = true) {
  return useQuery({ queryKey: keys.stagedConfig(configId, nodeId), queryFn: ({ signal }) => api.getStagedConfig({ params: ids(configId, nodeId), signal }), enabled });
}

/** `GET …/nodes/{node_id}/config/apps`: the config as each client app imports it; read again when the node is re-staged. */
export function useAppConfigs(configId: string, nodeId: string, enabled = true) {
  return useQuery({ queryKey: keys.appConfigs(configId, nodeId), queryFn: ({ signal }) => api.getNodeAppConfigs({ params: ids(configId, nodeId), signal }), enabled });
}

/** `GET …/nodes/{node_id}/port-forwards`; read again when the node is re-staged. */
export function usePortForwards(configId: string, nodeId: string) {
  return useQuery({ queryKey: keys.portForwards(configId, nodeId), queryFn: ({ signal }) => api.listPortForwards({ params: ids(configId, nodeId), signal }) });
}

/** `GET /api/v1/machines/node`: the statechart's structure (the same for every node; read once). */
export function useMachineGraph() {
  return useQuery({ queryKey: keys.machineGraph, queryFn: ({ signal }) => api.getNodeMachineGraph({ signal }) });
}

/** `GET …/nodes/{node_id}/machine`: the active state per region, once the stream is live. */
export function useNodeMachine(configId: string, nodeId: string) {
  const live = useStreamWasLive();
  return useQuery({ queryKey: keys.machine(configId, nodeId), queryFn: ({ signal }) => api.getNodeMachine({ params: ids(configId, nodeId), signal }), enabled: live });
}

/** `GET …/nodes/{node_id}/timeline?before=&limit=`: pages of recorded transitions, newest first. */
export function useNodeTimeline(configId: string, nodeId: string) {
  const live = useStreamWasLive();
  return useInfiniteQuery({
    queryKey: keys.timeline(configId, nodeId),
    queryFn: ({ signal, pageParam }) =>
      api.getNodeTimeline({ params: ids(configId, nodeId), query: { limit: TIMELINE_PAGE, ...(pageParam === null ? {} : { before: pageParam }) }, signal }),
    initialPageParam: null as number | null,
    getNextPageParam: (last) => last.next_before,
    enabled: live,
  });
}

/** `GET /api/v1/configs/{id}/nodes/{node}/peers`: the host's running peers as it last reported them, and its drift from the staged config. */
export function useNodePeers(configId: string, nodeId: string) {
  return useQuery({ queryKey: keys.nodePeers(configId, nodeId), queryFn: ({ signal }) => api.getNodePeers({ params: { config_id: configId, node_id: nodeId }, signal }) });
}
