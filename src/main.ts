import { loadSettings, SettingsError } from "./config.js";
import { createLogger } from "./logger.js";
import { createServer } from "./server.js";

/**
 * Entry point of `npm start`: backend with SQLite under SVC_DATA_DIR. Prints one JSON log line
 * `{"msg":"listening","url":...}` once the HTTP listener is up. Exits 2 on an invalid setting,
 * 1 on any other start-up failure (for example a failed migration).
 */
async function main(): Promise<void> {
  let settings;
  try {
    settings = loadSettings();
  } catch (err) {
    if (err instanceof SettingsError) {
      process.stderr.write(`svc: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(settings.logLevel);
  const server = await createServer(settings, log);
  if (server.generatedAdminPassword !== null) {
    // Shown once, on the terminal, never through the logger.
    process.stdout.write(
      `\n  Generated admin password (shown once; set SVC_ADMIN_PASSWORD to choose your own): ${server.generatedAdminPassword}\n\n`,
    );
  }
  const address = await server.app.listen({ host: settings.httpHost, port: settings.httpPort });
  const url = new URL(address);
  if (url.hostname === "0.0.0.0" || url.hostname === "[::]") url.hostname = "localhost";
  log.info(
    { url: url.origin, public_url: settings.publicUrl, mqtt_enabled: settings.mqttEnabled, mqtt_port: server.mqtt.broker?.port ?? null },
    "listening",
  );

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    log.info({ signal }, "shutting down");
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

main().catch((err: unknown) => {
  process.stderr.write(`svc: start-up failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
