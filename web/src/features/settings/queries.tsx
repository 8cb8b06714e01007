/** The MQTT settings form. */
import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** `GET /api/v1/settings/mqtt`; replaced by every `settings.mqtt.updated`. */
export function useMqttSettings() {
  return useQuery({ queryKey: keys.mqttSettings, queryFn: ({ signal }) => api.getMqttSettings({ signal }) });
}
