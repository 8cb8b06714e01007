/** Creating, changing and deleting configs: the list in the cache follows at once, before the stream confirms it. */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import { configListOf } from "../../api/patches.js";
import type { ConfigListAnswer, ConfigView, CreateConfigBody, UpdateConfigBody } from "../../api/types.js";

/** `POST /api/v1/configs`; the new config joins the cached list. */
export function useCreateConfig() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: CreateConfigBody) => api.createConfig({ body }),
    onSuccess: (config) =>
      queryClient.setQueryData<ConfigListAnswer>(keys.configs, (old) =>
        old && !old.configs.some((c) => c.config_id === config.config_id) ? configListOf([...old.configs, config]) : old,
      ),
  });
}

/** `DELETE /api/v1/configs/{config_id}`; the config leaves the cached list. */
export function useDeleteConfig() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (c: ConfigView) => api.deleteConfig({ params: { config_id: c.config_id } }),
    onSuccess: (_v, c) =>
      queryClient.setQueryData<ConfigListAnswer>(keys.configs, (old) => old && configListOf(old.configs.filter((x) => x.config_id !== c.config_id))),
  });
}

/** `PATCH /api/v1/configs/{config_id}`; the answer replaces the config in the cached list, and its detail reads again. */
export function useUpdateConfig() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ configId, body }: { configId: string; body: UpdateConfigBody }) => api.updateConfig({ params: { config_id: configId }, body }),
    onSuccess: (config) => {
      queryClient.setQueryData<ConfigListAnswer>(keys.configs, (old) => old && configListOf(old.configs.map((c) => (c.config_id === config.config_id ? config : c))));
      void queryClient.invalidateQueries({ queryKey: keys.config(config.config_id), exact: true });
    },
  });
}
