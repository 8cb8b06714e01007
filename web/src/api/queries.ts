/**
 * Query keys and the REST snapshots pages read (TanStack Query). One key per projection, so an
 * SSE event can patch or invalidate exactly what it concerns (spec §6.5 rule 7). Add a page's
 * queries here.
 */
import { useQuery } from "@tanstack/react-query";
import { apiFetch } from "./client.js";
import type { ConfigListAnswer, MqttSettingsView, SystemStatus } from "./types.js";

export const queryKeys = {
  systemStatus: ["system", "status"] as const,
  mqttSettings: ["settings", "mqtt"] as const,
  configs: ["configs"] as const,
  config: (configId: string) => ["configs", configId] as const,
  node: (configId: string, nodeId: string) => ["configs", configId, "nodes", nodeId] as const,
  backups: ["backups"] as const,
};

/** `GET /api/v1/system/status`; patched by `system.status.updated` (see useLiveSystemStatus). */
export function useSystemStatus() {
  return useQuery({ queryKey: queryKeys.systemStatus, queryFn: ({ signal }) => apiFetch<SystemStatus>("/api/v1/system/status", { signal }) });
}

/** `GET /api/v1/settings/mqtt`; patched by `settings.mqtt.updated`. */
export function useMqttSettings() {
  return useQuery({ queryKey: queryKeys.mqttSettings, queryFn: ({ signal }) => apiFetch<MqttSettingsView>("/api/v1/settings/mqtt", { signal }) });
}

/**
 * A whole config list as `GET /api/v1/configs` answers it (one page, no next): what an SSE
 * `config.list.updated` payload or a local edit puts into the cache.
 */
export function configListOf(configs: ConfigListAnswer["configs"]): ConfigListAnswer {
  return { configs, next_cursor: null, total: configs.length, matching: configs.length };
}

/**
 * `GET /api/v1/configs` (`{configs}`); pages keep it current with
 * `useSsePatch("config.list.updated", queryKeys.configs, (p) => ({ configs: p.configs }))`.
 */
export function useConfigs() {
  return useQuery({ queryKey: queryKeys.configs, queryFn: ({ signal }) => apiFetch<ConfigListAnswer>("/api/v1/configs", { signal }) });
}
