import type { App } from "../route-kit.js";
import { healthAnswer } from "../../protocol/rest.schema.js";
import { VERSION } from "../../lib/version.js";
import { errorBodySchema } from "../schemas.js";

/** `GET /api/v1/health` (no auth): liveness and the server version. */
export async function healthRoutes(app: App): Promise<void> {
  app.get(
    "/api/v1/health",
    {
      config: { auth: "public" },
      schema: {
        operationId: "getHealth",
        tags: ["system"],
        summary: "Liveness and server version (no auth)",
        security: [],
        // No 401: nothing is asked of the caller. A malformed request is still refused (400).
        response: { 200: healthAnswer, 400: errorBodySchema, 500: errorBodySchema },
      },
    },
    async () => ({ status: "ok" as const, version: VERSION }),
  );
}
