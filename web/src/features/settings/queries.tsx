/** The settings forms: MQTT and the public URL. */
import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";

/** `GET /api/v1/settings/mqtt`; replaced by every `settings.mqtt.updated`. */
export function useMqttSettings() {
  return useQuery({ queryKey: keys.mqttSettings, queryFn: ({ signal }) => api.getMqttSettings({ signal }) });
}

/**
 * `GET /api/v1/settings/server`: the public URL hosts are told, its source and whether it is
 * loopback; replaced by every `settings.server.updated`.
 */
export function useServerSettings() {
  return useQuery({ queryKey: keys.serverSettings, queryFn: ({ signal }) => api.getServerSettings({ signal }) });
}
