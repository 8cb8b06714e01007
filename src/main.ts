import { loadSettings, SettingsError } from "./config.js";
import { createLogger, logFormatFor } from "./logger.js";
import { createServer } from "./server.js";
import { publicUrlNotice } from "./services/public-url.service.js";

/**
 * Entry point of `npm start`: backend with SQLite under SVC_DATA_DIR. Logs one line
 * `{"msg":"listening","url":...,"public_url":...}` once the HTTP listener is up, and a warning
 * when the public URL hosts are told is a loopback address. Log lines are JSON, or readable
 * lines when stdout is a terminal (`logFormatFor`), where the public URL is also printed as
 * sentences. Exits 2 on an invalid setting, 1 on any other start-up failure (for example a
 * failed migration).
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
  const format = logFormatFor(process.stdout);
  const log = createLogger(settings.logLevel, undefined, format);
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
  const publicUrl = server.publicUrl.view();
  log.info(
    { url: url.origin, public_url: publicUrl.public_url, public_url_source: publicUrl.source, mqtt_enabled: settings.mqttEnabled, mqtt_port: server.mqtt.broker?.port ?? null },
    "listening",
  );
  if (publicUrl.loopback) {
    log.warn({ public_url: publicUrl.public_url, public_url_source: publicUrl.source }, "the public URL is a loopback address: other hosts cannot reach the service through it");
  }
  if (format === "pretty") process.stdout.write(`\n  Console: ${url.origin}\n${publicUrlNotice(publicUrl).map((l) => `  ${l}\n`).join("")}\n`);

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
