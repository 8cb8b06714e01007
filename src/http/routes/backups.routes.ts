import type { AuthService } from "../../services/auth.service.js";
import type { BackupsService } from "../../services/backups.service.js";
import type { DownloadsService } from "../../services/downloads.service.js";
import type { App } from "../app.js";

/** Snapshots and bulk config packages (spec §4, DESIGN §5). Placeholder: issue 5. */
export async function backupsRoutes(
  _app: App,
  _opts: { backups: BackupsService; downloads: DownloadsService; auth: AuthService },
): Promise<void> {}
