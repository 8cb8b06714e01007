import type { AuthService } from "../../services/auth.service.js";
import type { BackupsService } from "../../services/backups.service.js";
import type { ControlService } from "../../services/control.service.js";
import type { MeshService } from "../../services/mesh.service.js";
import type { App } from "../app.js";

/** The MCP server at /mcp (spec §4 rule 9). Placeholder: issue 5. */
export async function mcpRoutes(
  _app: App,
  _opts: { backups: BackupsService; mesh: MeshService; control: ControlService; auth: AuthService; publicUrl: string },
): Promise<void> {}
