/** Saving the MQTT settings. */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import type { MqttSettingsUpdate } from "../../api/types.js";

/** `PUT /api/v1/settings/mqtt` (a value overrides, `null` goes back to the environment); the answer is the new view. */
export function useSaveMqttSettings() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: MqttSettingsUpdate) => api.updateMqttSettings({ body }),
    onSuccess: (view) => queryClient.setQueryData(keys.mqttSettings, view),
  });
}
