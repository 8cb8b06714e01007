/** Personal access tokens: the caller's own (an owner's list: everyone's). */
import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** `GET /api/v1/tokens`: never the secrets. */
export function useAccessTokens() {
  return useQuery({ queryKey: keys.accessTokens, queryFn: ({ signal }) => api.listAccessTokens({ signal }) });
}
