import { z } from "zod";
import type { SystemStatus } from "../../services/notifier.js";
import type { App } from "../app.js";
import { errorResponses } from "../schemas.js";

/** `GET /api/v1/system/status`: the `system.status.updated` payload (DESIGN §5). */
export async function systemRoutes(app: App, opts: { status: () => Promise<SystemStatus> }): Promise<void> {
  app.get(
    "/api/v1/system/status",
    {
      schema: {
        tags: ["system"],
        summary: "Summary, services, sync, topology and version (the system.status.updated payload)",
        response: {
          200: z.object({
            summary: z.object({ configs: z.number(), nodes: z.number(), dynamic_nodes: z.number(), online: z.number(), dropped: z.number() }),
            services: z.object({ mqtt: z.object({ enabled: z.boolean(), broker: z.string(), connected: z.boolean() }) }),
            sync: z.object({ latest: z.number(), pending: z.number() }),
            topology: z.object({ mesh_pairs: z.number() }),
            update: z.object({ version: z.string() }),
          }),
          ...errorResponses(),
        },
      },
    },
    async () => opts.status(),
  );
}
