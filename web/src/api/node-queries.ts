/**
 * Query keys and REST snapshots of the node page (static/dynamic dispatcher, initialization and
 * control pages) and the backups page (issue 12). Kept apart from `queries.ts` so the pages of
 * issue 12 merge without conflicts; the same rules apply (docs/console.md "Data").
 */
import { useQuery } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import { useSseStatus } from "../sse/provider.js";
import { ApiError, apiFetch, sessionEnded, tokenStore } from "./client.js";
import { queryKeys } from "./queries.js";
import type { ControlLogListAnswer, EndpointStatusView, NodeView, SnapshotEntry, SnapshotListAnswer } from "./types.js";

/** How many control log rows the page loads (the REST default; newest first). */
export const CONTROL_LOG_LIMIT = 100;

export const nodeKeys = {
  node: queryKeys.node,
  endpointStatus: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "endpoint-status"] as const,
  controlLogs: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId, "control-logs"] as const,
  backups: queryKeys.backups,
};

function nodePath(configId: string, nodeId: string): string {
  return `/api/v1/configs/${encodeURIComponent(configId)}/nodes/${encodeURIComponent(nodeId)}`;
}

/** `GET /api/v1/configs/:config_id/nodes/:node_id`. */
export function useNode(configId: string, nodeId: string) {
  return useQuery({
    queryKey: nodeKeys.node(configId, nodeId),
    queryFn: ({ signal }) => apiFetch<NodeView>(nodePath(configId, nodeId), { signal }),
  });
}

/**
 * True once the shared SSE stream has been live while the caller was mounted. A snapshot taken
 * after that point cannot miss an event published between the snapshot and the subscription
 * (the hub attaches the subscriber before the stream answers), so log rows are neither lost nor
 * doubled (issue 12 test 5).
 */
export function useStreamWasLive(): boolean {
  const status = useSseStatus();
  const [wasLive, setWasLive] = useState(status === "live");
  useEffect(() => {
    if (status === "live") setWasLive(true);
  }, [status]);
  return wasLive || status === "live";
}

/** `GET …/endpoint-status` (presence, runtime, sync; spec §3.1, §3.3, §3.5); patched by `endpoint.status.updated`. */
export function useEndpointStatus(configId: string, nodeId: string) {
  const live = useStreamWasLive();
  return useQuery({
    queryKey: nodeKeys.endpointStatus(configId, nodeId),
    queryFn: ({ signal }) => apiFetch<EndpointStatusView>(`${nodePath(configId, nodeId)}/endpoint-status`, { signal }),
    enabled: live,
  });
}

/** `GET …/control-logs` (newest first), once the stream is live; SSE log events add to it. */
export function useControlLogs(configId: string, nodeId: string) {
  const live = useStreamWasLive();
  return useQuery({
    queryKey: nodeKeys.controlLogs(configId, nodeId),
    queryFn: ({ signal }) => apiFetch<ControlLogListAnswer>(`${nodePath(configId, nodeId)}/control-logs?limit=${CONTROL_LOG_LIMIT}`, { signal }),
    enabled: live,
  });
}

/** `GET /api/v1/backups` (newest first); patched by `snapshot.list.updated`. */
export function useBackups() {
  return useQuery({
    queryKey: nodeKeys.backups,
    queryFn: ({ signal }) => apiFetch<SnapshotListAnswer>("/api/v1/backups", { signal }),
  });
}

/**
 * `POST /api/v1/backups/import` with the file as the raw body (`application/zip`). Errors as
 * {@link apiFetch}: ApiError with the server's message; a 401 ends the session.
 */
export async function importSnapshot(file: Blob): Promise<SnapshotEntry> {
  const token = tokenStore.get();
  let res: Response;
  try {
    res = await fetch("/api/v1/backups/import", {
      method: "POST",
      headers: { accept: "application/json", "content-type": "application/zip", ...(token === null ? {} : { authorization: `Bearer ${token}` }) },
      body: file,
    });
  } catch {
    throw new ApiError(0, "NETWORK", "The service cannot be reached. Check that it is running, then retry.");
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (!res.ok) {
    if (res.status === 401) sessionEnded();
    const error = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new ApiError(res.status, error?.code ?? `HTTP_${res.status}`, error?.message ?? `The service answered ${res.status}`);
  }
  return body as SnapshotEntry;
}

export { nodePath };
