import { z } from "zod";
import { AppError } from "../../errors.js";
import type { EventHub } from "../../events/hub.js";
import type { AuthService } from "../../services/auth.service.js";
import { bearerToken, type App } from "../route-kit.js";
import { errorResponses } from "../schemas.js";

/**
 * `GET /api/v1/events/stream`: the console's realtime SSE stream (spec §6.5), admin bearer token
 * required (spec §5: `Authorization: Bearer <ACCESS_TOKEN>`; enforced by the app's global
 * onRequest hook, so a refused stream answers the usual error body and never reaches the hub).
 * The stream ends when that session logs out or expires (docs/history/decisions-2026.md "A stream lives no longer than its admin session").
 *
 * One session holds at most `opts.maxStreamsPerSession` open streams (`SVC_SSE_MAX_STREAMS_PER_SESSION`),
 * so a leaking tab cannot hold the hub's memory: one more answers 429 `RATE_LIMITED` before anything is hijacked.
 *
 * The reply is hijacked and served by {@link EventHub.attach}. A `preClose` hook closes the hub,
 * so `app.close()` ends open streams instead of waiting on them (spec §6.5 rule 4).
 */
export async function eventsRoutes(app: App, opts: { hub: EventHub; auth: AuthService; maxStreamsPerSession: number }): Promise<void> {
  const { hub, auth } = opts;

  app.addHook("preClose", async () => {
    await hub.close();
  });

  app.get(
    "/api/v1/events/stream",
    {
      // HEAD would open a stream that can never carry a frame.
      exposeHeadRoute: false,
      schema: {
        operationId: "streamEvents", "x-min-role": "viewer",
        tags: ["events"],
        summary: "Realtime console events (Server-Sent Events)",
        description: [
          "A `text/event-stream` of frames `id`, `event` (the event type) and `data`",
          '(JSON `{"type", "payload"}`), spec §6.5. The stream opens with `system.status.updated` and',
          "`system.clock.sync`, then carries a `system.clock.sync` about every 15 s and every event",
          "published after a database write. A reconnecting client may send `Last-Event-ID` to get",
          "the buffered frames it missed, right after the two opening events. Answers 503 while the service shuts down.",
        ].join(" "),
        headers: z.looseObject({
          "last-event-id": z
            .string()
            .optional()
            .describe("the id of the last frame received; buffered frames after it are replayed"),
        }),
        response: {
          200: z.string().describe("text/event-stream frames"),
          ...errorResponses(429, 503),
        },
      },
    },
    async (req, reply) => {
      // The stream lives no longer than the admin session it was opened with: logout
      // (AuthService.onSessionRevoked → hub.endSession) or expiry ends it. Throws UNAUTHORIZED
      // (answered normally, nothing hijacked yet) if the session ended since the auth hook.
      const session = await auth.session(bearerToken(req));
      // Checked and attached in one turn (attach adds the subscriber before its first await), so
      // concurrent opens cannot both pass the cap.
      assertStreamAllowed(hub, session.key, opts.maxStreamsPerSession);
      reply.hijack();
      const header = req.headers["last-event-id"];
      const attached = hub.attach(reply.raw, Array.isArray(header) ? header[header.length - 1] : header, {
        session: session.key,
        expiresAt: session.expiresAt,
      });
      // A logout between the lookup above and the attach found no stream to end: check again.
      if (!(await auth.sessionLive(session.key))) hub.endSession(session.key);
      await attached;
    },
  );
}

/**
 * Refuses one more stream of a session that holds `max` open ones.
 * @throws AppError RATE_LIMITED with details `{ open_streams, limit }`
 */
function assertStreamAllowed(hub: EventHub, session: string, max: number): void {
  const open = hub.sessionStreamCount(session);
  if (open < max) return;
  throw new AppError(
    "RATE_LIMITED",
    `this admin session already has ${open} open event streams (SVC_SSE_MAX_STREAMS_PER_SESSION=${max}); close one first`,
    { open_streams: open, limit: max },
  );
}
