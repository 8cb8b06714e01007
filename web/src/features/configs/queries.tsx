/** The config list (configs page, home cards). */
import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** `GET /api/v1/configs` (one page: the whole list); replaced by every `config.list.updated`. */
export function useConfigs() {
  return useQuery({ queryKey: keys.configs, queryFn: ({ signal }) => api.listConfigs({ signal }) });
}
