import { z } from "zod";
import { digestsEqual, hashToken } from "../../domain/tokens.js";
import { AppError } from "../../errors.js";
import type { AuthService } from "../../services/auth.service.js";
import type { ServiceMetrics } from "../../services/metrics.js";
import { bearerToken, type App } from "../route-kit.js";
import { errorResponses } from "../schemas.js";

/**
 * `GET /api/v1/metrics` and its alias `GET /metrics` (docs/history/decisions-2026.md "`GET /metrics`" and
 * "`/api/v1/metrics` and `/api/v1/mcp`"): Prometheus text format 0.0.4. DESIGN §5 and spec §9 rule
 * 1 put every route under `/api/v1`; the root path stays because it is where Prometheus looks by
 * default. Only `/api/v1/metrics` is in the OpenAPI document; both answer the same.
 *
 * Authentication: `Authorization: Bearer <SVC_METRICS_TOKEN>` (a static credential for the
 * scraper, compared in constant time over SHA-256 digests), or an admin session's bearer token.
 * Without `SVC_METRICS_TOKEN` only admin sessions are accepted. Anything else: 401 UNAUTHORIZED.
 */
export async function metricsRoutes(
  app: App,
  opts: { metrics: ServiceMetrics; auth: AuthService; metricsToken: string | undefined },
): Promise<void> {
  const { metrics, auth } = opts;
  const expected = opts.metricsToken === undefined ? undefined : hashToken(opts.metricsToken);

  for (const [path, hide] of [
    ["/api/v1/metrics", false],
    ["/metrics", true],
  ] as const) {
    app.get(
      path,
      {
        // The global admin check would refuse the scraper's static token; this route checks both.
        config: { auth: "public" },
        onRequest: async (req) => {
          const presented = bearerToken(req);
          if (presented !== undefined && expected !== undefined && digestsEqual(hashToken(presented), expected)) return;
          try {
            await auth.verifyAccessToken(presented);
          } catch {
            throw new AppError("UNAUTHORIZED", "a metrics token or an admin bearer token is required");
          }
        },
        schema: {
          operationId: "getMetrics", "x-min-role": "viewer",
          hide,
          tags: ["system"],
          summary: "Prometheus metrics (text format 0.0.4): nodes, commands, MQTT messages and drops, SSE, broker",
          description:
            "Bearer SVC_METRICS_TOKEN (for scrapers) or an admin session token. Families: svc_nodes, svc_commands_total, " +
            "svc_mqtt_messages_total, svc_mqtt_envelopes_dropped_total, svc_sse_subscribers, svc_mqtt_broker_connected, " +
            "svc_mqtt_enabled, svc_sse_events_published_total, svc_sse_subscribers_dropped_total, process_*, nodejs_*.",
          response: {
            200: z.string().describe("text/plain; version=0.0.4 (Prometheus exposition format)"),
            ...errorResponses(),
          },
        },
      },
      async (_req, reply) => {
        const text = await metrics.render();
        return reply.type(metrics.contentType).header("cache-control", "no-store").send(text);
      },
    );
  }
}
