import { z } from "zod";
import type { App } from "../app.js";
import { VERSION } from "../../version.js";

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
        response: { 200: z.object({ status: z.literal("ok"), version: z.string() }) },
      },
    },
    async () => ({ status: "ok" as const, version: VERSION }),
  );
}
