import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { Clock } from "../lib/clock.js";
import { AppError } from "../errors.js";
import type { EventHub } from "../events/hub.js";
import type { Logger } from "../logger.js";
import type { mqttSettingsViewSchema } from "../protocol/views.schema.js";
import type { Store } from "../store/db.js";
import { getSetting, putSetting } from "../store/settings.repository.js";
import type { BrokerEndpoint } from "./control.service.js";

/**
 * MQTT settings (DESIGN §5 `GET, PUT /api/v1/settings/mqtt`; docs/history/decisions-2026.md "MQTT settings").
 *
 * The operator may override what bind profiles tell agents (spec §2.6 `mqtt.host`/`mqtt.port`):
 * `public_host`, `public_port` and `public_tls_port`. Overrides are kept in `settings_kv` under
 * {@link STORED_KEY} and win over the environment (`SVC_MQTT_PUBLIC_HOST`,
 * `SVC_MQTT_PUBLIC_PORT`, `SVC_MQTT_PUBLIC_TLS_PORT`) from the moment they are written, across
 * restarts, until set back to `null`. Everything else in the answer is read-only and comes from
 * the environment and the live broker connection. No answer ever carries a password or key.
 */

/** The `settings_kv` key holding the operator's overrides (JSON of {@link MqttOverrides}). */
export const STORED_KEY = "mqtt_public_endpoint";

/** What bind profiles tell agents: host name or IP, plain and TLS ports (1..65535). */
export interface MqttPublicEndpoint {
  public_host: string;
  public_port: number;
  public_tls_port: number;
}

/** The operator-editable fields; an absent field falls back to the environment. */
export type MqttOverrides = Partial<MqttPublicEndpoint>;

/**
 * A change: a value sets the override, `null` removes it (back to the environment), an absent
 * field is left as it is.
 */
export type MqttSettingsPatch = { [K in keyof MqttPublicEndpoint]?: MqttPublicEndpoint[K] | null };

/**
 * The answer of `GET`/`PUT /api/v1/settings/mqtt` and the `settings.mqtt.updated` payload's
 * `mqtt`: `mqtt_enabled` (spec §1.7 `SVC_ENABLE_MQTT_SERVICES`), `broker` (`SVC_MQTT_BROKER`),
 * `broker_connected` (the backend's broker connection is up now; always false with MQTT
 * disabled), `tls_enabled` (spec §1.9), `backend_username` (its password is never shown), the
 * editable {@link MqttPublicEndpoint} fields and the `sources` of each.
 */
export type MqttSettingsView = z.output<typeof mqttSettingsViewSchema>;

const port = z.number().int().min(1).max(65535);
const storedSchema = z.strictObject({
  public_host: z.string().min(1).max(253).optional(),
  public_port: port.optional(),
  public_tls_port: port.optional(),
});

const EDITABLE = ["public_host", "public_port", "public_tls_port"] as const;

export interface MqttSettingsDeps {
  store: Store;
  clock: Clock;
  hub: EventHub;
  log: Logger;
  mqttEnabled: boolean;
  /** `SVC_MQTT_BROKER`. */
  broker: string;
  backendUsername: string;
  tlsEnabled(): boolean;
  brokerConnected(): boolean;
  /**
   * The environment's values of the editable fields; called on every read, because the default
   * plain port may be the embedded broker's port, known only once it listens.
   */
  defaults(): MqttPublicEndpoint;
}

export class MqttSettingsService {
  readonly #d: MqttSettingsDeps;
  #overrides: MqttOverrides;

  private constructor(deps: MqttSettingsDeps, overrides: MqttOverrides) {
    this.#d = deps;
    this.#overrides = overrides;
  }

  /**
   * Reads the stored overrides. A stored value that no longer passes validation is logged and
   * ignored (the environment applies) rather than stopping the service.
   */
  static async load(deps: MqttSettingsDeps): Promise<MqttSettingsService> {
    const raw = await getSetting(deps.store.db, STORED_KEY);
    let overrides: MqttOverrides = {};
    if (raw !== undefined) {
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch {
        json = undefined;
      }
      const parsed = storedSchema.safeParse(json);
      if (parsed.success) overrides = stripUndefined(parsed.data);
      else deps.log.warn({ key: STORED_KEY }, "stored MQTT settings are invalid; using the environment's");
    }
    return new MqttSettingsService(deps, overrides);
  }

  /** The effective endpoint bind profiles carry now (overrides over the environment). */
  current(): MqttPublicEndpoint {
    const d = this.#d.defaults();
    return {
      public_host: this.#overrides.public_host ?? d.public_host,
      public_port: this.#overrides.public_port ?? d.public_port,
      public_tls_port: this.#overrides.public_tls_port ?? d.public_tls_port,
    };
  }

  /**
   * The broker endpoint bind profiles name: {@link current} (the operator's overrides over the
   * environment); with SVC_MQTT_TLS_ENABLED profiles prefer TLS and carry the CA (spec §1.9, §2.6).
   * @param profileCa the CA PEM of the broker link (undefined: the agent's system trust store)
   */
  brokerEndpoint(profileCa: string | undefined): BrokerEndpoint {
    const endpoint = this.current();
    if (!this.#d.tlsEnabled()) return { host: endpoint.public_host, port: endpoint.public_port, tls: false };
    return { host: endpoint.public_host, port: endpoint.public_tls_port, tls: true, ...(profileCa === undefined ? {} : { caCert: profileCa }) };
  }

  /** The settings answer; never holds a secret. */
  view(): MqttSettingsView {
    const src = (k: keyof MqttPublicEndpoint) => (this.#overrides[k] === undefined ? "environment" : "settings");
    return {
      mqtt_enabled: this.#d.mqttEnabled,
      broker: this.#d.broker,
      broker_connected: this.#d.mqttEnabled && this.#d.brokerConnected(),
      ...this.current(),
      tls_enabled: this.#d.tlsEnabled(),
      backend_username: this.#d.backendUsername,
      sources: { public_host: src("public_host"), public_port: src("public_port"), public_tls_port: src("public_tls_port") },
    };
  }

  /**
   * Applies a change, stores it, then (after the write committed) publishes
   * `settings.mqtt.updated` with `{mqtt}` (spec §6.5 rule 6). Bind profiles issued from then on
   * carry the new values; agents already bound keep theirs until they bind again.
   * @throws AppError MQTT_DISABLED while MQTT services are disabled (spec §1.7, §4 rule 14: an
   *   MQTT write API)
   */
  async update(patch: MqttSettingsPatch): Promise<MqttSettingsView> {
    if (!this.#d.mqttEnabled) {
      throw new AppError("MQTT_DISABLED", "MQTT services are disabled (SVC_ENABLE_MQTT_SERVICES=false)");
    }
    const next: MqttOverrides = { ...this.#overrides };
    for (const k of EDITABLE) {
      const v = patch[k];
      if (v === undefined) continue;
      if (v === null) delete next[k];
      else (next as Record<string, unknown>)[k] = v;
    }
    await putSetting(this.#d.store.db, STORED_KEY, JSON.stringify(next), this.#d.clock.now());
    this.#overrides = next;
    const view = this.view();
    this.#d.hub.publish("settings.mqtt.updated", { mqtt: view });
    return view;
  }
}

function stripUndefined(o: MqttOverrides): MqttOverrides {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as MqttOverrides;
}

/**
 * A secret generated once and kept in `settings_kv` under `key` (DESIGN §6 "generated and
 * stored"): the backend's broker password and the authz endpoint's shared key when the
 * environment sets none. 32 random bytes, base64url.
 */
export async function storedSecret(store: Store, clock: Clock, key: string): Promise<string> {
  const existing = await getSetting(store.db, key);
  if (existing !== undefined) return existing;
  const secret = randomBytes(32).toString("base64url");
  await putSetting(store.db, key, secret, clock.now());
  return secret;
}
