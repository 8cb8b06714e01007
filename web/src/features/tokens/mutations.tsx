/** Creating and revoking personal access tokens: the cached list follows each answer at once. */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import type { AccessTokenListAnswer, AccessTokenView, CreateAccessTokenBody } from "../../api/types.js";

/**
 * `POST /api/v1/tokens`. The answer's secret stays in the mutation's result only (the page shows
 * it once and drops it with `reset()`); the list in the cache gets the view without it.
 */
export function useCreateAccessToken() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: CreateAccessTokenBody) => api.createAccessToken({ body }),
    onSuccess: ({ token: _secret, ...view }) =>
      queryClient.setQueryData<AccessTokenListAnswer>(keys.accessTokens, (old) => old && { tokens: [view, ...old.tokens.filter((t) => t.token_id !== view.token_id)] }),
  });
}

/** `DELETE /api/v1/tokens/{token_id}`: the token answers 401 from its next request; it leaves the cached list. */
export function useRevokeAccessToken() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (t: AccessTokenView) => api.revokeAccessToken({ params: { token_id: t.token_id } }),
    onSuccess: (_v, t) => queryClient.setQueryData<AccessTokenListAnswer>(keys.accessTokens, (old) => old && { tokens: old.tokens.filter((x) => x.token_id !== t.token_id) }),
  });
}
