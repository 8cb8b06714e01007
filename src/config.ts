import { z } from "zod";

/**
 * Settings of the service, parsed once from the environment (DESIGN §6). This is the only
 * module that reads `process.env`. A value that fails validation stops start-up with one line
 * naming the variable and the rule ({@link SettingsError}).
 *
 * Times are in milliseconds unless the name says otherwise.
 */

const boolText = z
  .enum(["true", "false", "1", "0", "yes", "no"])
  .transform((v) => v === "true" || v === "1" || v === "yes");

const port = (allowZero: boolean) =>
  z.coerce
    .number()
    .int("must be an integer")
    .min(allowZero ? 0 : 1, allowZero ? "must be 0..65535" : "must be 1..65535")
    .max(65535, "must be 0..65535");

const seconds = z.coerce.number().int("must be an integer number of seconds").positive("must be > 0");

const envSchema = z.object({
  SVC_HTTP_HOST: z.string().min(1).default("0.0.0.0"),
  SVC_HTTP_PORT: port(true).default(8080),
  SVC_PUBLIC_URL: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).optional(),
  SVC_DATA_DIR: z.string().min(1).default("./data"),
  SVC_ADMIN_PASSWORD: z.string().min(8, "must be at least 8 characters").max(1024).optional(),
  SVC_ENABLE_MQTT_SERVICES: boolText.default(true),
  SVC_LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  SVC_ADMIN_SESSION_TTL_S: seconds.default(12 * 3600),
  SVC_DOWNLOAD_TOKEN_TTL_S: seconds.default(300),
  SVC_MAX_BODY_BYTES: z.coerce.number().int().min(1024).max(64 * 1024 * 1024).default(1024 * 1024),
});

/** The parsed, frozen settings object passed down from `main.ts`. */
export interface Settings {
  readonly httpHost: string;
  /** TCP port of the REST/SSE listener; 0 picks a free one. */
  readonly httpPort: number;
  /** `{base_url}` of the spec: put into bind commands, profiles and download paths. Without trailing slash. */
  readonly publicUrl: string;
  /** Directory for the SQLite file and generated files. */
  readonly dataDir: string;
  /** Admin password from the environment; undefined means "generate once and print". */
  readonly adminPassword: string | undefined;
  /** spec §1.7 feature switch. */
  readonly mqttEnabled: boolean;
  readonly logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Lifetime of an admin bearer token, ms. */
  readonly adminSessionTtlMs: number;
  /** Lifetime of a download token, ms (spec §8: 5 minutes). */
  readonly downloadTokenTtlMs: number;
  /** Largest accepted request body, bytes. */
  readonly maxBodyBytes: number;
}

/** Raised when the environment holds an invalid setting; its message is one line. */
export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SettingsError";
  }
}

/**
 * Parses settings from an environment map.
 * @throws SettingsError naming the first invalid variable and its rule.
 */
export function loadSettings(env: Record<string, string | undefined> = process.env): Settings {
  // Empty strings count as unset, as in most deployment tools.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue?.path[0] ?? "environment");
    throw new SettingsError(`invalid setting ${name}: ${issue?.message ?? "invalid value"}`);
  }
  const e = parsed.data;
  const port = e.SVC_HTTP_PORT === 0 ? 8080 : e.SVC_HTTP_PORT;
  const publicUrl = (e.SVC_PUBLIC_URL ?? `http://localhost:${port}`).replace(/\/+$/, "");
  return Object.freeze({
    httpHost: e.SVC_HTTP_HOST,
    httpPort: e.SVC_HTTP_PORT,
    publicUrl,
    dataDir: e.SVC_DATA_DIR,
    adminPassword: e.SVC_ADMIN_PASSWORD,
    mqttEnabled: e.SVC_ENABLE_MQTT_SERVICES,
    logLevel: e.SVC_LOG_LEVEL,
    adminSessionTtlMs: e.SVC_ADMIN_SESSION_TTL_S * 1000,
    downloadTokenTtlMs: e.SVC_DOWNLOAD_TOKEN_TTL_S * 1000,
    maxBodyBytes: e.SVC_MAX_BODY_BYTES,
  });
}

/** Settings for tests: defaults, overridden by `overrides`. */
export function testSettings(overrides: Partial<Settings> = {}): Settings {
  return Object.freeze({ ...loadSettings({}), logLevel: "silent" as const, ...overrides });
}
