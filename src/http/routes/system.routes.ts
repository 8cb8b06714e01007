import type { SystemStatus } from "../../services/notifier.js";
import type { App } from "../route-kit.js";
import { errorResponses, systemStatusResponse } from "../schemas.js";

/** `GET /api/v1/system/status`: the `system.status.updated` payload (DESIGN §5). */
export async function systemRoutes(app: App, opts: { status: () => Promise<SystemStatus> }): Promise<void> {
  app.get(
    "/api/v1/system/status",
    {
      schema: {
        operationId: "getSystemStatus", "x-min-role": "viewer",
        tags: ["system"],
        summary: "Summary, services, sync, topology and version (the system.status.updated payload)",
        response: {
          200: systemStatusResponse,
          ...errorResponses(),
        },
      },
    },
    async () => opts.status(),
  );
}
