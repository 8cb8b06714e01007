/** The Alerts page's reads (docs/alerts.md): the channels, the rules and the delivery log, admins only. */
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** Deliveries per page of the log (the API's default page). */
export const DELIVERY_PAGE = 50;

/** `GET /api/v1/alerts/channels`, by name, without secrets; `alert.channel.updated` puts each change in. */
export function useAlertChannels(enabled: boolean) {
  return useQuery({ queryKey: keys.alertChannels, queryFn: ({ signal }) => api.listAlertChannels({ signal }), enabled });
}

/** `GET /api/v1/alerts/rules`. */
export function useAlertRules(enabled: boolean) {
  return useQuery({ queryKey: keys.alertRules, queryFn: ({ signal }) => api.listAlertRules({ signal }), enabled });
}

/** The log's filters as the URL holds them (empty: not set). */
export interface DeliveryFilters {
  channel_id: string;
  status: string;
}

/**
 * `GET /api/v1/alerts/deliveries`: pages newest first, the next one by `next_cursor`; every
 * `alert.delivery.updated` reads them again (sse/cache-effects.ts).
 */
export function useAlertDeliveries(filters: DeliveryFilters, enabled: boolean) {
  const query: Record<string, string> = {};
  if (filters.channel_id !== "") query["channel_id"] = filters.channel_id;
  if (filters.status !== "") query["status"] = filters.status;
  return useInfiniteQuery({
    queryKey: keys.alertDeliveryPages(query),
    queryFn: ({ signal, pageParam }) => api.listAlertDeliveries({ query: { ...query, limit: DELIVERY_PAGE, ...(pageParam === null ? {} : { cursor: pageParam }) }, signal }),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_cursor,
    enabled,
  });
}
