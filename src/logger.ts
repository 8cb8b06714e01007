import { pino, type Logger } from "pino";

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
 * Creates the root logger (JSON lines on stdout). Library code asks for named children:
 * `logger.child({ name: "http" })`.
 * @param level pino level, or "silent"
 * @param destination where lines go; stdout by default
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
      base: { service: "svc" },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? pino.destination({ dest: 1, sync: true }),
  );
}
