import type { MqttSettingsService } from "../../services/mqtt-settings.service.js";
import type { PublicUrlService } from "../../services/public-url.service.js";
import type { App } from "../route-kit.js";
import { mqttSettingsBody, serverSettingsBody } from "../../protocol/rest.schema.js";
import { errorResponses, mqttSettingsResponse, serverSettingsResponse } from "../schemas.js";

/**
 * `GET, PUT /api/v1/settings/mqtt` (DESIGN §5; docs/history/decisions-2026.md "MQTT settings"), admin bearer token. The PUT is an
 * MQTT write API (spec §4 rule 14): 409 `MQTT_DISABLED` while MQTT services are disabled, marked
 * `x-mqtt-write` in the OpenAPI document. `GET, PUT /api/v1/settings/server`: the public URL
 * hosts are told (src/services/public-url.service.ts), admin bearer token.
 */
export async function settingsRoutes(app: App, opts: { mqttSettings: MqttSettingsService; publicUrl: PublicUrlService }): Promise<void> {
  const { mqttSettings, publicUrl } = opts;
  const tags = ["settings"];

  serverSettingsRoutes(app, publicUrl);

  app.get(
    "/api/v1/settings/mqtt",
    {
      schema: {
        operationId: "getMqttSettings", "x-min-role": "viewer",
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
        operationId: "updateMqttSettings", "x-min-role": "admin",
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

/** `GET, PUT /api/v1/settings/server`: the public URL hosts are told (src/services/public-url.service.ts). */
function serverSettingsRoutes(app: App, publicUrl: PublicUrlService): void {
  const tags = ["settings"];
  app.get(
    "/api/v1/settings/server",
    {
      schema: {
        operationId: "getServerSettings", "x-min-role": "viewer",
        tags,
        summary: "The public URL hosts are told (bind commands, profiles, download commands), where it comes from, whether it is loopback",
        response: { 200: serverSettingsResponse, ...errorResponses() },
      },
    },
    async () => publicUrl.view(),
  );

  app.put(
    "/api/v1/settings/server",
    {
      schema: {
        operationId: "updateServerSettings", "x-min-role": "admin",
        tags,
        summary: "Store the public URL hosts are told (null: back to the default http://localhost:{port})",
        description:
          "An http(s) URL of scheme, host and port only; a trailing slash is dropped. Stored in the database and used from the next " +
          "bind command or download on, across restarts. Refused with 409 SETTING_FROM_ENVIRONMENT while SVC_PUBLIC_URL is set " +
          "(the environment wins). Publishes settings.server.updated {server}. Profiles of agents already bound are not changed.",
        body: serverSettingsBody,
        response: { 200: serverSettingsResponse, ...errorResponses(409) },
      },
    },
    async (req) => publicUrl.update(req.body.public_url),
  );
}
