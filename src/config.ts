import { z } from "zod";
import { PASSWORD_SCRYPT_N } from "./domain/tokens.js";
import { ROLES, type Role } from "./protocol/roles.js";

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
  SVC_MQTT_BROKER: z.enum(["embedded", "emqx", "mosquitto"], { error: "must be embedded, emqx or mosquitto" }).default("embedded"),
  // External brokers (docs/history/decisions-2026.md "Broker wiring, reconciliation, start without a broker, Mosquitto")
  SVC_MQTT_URL: z.url({ protocol: /^mqtts?$/, error: "must be an mqtt:// or mqtts:// URL" }).default("mqtt://emqx-host:1883"),
  SVC_EMQX_API_URL: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).optional(),
  SVC_EMQX_API_KEY: z.string().min(1).max(1024).optional(),
  SVC_EMQX_API_SECRET: z.string().min(1).max(1024).optional(),
  SVC_MOSQUITTO_ADMIN_USERNAME: z.string().regex(/^[a-zA-Z0-9_.-]{1,64}$/, "must be 1-64 of [a-zA-Z0-9_.-]").default("svc-admin"),
  SVC_MOSQUITTO_ADMIN_PASSWORD: z.string().min(1).max(1024).optional(),
  SVC_MQTT_RECONNECT_MIN_MS: z.coerce.number().int().min(10).max(60_000).default(1000),
  SVC_MQTT_RECONNECT_MAX_MS: z.coerce.number().int().min(10).max(600_000).default(30_000),
  SVC_EMBEDDED_BROKER_HOST: z.string().min(1).default("0.0.0.0"),
  SVC_EMBEDDED_BROKER_PORT: port(true).default(1883),
  SVC_EMBEDDED_BROKER_THREAD: boolText.default(true),
  SVC_MQTT_PUBLIC_HOST: z.string().min(1).max(253).optional(),
  SVC_MQTT_PUBLIC_PORT: port(false).optional(),
  // TLS (spec §1.9, §2.6; docs/history/decisions-2026.md "TLS for MQTT")
  SVC_MQTT_TLS_ENABLED: boolText.default(false),
  SVC_EMBEDDED_BROKER_TLS_PORT: port(true).default(8883),
  SVC_MQTT_PUBLIC_TLS_PORT: port(false).optional(),
  SVC_MQTT_TLS_CERT_FILE: z.string().min(1).max(4096).optional(),
  SVC_MQTT_TLS_KEY_FILE: z.string().min(1).max(4096).optional(),
  SVC_MQTT_TLS_CA_FILE: z.string().min(1).max(4096).optional(),
  SVC_MQTT_CA_FILE: z.string().min(1).max(4096).optional(),
  SVC_MQTT_BACKEND_USERNAME: z.string().regex(/^[a-zA-Z0-9_.-]{1,64}$/, "must be 1-64 of [a-zA-Z0-9_.-]").default("svc-backend"),
  SVC_MQTT_BACKEND_PASSWORD: z.string().min(16, "must be at least 16 characters").max(1024).optional(),
  SVC_BROKER_AUTHZ_SHARED_KEY: z.string().min(16, "must be at least 16 characters").max(1024).optional(),
  SVC_ONLINE_TTL_S: seconds.min(1801, "must exceed the 30-minute heartbeat interval (spec §6.4 rule 7)").default(2700),
  SVC_DETECT_INTERVAL_S: seconds.default(120),
  SVC_DETECT_TIMEOUT_S: seconds.default(20),
  SVC_COMMAND_TIMEOUT_S: seconds.default(60),
  SVC_BIND_TOKEN_TTL_S: seconds.default(300),
  SVC_CONFIG_PUSH_DEBOUNCE_MS: z.coerce.number().int().min(0).max(60_000).default(2000),
  SVC_RELEASE_API_URL: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).default("https://api.github.com/repos/svc-mesh/svc"),
  SVC_RELEASE_DOWNLOAD_URL: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).default("https://github.com/svc-mesh/svc/releases/download"),
  SVC_MAX_SNAPSHOT_BYTES: z.coerce.number().int().min(1024 * 1024).max(64 * 1024 * 1024 * 1024).default(1024 * 1024 * 1024),
  SVC_CONTROL_LOG_RETENTION: z.coerce
    .number()
    .int("must be an integer number of rows")
    .min(1, "must be 1..1000000")
    .max(1_000_000, "must be 1..1000000")
    .default(1000),
  SVC_TIMELINE_MAX_PER_NODE: z.coerce
    .number()
    .int("must be an integer number of rows")
    .min(1, "must be 1..100000")
    .max(100_000, "must be 1..100000")
    .default(500),
  // Abuse limits (docs/history/decisions-2026.md "HTTP fuzzing and abuse limits")
  SVC_AUTH_RATE_LIMIT_MAX: z.coerce.number().int("must be an integer").min(1, "must be 1..100000").max(100_000, "must be 1..100000").default(20),
  SVC_HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int("must be an integer").min(1000, "must be 1000..3600000").max(3_600_000, "must be 1000..3600000").default(120_000),
  SVC_SSE_MAX_STREAMS_PER_SESSION: z.coerce.number().int("must be an integer").min(1, "must be 1..1000").max(1000, "must be 1..1000").default(8),
  SVC_AUDIT_RETENTION_DAYS: z.coerce.number().int("must be a whole number of days").min(1, "must be 1..36500").max(36_500, "must be 1..36500").default(365),
  SVC_METRICS_TOKEN: z.string().regex(/^[\x21-\x7e]{16,1024}$/, "must be 16-1024 printable characters without spaces").optional(),
  // Single sign-on through an OpenID provider (README "Single sign-on (OIDC)")
  SVC_OIDC_ISSUER: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).optional(),
  SVC_OIDC_CLIENT_ID: z.string().min(1).max(1024).optional(),
  SVC_OIDC_CLIENT_SECRET: z.string().min(1).max(4096).optional(),
  SVC_OIDC_GROUPS_CLAIM: z.string().min(1).max(256).default("groups"),
  SVC_OIDC_ROLE_MAP: z.string().max(16_384).optional(),
  SVC_OIDC_UNKNOWN_USERS: z.enum(["create", "refuse"], { error: "must be create or refuse" }).default("refuse"),
  SVC_OIDC_LABEL: z.string().trim().min(1).max(64).optional(),
  SVC_OIDC_SCOPES: z.string().regex(/^[\x21-\x7e]+( [\x21-\x7e]+)*$/, "must be scopes separated by single spaces").default("openid profile email"),
  // Alert delivery (docs/alerts.md)
  SVC_ALERTS_RETRY_SCHEDULE_S: z
    .string()
    .regex(/^\d+(\.\d+)?(,\d+(\.\d+)?){0,19}$/, "must be 1-20 comma-separated numbers of seconds, e.g. 1,2,5")
    .default("5,300,1800,7200,18000,36000,36000"),
  SVC_ALERTS_DISABLE_AFTER_H: z.coerce.number().positive("must be > 0").max(8760, "must be at most 8760 hours").default(24),
  SVC_ALERTS_ALLOW_PRIVATE_TARGETS: boolText.default(false),
  SVC_ALERTS_CONCURRENCY: z.coerce.number().int("must be an integer").min(1, "must be 1..64").max(64, "must be 1..64").default(4),
  SVC_ALERTS_GROUP_WINDOW_S: z.coerce.number().int("must be an integer").min(1, "must be 1..3600").max(3600, "must be 1..3600").default(30),
});

/** The parsed, frozen settings object passed down from `main.ts`. */
export interface Settings {
  readonly httpHost: string;
  /** TCP port of the REST/SSE listener; 0 picks a free one. */
  readonly httpPort: number;
  /**
   * `{base_url}` of the spec as the environment gives it (SVC_PUBLIC_URL, else
   * `http://localhost:{port}`), without trailing slash. What hosts are told at run time is the
   * public URL service's (src/services/public-url.service.ts): a value stored in Settings
   * replaces the default, never an SVC_PUBLIC_URL.
   */
  readonly publicUrl: string;
  /** Whether {@link publicUrl} came from SVC_PUBLIC_URL (it then wins over a stored value) or is the default. */
  readonly publicUrlSource: "environment" | "default";
  /** Directory for the SQLite file and generated files. */
  readonly dataDir: string;
  /** Admin password from the environment; undefined means "generate once and print". */
  readonly adminPassword: string | undefined;
  /** spec §1.7 feature switch. */
  readonly mqttEnabled: boolean;
  readonly logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Lifetime of an admin bearer token, ms. */
  readonly adminSessionTtlMs: number;
  /**
   * scrypt's N for new password hashes: OWASP's 2^17 (`PASSWORD_SCRYPT_N`); not an environment
   * variable, so no deployment can lower it. {@link testSettings} lowers it: the suite signs in
   * hundreds of times.
   */
  readonly passwordScryptN: number;
  /** Lifetime of a download token, ms (spec §8: 5 minutes). */
  readonly downloadTokenTtlMs: number;
  /** Largest accepted request body, bytes. */
  readonly maxBodyBytes: number;
  /** Broker kind (DESIGN §6): aedes in this process, or an external EMQX or Mosquitto. */
  readonly mqttBroker: "embedded" | "emqx" | "mosquitto";
  /** spec §1.9: the backend's address of an external broker (`mqtts://` = TLS); unused with `embedded`. */
  readonly mqttUrl: string;
  /** EMQX management API base URL, key and secret (required with `emqx`). Key and secret are never logged. */
  readonly emqxApiUrl: string | undefined;
  readonly emqxApiKey: string | undefined;
  readonly emqxApiSecret: string | undefined;
  /**
   * Mosquitto dynamic-security admin (the user `mosquitto_ctrl dynsec init` created; the password
   * is required with `mosquitto`, never logged). Must differ from the backend user.
   */
  readonly mosquittoAdminUsername: string;
  readonly mosquittoAdminPassword: string | undefined;
  /** Reconnect backoff towards the broker, ms: the first retry period, doubled per failure up to the cap. */
  readonly mqttReconnectMinMs: number;
  readonly mqttReconnectMaxMs: number;
  readonly embeddedBrokerHost: string;
  /** 0 picks a free port (tests). */
  readonly embeddedBrokerPort: number;
  /**
   * The embedded broker runs in a worker thread: sockets, MQTT parsing and
   * PUBACKs off the main thread. False runs it on the main thread. A database at ":memory:"
   * always runs it there (the thread reads accounts from the file).
   */
  readonly embeddedBrokerThread: boolean;
  /** Broker host and port put into bind profiles (DESIGN §6). */
  readonly mqttPublicHost: string;
  /**
   * True when SVC_MQTT_PUBLIC_HOST is unset: the broker host of bind profiles is then the host of
   * the current public URL (a stored public URL moves it too), else {@link mqttPublicHost}.
   */
  readonly mqttPublicHostFromUrl: boolean;
  readonly mqttPublicPort: number | undefined;
  /** spec §1.9: the embedded broker's TLS listener is on and bind profiles prefer TLS (spec §2.6). */
  readonly mqttTlsEnabled: boolean;
  /** The embedded broker's TLS listener port; 0 picks a free port (tests). */
  readonly embeddedBrokerTlsPort: number;
  /** TLS port put into bind profiles; undefined: the TLS listener's own port. */
  readonly mqttPublicTlsPort: number | undefined;
  /**
   * PEM files of the TLS listener's certificate, its key and the CA put into profiles. Embedded
   * broker: all three or none (none: generated under `{dataDir}/tls`). External broker: the CA
   * file alone (the broker holds its own certificate), or none (agents use system trust).
   */
  readonly mqttTlsCertFile: string | undefined;
  readonly mqttTlsKeyFile: string | undefined;
  readonly mqttTlsCaFile: string | undefined;
  /** PEM CA file the backend trusts for an `mqtts://` broker URL; undefined: system trust. */
  readonly mqttCaFile: string | undefined;
  readonly mqttBackendUsername: string;
  /** Undefined: generated once and stored. */
  readonly mqttBackendPassword: string | undefined;
  /** Undefined: generated once and stored. */
  readonly brokerAuthzSharedKey: string | undefined;
  /** Online TTL, ms (spec §8: longer than the 30-minute heartbeat). */
  readonly onlineTtlMs: number;
  /** Detect interval while SSE subscribers exist, ms (spec §6.4 rule 8: 2 minutes). */
  readonly detectIntervalMs: number;
  readonly detectTimeoutMs: number;
  /** A command without a final ACK after this long ends as timed_out, ms. */
  readonly commandTimeoutMs: number;
  /** Bind token validity, ms (spec §8: 5 minutes). */
  readonly bindTokenTtlMs: number;
  /** Delay that gathers staged-config changes into one automatic push, ms. */
  readonly configPushDebounceMs: number;
  /** GitHub-REST-shaped release API of the client (DESIGN §6): `GET {it}/releases/tags/v{version}`. */
  readonly releaseApiUrl: string;
  /** Where the console builds release asset URLs: `{it}/v{version}/{asset}` (DESIGN §6). */
  readonly releaseDownloadUrl: string;
  /** Largest snapshot accepted by import (compressed and uncompressed), bytes. */
  readonly maxSnapshotBytes: number;
  /** Static bearer token for `GET /metrics` (Prometheus scrapes); undefined: admin sessions only. Never logged. */
  readonly metricsToken: string | undefined;
  /**
   * Control log rows kept per node; older ones are pruned in the background (spec §6.4 rule 9;
   * docs/history/decisions-2026.md "Retention").
   */
  readonly controlLogRetention: number;
  /**
   * Flight-recorder rows (`node_transitions`) kept per node; older ones are pruned in the
   * background (docs/history/decisions-2026.md "flight recorder").
   */
  readonly timelineMaxPerNode: number;
  /**
   * Login and bind attempts per client address per minute; past it the route
   * answers 429 `RATE_LIMITED` with `Retry-After`.
   */
  readonly authRateLimitMax: number;
  /**
   * Longest time a client may take to send one whole request (headers and body), ms; past it the
   * connection is answered 408 `REQUEST_TIMEOUT` and closed (a slow body must not hold a connection open forever).
   */
  readonly httpRequestTimeoutMs: number;
  /** Open SSE streams one admin session (bearer token) may hold; one more answers 429 `RATE_LIMITED`. */
  readonly sseMaxStreamsPerSession: number;
  /** Single sign-on through an OpenID provider; undefined when SVC_OIDC_ISSUER is unset. */
  readonly oidc: OidcSettings | undefined;
  /**
   * Audit entries older than this many days are removed by retention, from the oldest end, the
   * boundary recorded so the kept chain stays verifiable (README "Audit log").
   */
  readonly auditRetentionDays: number;
  /**
   * Waits between an alert delivery's attempts, ms: the first attempt is immediate, the n-th
   * retry waits the n-th entry (plus up to 10 % jitter); past the last entry the delivery fails.
   * Default: Standard Webhooks' schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h).
   */
  readonly alertsRetryScheduleMs: readonly number[];
  /** A channel whose deliveries have failed without a success for this long is disabled, ms. */
  readonly alertsDisableAfterMs: number;
  /** Alert targets on loopback, private, link-local and other internal addresses are allowed (an appliance on a LAN). */
  readonly alertsAllowPrivateTargets: boolean;
  /** Alert deliveries in flight at once. */
  readonly alertsConcurrency: number;
  /**
   * A channel's group window, ms: the first alert of a window goes out at once, the ones after it
   * go out together in one grouped message when the window ends (docs/alerts.md "Storms").
   */
  readonly alertsGroupWindowMs: number;
}

/** Single sign-on settings (README "Single sign-on (OIDC)"). The client secret is never logged. */
export interface OidcSettings {
  /** The provider's issuer URL; its discovery document is `{issuer}/.well-known/openid-configuration`. */
  readonly issuer: string;
  readonly clientId: string;
  /** Undefined: a public client (PKCE only, no client authentication). */
  readonly clientSecret: string | undefined;
  /** The ID token (or userinfo) claim listing the user's groups: an array of strings, or one string. */
  readonly groupsClaim: string;
  /** Group name → role; a user acts with the highest role any of their groups maps to. */
  readonly roleMap: ReadonlyMap<string, Role>;
  /** A user none of whose groups maps to a role: signed in as `viewer` (create) or refused. */
  readonly unknownUsers: "create" | "refuse";
  /** The provider's name on the sign-in button ("Sign in with {label}"). */
  readonly label: string;
  /** Scopes asked for, space-separated; `openid` is added when missing. Some providers list groups only under a `groups` scope. */
  readonly scopes: string;
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
  const tlsProblem = tlsFilesProblem(e);
  if (tlsProblem !== undefined) throw new SettingsError(tlsProblem);
  const brokerProblem = externalBrokerProblem(e);
  if (brokerProblem !== undefined) throw new SettingsError(brokerProblem);
  const oidc = oidcSettings(e);
  const port = e.SVC_HTTP_PORT === 0 ? 8080 : e.SVC_HTTP_PORT;
  const publicUrl = (e.SVC_PUBLIC_URL ?? `http://localhost:${port}`).replace(/\/+$/, "");
  return Object.freeze({
    httpHost: e.SVC_HTTP_HOST,
    httpPort: e.SVC_HTTP_PORT,
    publicUrl,
    publicUrlSource: e.SVC_PUBLIC_URL === undefined ? "default" : "environment",
    dataDir: e.SVC_DATA_DIR,
    adminPassword: e.SVC_ADMIN_PASSWORD,
    mqttEnabled: e.SVC_ENABLE_MQTT_SERVICES,
    logLevel: e.SVC_LOG_LEVEL,
    adminSessionTtlMs: e.SVC_ADMIN_SESSION_TTL_S * 1000,
    passwordScryptN: PASSWORD_SCRYPT_N,
    downloadTokenTtlMs: e.SVC_DOWNLOAD_TOKEN_TTL_S * 1000,
    maxBodyBytes: e.SVC_MAX_BODY_BYTES,
    mqttBroker: e.SVC_MQTT_BROKER,
    mqttUrl: e.SVC_MQTT_URL,
    emqxApiUrl: e.SVC_EMQX_API_URL?.replace(/\/+$/, ""),
    emqxApiKey: e.SVC_EMQX_API_KEY,
    emqxApiSecret: e.SVC_EMQX_API_SECRET,
    mosquittoAdminUsername: e.SVC_MOSQUITTO_ADMIN_USERNAME,
    mosquittoAdminPassword: e.SVC_MOSQUITTO_ADMIN_PASSWORD,
    mqttReconnectMinMs: e.SVC_MQTT_RECONNECT_MIN_MS,
    mqttReconnectMaxMs: Math.max(e.SVC_MQTT_RECONNECT_MAX_MS, e.SVC_MQTT_RECONNECT_MIN_MS),
    embeddedBrokerHost: e.SVC_EMBEDDED_BROKER_HOST,
    embeddedBrokerPort: e.SVC_EMBEDDED_BROKER_PORT,
    embeddedBrokerThread: e.SVC_EMBEDDED_BROKER_THREAD,
    mqttPublicHost: e.SVC_MQTT_PUBLIC_HOST ?? new URL(publicUrl).hostname,
    mqttPublicHostFromUrl: e.SVC_MQTT_PUBLIC_HOST === undefined,
    // The embedded broker's own port when unset (it may be 0: picked at start); 1883 for an external broker.
    mqttPublicPort: e.SVC_MQTT_PUBLIC_PORT ?? (e.SVC_MQTT_BROKER === "embedded" ? undefined : 1883),
    mqttTlsEnabled: e.SVC_MQTT_TLS_ENABLED,
    embeddedBrokerTlsPort: e.SVC_EMBEDDED_BROKER_TLS_PORT,
    mqttPublicTlsPort: e.SVC_MQTT_PUBLIC_TLS_PORT,
    mqttTlsCertFile: e.SVC_MQTT_TLS_CERT_FILE,
    mqttTlsKeyFile: e.SVC_MQTT_TLS_KEY_FILE,
    mqttTlsCaFile: e.SVC_MQTT_TLS_CA_FILE,
    mqttCaFile: e.SVC_MQTT_CA_FILE,
    mqttBackendUsername: e.SVC_MQTT_BACKEND_USERNAME,
    mqttBackendPassword: e.SVC_MQTT_BACKEND_PASSWORD,
    brokerAuthzSharedKey: e.SVC_BROKER_AUTHZ_SHARED_KEY,
    onlineTtlMs: e.SVC_ONLINE_TTL_S * 1000,
    detectIntervalMs: e.SVC_DETECT_INTERVAL_S * 1000,
    detectTimeoutMs: e.SVC_DETECT_TIMEOUT_S * 1000,
    commandTimeoutMs: e.SVC_COMMAND_TIMEOUT_S * 1000,
    bindTokenTtlMs: e.SVC_BIND_TOKEN_TTL_S * 1000,
    configPushDebounceMs: e.SVC_CONFIG_PUSH_DEBOUNCE_MS,
    releaseApiUrl: e.SVC_RELEASE_API_URL.replace(/\/+$/, ""),
    releaseDownloadUrl: e.SVC_RELEASE_DOWNLOAD_URL.replace(/\/+$/, ""),
    maxSnapshotBytes: e.SVC_MAX_SNAPSHOT_BYTES,
    metricsToken: e.SVC_METRICS_TOKEN,
    controlLogRetention: e.SVC_CONTROL_LOG_RETENTION,
    timelineMaxPerNode: e.SVC_TIMELINE_MAX_PER_NODE,
    authRateLimitMax: e.SVC_AUTH_RATE_LIMIT_MAX,
    httpRequestTimeoutMs: e.SVC_HTTP_REQUEST_TIMEOUT_MS,
    sseMaxStreamsPerSession: e.SVC_SSE_MAX_STREAMS_PER_SESSION,
    oidc,
    auditRetentionDays: e.SVC_AUDIT_RETENTION_DAYS,
    alertsRetryScheduleMs: Object.freeze(e.SVC_ALERTS_RETRY_SCHEDULE_S.split(",").map((v) => Math.round(Number(v) * 1000))),
    alertsDisableAfterMs: Math.round(e.SVC_ALERTS_DISABLE_AFTER_H * 3_600_000),
    alertsAllowPrivateTargets: e.SVC_ALERTS_ALLOW_PRIVATE_TARGETS,
    alertsConcurrency: e.SVC_ALERTS_CONCURRENCY,
    alertsGroupWindowMs: e.SVC_ALERTS_GROUP_WINDOW_S * 1000,
  });
}

/**
 * The single sign-on settings, or undefined without SVC_OIDC_ISSUER. An issuer over plain http
 * is accepted on a loopback host only (a provider on the same machine); the client id is required
 * with an issuer; every role of SVC_OIDC_ROLE_MAP must be a known role.
 * @throws SettingsError naming the variable and the rule
 */
function oidcSettings(e: z.infer<typeof envSchema>): OidcSettings | undefined {
  if (e.SVC_OIDC_ISSUER === undefined) {
    const stray = (["SVC_OIDC_CLIENT_ID", "SVC_OIDC_CLIENT_SECRET", "SVC_OIDC_ROLE_MAP"] as const).find((k) => e[k] !== undefined);
    if (stray !== undefined) throw new SettingsError(`invalid setting ${stray}: needs SVC_OIDC_ISSUER`);
    return undefined;
  }
  const issuer = new URL(e.SVC_OIDC_ISSUER);
  if (issuer.protocol === "http:" && !["localhost", "127.0.0.1", "[::1]"].includes(issuer.hostname)) {
    throw new SettingsError("invalid setting SVC_OIDC_ISSUER: must be an https URL (plain http only on a loopback host)");
  }
  if (e.SVC_OIDC_CLIENT_ID === undefined) throw new SettingsError("invalid setting SVC_OIDC_CLIENT_ID: required when SVC_OIDC_ISSUER is set");
  return Object.freeze({
    issuer: e.SVC_OIDC_ISSUER.replace(/\/+$/, ""),
    clientId: e.SVC_OIDC_CLIENT_ID,
    clientSecret: e.SVC_OIDC_CLIENT_SECRET,
    groupsClaim: e.SVC_OIDC_GROUPS_CLAIM,
    roleMap: parseRoleMap(e.SVC_OIDC_ROLE_MAP ?? ""),
    unknownUsers: e.SVC_OIDC_UNKNOWN_USERS,
    label: e.SVC_OIDC_LABEL ?? "SSO",
    scopes: e.SVC_OIDC_SCOPES.split(" ").includes("openid") ? e.SVC_OIDC_SCOPES : `openid ${e.SVC_OIDC_SCOPES}`,
  });
}

/**
 * Parses `group=role,group=role` (spaces around names ignored; a group may contain any character
 * but `,` and `=`).
 * @throws SettingsError on an entry without `=`, an empty group, a group given twice or an unknown role
 */
export function parseRoleMap(text: string): ReadonlyMap<string, Role> {
  const map = new Map<string, Role>();
  for (const entry of text.split(",").map((p) => p.trim()).filter((p) => p !== "")) {
    const m = /^([^=]+)=([^=]*)$/.exec(entry);
    const group = m?.[1]?.trim() ?? "";
    const role = m?.[2]?.trim() ?? "";
    if (m === null || group === "") throw new SettingsError(`invalid setting SVC_OIDC_ROLE_MAP: "${entry}" must be group=role`);
    if (!(ROLES as readonly string[]).includes(role)) {
      throw new SettingsError(`invalid setting SVC_OIDC_ROLE_MAP: "${role}" of group "${group}" is not a role (${ROLES.join(", ")})`);
    }
    if (map.has(group)) throw new SettingsError(`invalid setting SVC_OIDC_ROLE_MAP: group "${group}" is given twice`);
    map.set(group, role as Role);
  }
  return map;
}

/**
 * What an external broker needs (docs/history/decisions-2026.md "Settings (DESIGN §6)"): EMQX its management
 * API URL, key and secret; Mosquitto
 * the dynamic-security admin's password, with a user other than the backend's (the backend
 * rewrites its own user at every reconciliation).
 * @returns the one-line SettingsError message, or undefined when the combination is valid
 */
function externalBrokerProblem(e: z.infer<typeof envSchema>): string | undefined {
  if (e.SVC_MQTT_BROKER === "emqx") {
    for (const name of ["SVC_EMQX_API_URL", "SVC_EMQX_API_KEY", "SVC_EMQX_API_SECRET"] as const) {
      if (e[name] === undefined) return `invalid setting ${name}: required when SVC_MQTT_BROKER=emqx`;
    }
  }
  if (e.SVC_MQTT_BROKER === "mosquitto") {
    if (e.SVC_MOSQUITTO_ADMIN_PASSWORD === undefined) return "invalid setting SVC_MOSQUITTO_ADMIN_PASSWORD: required when SVC_MQTT_BROKER=mosquitto";
    if (e.SVC_MOSQUITTO_ADMIN_USERNAME === e.SVC_MQTT_BACKEND_USERNAME) {
      return "invalid setting SVC_MOSQUITTO_ADMIN_USERNAME: must differ from SVC_MQTT_BACKEND_USERNAME";
    }
  }
  return undefined;
}

/**
 * The rule for the TLS certificate files (docs/history/decisions-2026.md "TLS for MQTT"): the embedded broker serves TLS
 * itself, so it takes all three or none; an external broker holds its own certificate, so only
 * the CA file (what profiles carry) may be given. Also: two embedded listeners need two ports.
 * @returns the one-line SettingsError message, or undefined when the combination is valid
 */
function tlsFilesProblem(e: z.infer<typeof envSchema>): string | undefined {
  const files = {
    SVC_MQTT_TLS_CERT_FILE: e.SVC_MQTT_TLS_CERT_FILE,
    SVC_MQTT_TLS_KEY_FILE: e.SVC_MQTT_TLS_KEY_FILE,
    SVC_MQTT_TLS_CA_FILE: e.SVC_MQTT_TLS_CA_FILE,
  };
  const given = Object.entries(files).filter(([, v]) => v !== undefined).map(([k]) => k);
  const missing = Object.entries(files).filter(([, v]) => v === undefined).map(([k]) => k);
  if (e.SVC_MQTT_BROKER !== "embedded") {
    const own = given.find((k) => k !== "SVC_MQTT_TLS_CA_FILE");
    if (own !== undefined) return `invalid setting ${own}: only the embedded broker serves TLS itself; with ${e.SVC_MQTT_BROKER} give SVC_MQTT_TLS_CA_FILE alone`;
  } else if (given.length > 0 && missing.length > 0) {
    return `invalid setting ${missing[0]}: set all three of SVC_MQTT_TLS_CERT_FILE, SVC_MQTT_TLS_KEY_FILE and SVC_MQTT_TLS_CA_FILE, or none`;
  }
  if (e.SVC_MQTT_TLS_ENABLED && e.SVC_EMBEDDED_BROKER_TLS_PORT !== 0 && e.SVC_EMBEDDED_BROKER_TLS_PORT === e.SVC_EMBEDDED_BROKER_PORT) {
    return "invalid setting SVC_EMBEDDED_BROKER_TLS_PORT: must differ from SVC_EMBEDDED_BROKER_PORT";
  }
  return undefined;
}

/** Settings for tests: defaults, overridden by `overrides`. */
export function testSettings(overrides: Partial<Settings> = {}): Settings {
  return Object.freeze({
    ...loadSettings({}),
    logLevel: "silent" as const,
    // A quarter second of scrypt per sign-in and per start would add minutes to the suite; the
    // production cost has its own test (test/domain/tokens.test.ts).
    passwordScryptN: 2 ** 14,
    embeddedBrokerHost: "127.0.0.1",
    embeddedBrokerPort: 0,
    // A test that names the broker host means that host, not the public URL's.
    ...(overrides.mqttPublicHost === undefined ? {} : { mqttPublicHostFromUrl: false }),
    ...overrides,
  });
}
