import type { MqttSettingsService } from "../../services/mqtt-settings.service.js";
import type { App } from "../route-kit.js";
import { mqttSettingsBody } from "../../protocol/rest.schema.js";
import { errorResponses, mqttSettingsResponse } from "../schemas.js";

/**
 * `GET, PUT /api/v1/settings/mqtt` (DESIGN §5; docs/history/decisions-2026.md "MQTT settings"), admin bearer token. The PUT is an
 * MQTT write API (spec §4 rule 14): 409 `MQTT_DISABLED` while MQTT services are disabled, marked
 * `x-mqtt-write` in the OpenAPI document.
 */
export async function settingsRoutes(app: App, opts: { mqttSettings: MqttSettingsService }): Promise<void> {
  const { mqttSettings } = opts;
  const tags = ["settings"];

  app.get(
    "/api/v1/settings/mqtt",
    {
      schema: {
        operationId: "getMqttSettings",
        tags,
        summary: "MQTT settings: the switch, the broker, what bind profiles tell agents (no secrets)",
        response: { 200: mqttSettingsResponse, ...errorResponses() },
      },
    },
    async () => mqttSettings.view(),
  );

  app.put(
    "/api/v1/settings/mqtt",
    {
      schema: {
        operationId: "updateMqttSettings",
        tags,
        summary: "Override public_host, public_port, public_tls_port of bind profiles (null: back to the environment)",
        description:
          "Stored in the database; wins over SVC_MQTT_PUBLIC_HOST/PORT/TLS_PORT from then on, across restarts. " +
          "Publishes settings.mqtt.updated {mqtt}. Profiles of agents already bound are not changed.",
        "x-mqtt-write": true,
        body: mqttSettingsBody,
        response: { 200: mqttSettingsResponse, ...errorResponses(409) },
      },
    },
    async (req) => mqttSettings.update(req.body),
  );
}
