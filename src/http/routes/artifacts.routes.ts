import type { ArtifactsService } from "../../services/artifacts.service.js";
import type { AuthService } from "../../services/auth.service.js";
import type { DownloadsService } from "../../services/downloads.service.js";
import type { App } from "../app.js";

/** Client artifact build, download-grant and download (spec §4). Placeholder: issue 5. */
export async function artifactsRoutes(
  _app: App,
  _opts: { artifacts: ArtifactsService; downloads: DownloadsService; auth: AuthService },
): Promise<void> {}
