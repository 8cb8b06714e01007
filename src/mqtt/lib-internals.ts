import type { Aedes, Client } from "aedes";
import type { MqttClient } from "mqtt";

/**
 * The only places that reach into private internals of our MQTT libraries, each because the
 * public API has no equivalent. Pinned versions: aedes 1.2.0, mqtt (MQTT.js) 5.16.0.
 * `test/mqtt/lib-internals.test.ts` asserts that each internal exists and behaves as relied on
 * here, against the real libraries, so an upgrade that breaks one fails that test first.
 */

/** What MQTT.js 5.16 keeps privately for its reconnect loop (`build/lib/client.js`). */
interface MqttJsReconnectInternals {
  /** The pending reconnect interval (a `setInterval` handle); null while none is armed. */
  reconnectTimer: unknown;
  /** Clears {@link reconnectTimer}. */
  _clearReconnect(): void;
  /** Arms {@link reconnectTimer} with `options.reconnectPeriod` unless one is armed or the client is ending. */
  _setupReconnect(): void;
}

function mqttJsInternals(client: MqttClient): MqttJsReconnectInternals | null {
  const c = client as unknown as Partial<MqttJsReconnectInternals>;
  if (!("reconnectTimer" in c) || typeof c._clearReconnect !== "function" || typeof c._setupReconnect !== "function") return null;
  return c as MqttJsReconnectInternals;
}

/**
 * MQTT.js: replaces a pending reconnect attempt with one `periodMs` from now (and that period
 * for later attempts until the caller changes `options.reconnectPeriod` again). What MQTT.js's
 * own close handler does; its public `reconnect()` would instead connect at once and reset the
 * message stores. An attempt in flight (no timer armed) is left alone.
 * @param periodMs the new reconnect period, ms
 * @returns true when a pending attempt was re-armed; false when none was pending, or when this
 *   MQTT.js no longer has the internals (the client then keeps its own backoff)
 */
export function rearmMqttReconnect(client: MqttClient, periodMs: number): boolean {
  const internals = mqttJsInternals(client);
  if (internals === null || !internals.reconnectTimer) return false;
  internals._clearReconnect();
  client.options.reconnectPeriod = periodMs;
  internals._setupReconnect();
  return true;
}

/**
 * aedes: the live clients by client id (aedes 1.2 `broker.clients`, not in its types). A client
 * is in it from just before its CONNACK until its connection ends; a takeover replaces the
 * entry. aedes has no public lookup by id (`connectedClients` is only a count).
 * @returns the broker's own map (read it, never write it); an empty one if aedes lacks it
 */
export function aedesClients(broker: Aedes): Readonly<Record<string, Client | undefined>> {
  const clients = (broker as unknown as { clients?: unknown }).clients;
  return typeof clients === "object" && clients !== null ? (clients as Record<string, Client | undefined>) : {};
}

/**
 * aedes: listens to the broker's own `error` event (emitted for example from will housekeeping;
 * unhandled it would throw), which its types do not list among the events of `on`.
 */
export function onAedesError(broker: Aedes, listener: (err: unknown) => void): void {
  (broker as unknown as NodeJS.EventEmitter).on("error", listener);
}
