import type { NodeActorRegistry } from "../actors/registry.js";
import type { Clock } from "../clock.js";
import type { Settings } from "../config.js";
import type { EventHub } from "../events/hub.js";
import type { Logger } from "../logger.js";
import type { Store } from "../store/db.js";
import type { DownloadsService } from "./downloads.service.js";
import type { MeshService } from "./mesh.service.js";

export interface BackupsServiceDeps {
  settings: Settings;
  store: Store;
  clock: Clock;
  log: Logger;
  downloads: DownloadsService;
  mesh: MeshService;
  registry: NodeActorRegistry;
  hub: EventHub;
}

/** Snapshots and bulk config packages (spec §2.3, §2.4, §4 rows 7–9). Placeholder: issue 5 fills it in. */
export class BackupsService {
  constructor(readonly deps: BackupsServiceDeps) {}
}
