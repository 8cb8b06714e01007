import { z } from "zod";
import { isoTime } from "../../lib/clock.js";
import type { AuthService } from "../../services/auth.service.js";
import { bearerToken, type App } from "../route-kit.js";
import { loginAnswer } from "../../protocol/rest.schema.js";
import { errorResponses, loginBody } from "../schemas.js";
import type { GuessingRateLimit } from "./client.routes.js";

/** Admin login and logout (DESIGN §3 Admin auth, §5). */
export async function authRoutes(app: App, opts: { auth: AuthService; rateLimit: GuessingRateLimit }): Promise<void> {
  app.post(
    "/api/v1/auth/login",
    {
      config: { auth: "public", rateLimit: opts.rateLimit },
      schema: {
        operationId: "login",
        tags: ["auth"],
        summary: "Exchange a username (default admin) and password for a bearer access token",
        security: [],
        body: loginBody,
        response: {
          200: loginAnswer,
          ...errorResponses(429),
        },
      },
    },
    async (req) => {
      const { accessToken, expiresAt, expiresInMs } = await opts.auth.login(req.body.username, req.body.password);
      // Who signed in, for the audit log's entry of this public route.
      req.principal = await opts.auth.verifyAccessToken(accessToken);
      return { access_token: accessToken, token_type: "Bearer" as const, expires_at: isoTime(expiresAt), expires_in: Math.floor(expiresInMs / 1000) };
    },
  );

  app.post(
    "/api/v1/auth/logout",
    {
      schema: {
        operationId: "logout", "x-min-role": "viewer",
        tags: ["auth"],
        summary: "End the presented bearer token's session",
        response: { 204: z.null(), ...errorResponses() },
      },
    },
    async (req, reply) => {
      const token = bearerToken(req);
      if (token !== undefined) await opts.auth.logout(token);
      return reply.status(204).send(null);
    },
  );
}
