import { collectDefaultMetrics, Counter, Gauge, Registry } from "prom-client";
import type { NodeProjection } from "../actors/projection.js";
import type { EventHubMetrics } from "../events/hub.js";
import type { AppEvents } from "./app-events.js";
import { PRESENCE_STATES, RUNTIME_STATES, type FinalCommandStatus } from "../protocol/enums.js";

/**
 * Operational metrics in the Prometheus text exposition format (docs/history/decisions-2026.md "`GET /metrics`"), served by
 * `GET /metrics`. One prom-client {@link Registry} per service instance (never the global one,
 * so several services in one test process do not share counters).
 *
 * Everything that already exists as state is read at scrape time in the metric's `collect()`
 * (node projections, the router's counters, the SSE hub, the broker connection), so the MQTT
 * hot path does no extra work for metrics. Only the final status of commands comes in, as the
 * `command.finished` app event (one counter increment per closed command).
 *
 * Families (all names prefixed `svc_`; label values are the spec's wire words):
 * - `svc_nodes{effective_mode, client_presence_state, runtime_state}` gauge: nodes now, as every
 *   REST answer projects them (spec §1.7: dynamic nodes count as static while MQTT is off;
 *   spec §3.1/§3.3: a node without a bound client is offline/unknown).
 * - `svc_commands_total{action, status}` counter: commands to agents that reached a final status
 *   (`applied`, `failed`, `timed_out`; spec §3.4), by action (`start`, `stop`, `push_config`,
 *   `wg_show`, `detect`).
 * - `svc_mqtt_messages_total{direction}` counter: upstream messages received (`in`, every
 *   message the backend got, dropped or not) and downstream envelopes the broker took (`out`).
 * - `svc_mqtt_envelopes_dropped_total{reason}` counter: upstream messages dropped by the router.
 * - `svc_sse_subscribers` gauge, `svc_sse_events_published_total` and
 *   `svc_sse_subscribers_dropped_total` counters (spec §6.5).
 * - `svc_mqtt_enabled` and `svc_mqtt_broker_connected` gauges (0/1; spec §1.7, §1.8).
 * - prom-client's default process and Node.js metrics (`process_*`, `nodejs_*`).
 */

/** Where the metrics read their values; each is called once per scrape. */
export interface MetricsSources {
  /** spec §1.7 feature switch. */
  mqttEnabled: boolean;
  /** Every node's current projection (the actor registry). */
  nodes(): Iterable<{ projection: NodeProjection }>;
  /** Upstream messages received (the router's `received`). */
  received(): number;
  /** Downstream envelopes the broker took (the command tracker's `published`). */
  published(): number;
  /** Dropped upstream messages by reason (the router's `dropped`). */
  dropped(): ReadonlyMap<string, number>;
  /** The SSE hub's counters. */
  hub(): EventHubMetrics;
  /** Whether the backend's broker connection is up now. */
  brokerConnected(): boolean;
  /** The app events: each `command.finished` counts one closed command ({@link ServiceMetrics.commandFinished}). */
  events: AppEvents;
}

/** The final statuses of spec §3.4 a command can end in (declared in src/protocol/enums.ts). */
export type { FinalCommandStatus };

const PRESENCE = PRESENCE_STATES;
const RUNTIME = RUNTIME_STATES;

export class ServiceMetrics {
  /** The registry `/metrics` renders; exposed for tests and for adding families. */
  readonly registry = new Registry();
  readonly #commands: Counter<"action" | "status">;

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });

    new Gauge({
      name: "svc_nodes",
      help: "Nodes by effective mode, client presence state and runtime state (spec §1.7, §3.1, §3.3)",
      labelNames: ["effective_mode", "client_presence_state", "runtime_state"] as const,
      registers,
      collect() {
        this.reset();
        // Every dynamic combination, at 0 when empty, so series do not come and go.
        for (const presence of PRESENCE) {
          for (const runtime of RUNTIME) {
            this.set({ effective_mode: "dynamic", client_presence_state: presence, runtime_state: runtime }, 0);
          }
        }
        this.set({ effective_mode: "static", client_presence_state: "offline", runtime_state: "unknown" }, 0);
        for (const { projection: p } of sources.nodes()) {
          const dynamic = sources.mqttEnabled && p.mode === "dynamic";
          const bound = dynamic && p.clientInitialized;
          this.inc({
            effective_mode: dynamic ? "dynamic" : "static",
            client_presence_state: bound ? p.presence : "offline",
            runtime_state: bound ? p.runtime : "unknown",
          });
        }
      },
    });

    this.#commands = new Counter({
      name: "svc_commands_total",
      help: "Commands to agents that reached a final status (applied, failed, timed_out; spec §3.4), by action",
      labelNames: ["action", "status"] as const,
      registers,
    });

    new Counter({
      name: "svc_mqtt_messages_total",
      help: "MQTT messages: upstream received by the backend (in), downstream envelopes taken by the broker (out)",
      labelNames: ["direction"] as const,
      registers,
      collect() {
        this.reset();
        this.inc({ direction: "in" }, sources.received());
        this.inc({ direction: "out" }, sources.published());
      },
    });

    new Counter({
      name: "svc_mqtt_envelopes_dropped_total",
      help: "Upstream MQTT messages dropped by the router (malformed, foreign or for an unknown node), by reason",
      labelNames: ["reason"] as const,
      registers,
      collect() {
        this.reset();
        for (const [reason, n] of sources.dropped()) this.inc({ reason }, n);
      },
    });

    new Gauge({
      name: "svc_sse_subscribers",
      help: "Open console SSE streams (spec §6.5)",
      registers,
      collect() {
        this.set(sources.hub().subscribers);
      },
    });

    new Counter({
      name: "svc_sse_events_published_total",
      help: "SSE events published to at least one subscriber (spec §6.5)",
      registers,
      collect() {
        this.reset();
        this.inc(sources.hub().published);
      },
    });

    new Counter({
      name: "svc_sse_subscribers_dropped_total",
      help: "SSE subscribers dropped for not reading their stream",
      registers,
      collect() {
        this.reset();
        this.inc(sources.hub().dropped);
      },
    });

    new Gauge({
      name: "svc_mqtt_enabled",
      help: "1 when MQTT services are enabled (SVC_ENABLE_MQTT_SERVICES, spec §1.7), else 0",
      registers,
      collect() {
        this.set(sources.mqttEnabled ? 1 : 0);
      },
    });

    new Gauge({
      name: "svc_mqtt_broker_connected",
      help: "1 while the backend is connected to the broker, else 0 (always 0 with MQTT services disabled)",
      registers,
      collect() {
        this.set(sources.brokerConnected() ? 1 : 0);
      },
    });
    sources.events.on("command.finished", (action, status) => this.commandFinished(action, status));
  }

  /** Counts a command that reached its final status (`command.finished` from the command tracker). */
  commandFinished(action: string, status: FinalCommandStatus): void {
    this.#commands.inc({ action, status });
  }

  /** The `Content-Type` of {@link render}: Prometheus text format 0.0.4. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** Every family in the Prometheus text exposition format. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
