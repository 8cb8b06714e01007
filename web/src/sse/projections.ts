import { configListOf, queryKeys } from "../api/queries.js";
import { useSsePatch } from "./provider.js";

/**
 * Keeps the cached whole-console projections current whatever page is on screen: each of these
 * events carries the projection itself (spec §6.5 table), so its frame replaces the cached copy.
 * Queries never refetch on their own (`staleTime: Infinity`, docs/console.md), so a patch applied
 * only while its page is mounted would leave a page showing the state of when it was last open.
 * Mounted once, by the app shell.
 */
export function useProjectionPatches(): void {
  useSsePatch("system.status.updated", queryKeys.systemStatus, (payload) => payload);
  useSsePatch("config.list.updated", queryKeys.configs, (payload) => configListOf(payload.configs));
  useSsePatch("settings.mqtt.updated", queryKeys.mqttSettings, (payload) => payload.mqtt);
  useSsePatch("snapshot.list.updated", queryKeys.backups, (payload) => ({ snapshots: payload.snapshots }));
}
