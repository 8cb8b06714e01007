import { join } from "node:path";
import { systemClock, type Clock } from "./clock.js";
import type { Settings } from "./config.js";
import { buildApp, type App } from "./http/app.js";
import type { Logger } from "./logger.js";
import { AuthService } from "./services/auth.service.js";
import { DownloadsService } from "./services/downloads.service.js";
import { MeshService } from "./services/mesh.service.js";
import { Store } from "./store/db.js";

/** The assembled service: HTTP app over one store. */
export interface Server {
  app: App;
  store: Store;
  auth: AuthService;
  mesh: MeshService;
  downloads: DownloadsService;
  /** The admin password generated at this start (first start without SVC_ADMIN_PASSWORD), else null. */
  generatedAdminPassword: string | null;
  /** Closes HTTP, then the store. */
  close(): Promise<void>;
}

/**
 * Builds every long-lived part from settings. Used by `main.ts` and by tests (with a
 * {@link ManualClock} and a temp data directory).
 * @param opts.dbFile overrides `{dataDir}/svc.db`
 * @throws Error when the database cannot be opened or migrated
 */
export async function createServer(settings: Settings, log: Logger, opts: { clock?: Clock; dbFile?: string } = {}): Promise<Server> {
  const clock = opts.clock ?? systemClock;
  const store = await Store.open(opts.dbFile ?? join(settings.dataDir, "svc.db"), log.child({ name: "store" }));
  try {
    const auth = new AuthService({ store, clock, sessionTtlMs: settings.adminSessionTtlMs });
    const generatedAdminPassword = await auth.ensureAdminPassword(settings.adminPassword);
    const mesh = new MeshService({ store, clock, mqttEnabled: settings.mqttEnabled });
    const downloads = new DownloadsService({ store, clock, tokenTtlMs: settings.downloadTokenTtlMs });
    const app = await buildApp({ settings, log, clock, auth, mesh, downloads });
    return {
      app,
      store,
      auth,
      mesh,
      downloads,
      generatedAdminPassword,
      async close() {
        await app.close();
        await store.close();
      },
    };
  } catch (err) {
    await store.close();
    throw err;
  }
}
