/** The system status, read by most pages (the MQTT switch, versions, counts). */
import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** `GET /api/v1/system/status`; replaced by every `system.status.updated` (sse/cache-effects.ts). */
export function useSystemStatus() {
  return useQuery({ queryKey: keys.systemStatus, queryFn: ({ signal }) => api.getSystemStatus({ signal }) });
}
