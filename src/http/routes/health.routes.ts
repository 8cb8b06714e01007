import type { App } from "../app.js";
import { healthAnswer } from "../../protocol/rest.schema.js";
import { VERSION } from "../../lib/version.js";

/** `GET /api/v1/health` (no auth): liveness and the server version. */
export async function healthRoutes(app: App): Promise<void> {
  app.get(
    "/api/v1/health",
    {
      config: { auth: "public" },
      schema: {
        tags: ["system"],
        summary: "Liveness and server version (no auth)",
        security: [],
        response: { 200: healthAnswer },
      },
    },
    async () => ({ status: "ok" as const, version: VERSION }),
  );
}
