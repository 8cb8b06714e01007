/** Saving the MQTT settings and the public URL. */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import type { MqttSettingsUpdate, ServerSettingsUpdate } from "../../api/types.js";

/** `PUT /api/v1/settings/mqtt` (a value overrides, `null` goes back to the environment); the answer is the new view. */
export function useSaveMqttSettings() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: MqttSettingsUpdate) => api.updateMqttSettings({ body }),
    onSuccess: (view) => queryClient.setQueryData(keys.mqttSettings, view),
  });
}

/** `PUT /api/v1/settings/server` (a URL stores it, `null` goes back to the default); the answer is the new view. */
export function useSaveServerSettings() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: ServerSettingsUpdate) => api.updateServerSettings({ body }),
    onSuccess: (view) => {
      queryClient.setQueryData(keys.serverSettings, view);
      // The MQTT public host follows the public URL's host unless it is set.
      void queryClient.invalidateQueries({ queryKey: keys.mqttSettings });
    },
  });
}
