/** The snapshot list. */
import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** `GET /api/v1/backups` (newest first); replaced by every `snapshot.list.updated`. */
export function useBackups() {
  return useQuery({ queryKey: keys.backups, queryFn: ({ signal }) => api.listSnapshots({ signal }) });
}
