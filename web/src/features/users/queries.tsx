/** Users (owners only). */
import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** `GET /api/v1/users`, read only when `enabled` (the caller is an owner: anyone else is refused). */
export function useUsers(enabled: boolean) {
  return useQuery({ queryKey: keys.users, queryFn: ({ signal }) => api.listUsers({ signal }), enabled });
}
