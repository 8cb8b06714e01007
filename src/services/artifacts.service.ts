import type { Clock } from "../clock.js";
import type { Settings } from "../config.js";
import type { Logger } from "../logger.js";
import type { Store } from "../store/db.js";
import type { DownloadsService } from "./downloads.service.js";

export interface ArtifactsServiceDeps {
  settings: Settings;
  store: Store;
  clock: Clock;
  log: Logger;
  downloads: DownloadsService;
}

/** Client artifacts (spec §2.2, §4 rules 2–7). Placeholder: issue 5 fills it in. */
export class ArtifactsService {
  constructor(readonly deps: ArtifactsServiceDeps) {}
}
