/**
 * The backend as the chaos run starts it (`scripts/chaos-lib.ts`): exactly `src/main.ts`'s
 * start (settings from the environment, the real server, SQLite under SVC_DATA_DIR, one JSON
 * "listening" line), except that CHAOS_ONLINE_TTL_MS, when set, replaces the online TTL. The
 * setting `SVC_ONLINE_TTL_S` refuses anything under the 30-minute heartbeat (spec §6.4 rule 7);
 * the chaos run's stand-in agents heartbeat every second or two, so its TTL is seconds too and
 * presence convergence can be measured inside a run (docs/history/decisions-2026.md "chaos and resource faults").
 * SIGTERM closes the service in order; the chaos run mostly ends it with SIGKILL.
 */
import { loadSettings } from "../src/config.js";
import { createLogger } from "../src/logger.js";
import { createServer } from "../src/server.js";

async function main(): Promise<void> {
  const loaded = loadSettings();
  const ttl = Number(process.env["CHAOS_ONLINE_TTL_MS"] ?? "");
  const settings = Number.isInteger(ttl) && ttl > 0 ? { ...loaded, onlineTtlMs: ttl } : loaded;
  const log = createLogger(settings.logLevel);
  const server = await createServer(settings, log);
  const address = await server.app.listen({ host: settings.httpHost, port: settings.httpPort });
  // The harness waits for this line whatever SVC_LOG_LEVEL is (the chaos run logs at warn).
  process.stdout.write(`${JSON.stringify({ msg: "listening", url: new URL(address).origin })}\n`);
  let closing = false;
  process.on("SIGTERM", () => {
    if (closing) return;
    closing = true;
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos-backend: start-up failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
