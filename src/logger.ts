import { pino, type Logger } from "pino";
import pretty from "pino-pretty";

export type { Logger };

/**
 * Paths pino replaces with "[redacted]" in every log line: passwords, tokens, private keys,
 * config texts (which hold private keys) and snapshot passphrases never reach a log.
 */
export const REDACT_PATHS = [
  "password",
  "*.password",
  "access_token",
  "*.access_token",
  "download_token",
  "*.download_token",
  "bind_token",
  "*.bind_token",
  "private_key",
  "*.private_key",
  "config_text",
  "*.config_text",
  "passphrase",
  "*.passphrase",
  'req.headers["x-snapshot-passphrase"]',
  'headers["x-snapshot-passphrase"]',
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-svc-internal-key"]',
  "headers.authorization",
];

/**
 * How log lines are written: `pretty` (one coloured, readable line per record) for a person
 * watching a terminal, `json` (one JSON object per line) for everything else — pipes, files,
 * journald, container log drivers and shippers, which parse the lines.
 */
export type LogFormat = "pretty" | "json";

/** The format for a stdout: `pretty` only when it is a terminal (`isTTY`), else `json`. */
export function logFormatFor(stdout: { isTTY?: boolean }): LogFormat {
  return stdout.isTTY === true ? "pretty" : "json";
}

/**
 * Creates the root logger. Library code asks for named children:
 * `logger.child({ name: "http" })`. Redaction applies before either format is written.
 * @param level pino level, or "silent"
 * @param destination where lines go; stdout by default
 * @param format `json` (default) or `pretty` (see {@link logFormatFor})
 */
export function createLogger(level: string, destination?: pino.DestinationStream, format: LogFormat = "json"): Logger {
  const options = {
    level,
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    base: { service: "svc" },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (format === "pretty") {
    const stream = pretty({
      destination: destination ?? 1,
      sync: true,
      colorize: destination === undefined && pretty.isColorSupported,
      translateTime: "SYS:HH:MM:ss.l",
      ignore: "pid,hostname,service",
    });
    return pino(options, stream);
  }
  return pino(options, destination ?? pino.destination({ dest: 1, sync: true }));
}
