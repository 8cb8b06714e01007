import { randomUUID } from "node:crypto";
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import fastifyRateLimit from "@fastify/rate-limit";
import fastifySwagger from "@fastify/swagger";
import Fastify, { LogController, type FastifyError, type FastifyReply, type FastifyRequest, type RouteOptions } from "fastify";
import {
  hasZodFastifySchemaValidationErrors,
  isResponseSerializationError,
  jsonSchemaTransform,
  jsonSchemaTransformObject,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from "fastify-type-provider-zod";
import type { Clock } from "../lib/clock.js";
import type { Settings } from "../config.js";
import { AppError, ERROR_CODES, storageFaultError, type ErrorCode } from "../errors.js";
import type { Logger } from "../logger.js";
import type { AccessTokensService } from "../services/access-tokens.service.js";
import type { UsersService } from "../services/users.service.js";
import type { AuthService } from "../services/auth.service.js";
import type { OidcService } from "../services/oidc.service.js";
import type { DownloadsService } from "../services/downloads.service.js";
import type { MeshService } from "../services/mesh.service.js";
import type { ControlService } from "../services/control.service.js";
import type { SystemStatus } from "../services/notifier.js";
import type { EventHub } from "../events/hub.js";
import type { BrokerIdentity } from "../mqtt/authz.policy.js";
import { bearerToken, minRoleOf, requireRole, type App } from "./route-kit.js";
import { consoleHandler, defaultConsoleDir, isConsoleRequest } from "./console.plugin.js";
import { clientRoutes } from "./routes/client.routes.js";
import { eventsRoutes } from "./routes/events.routes.js";
import { internalAuthzRoutes } from "./routes/internal-authz.routes.js";
import { systemRoutes } from "./routes/system.routes.js";
import { artifactsRoutes } from "./routes/artifacts.routes.js";
import { backupsRoutes } from "./routes/backups.routes.js";
import { mcpRoutes } from "./routes/mcp.routes.js";
import { machinesRoutes } from "./routes/machines.routes.js";
import type { MachinesService } from "../services/machines.service.js";
import { runInRoute } from "../lib/request-route.js";
import type { ArtifactsService } from "../services/artifacts.service.js";
import type { BackupsService } from "../services/backups.service.js";
import type { ServiceMetrics } from "../services/metrics.js";
import type { MqttSettingsService } from "../services/mqtt-settings.service.js";
import type { PublicUrlService } from "../services/public-url.service.js";
import { metricsRoutes } from "./routes/metrics.routes.js";
import { settingsRoutes } from "./routes/settings.routes.js";
import { VERSION } from "../lib/version.js";
import { authRoutes } from "./routes/auth.routes.js";
import { usersRoutes } from "./routes/users.routes.js";
import { oidcRoutes } from "./routes/oidc.routes.js";
import { accessTokensRoutes } from "./routes/tokens.routes.js";
import { configsRoutes } from "./routes/configs.routes.js";
import { healthRoutes } from "./routes/health.routes.js";
import { meshPairsRoutes } from "./routes/mesh-pairs.routes.js";
import { nodesRoutes } from "./routes/nodes.routes.js";
import { portForwardsRoutes } from "./routes/port-forwards.routes.js";
import type { AuditService } from "../services/audit.service.js";
import { registerAuditHooks } from "./audit.hook.js";
import { auditRoutes } from "./routes/audit.routes.js";
import { alertsRoutes } from "./routes/alerts.routes.js";
import type { AlertsService } from "../services/alerts/alerts.service.js";
import { linksRoutes } from "./routes/links.routes.js";
import type { LinksService } from "../services/links.service.js";
import type { AlertRulesService } from "../services/alerts/rules.service.js";

/** Everything the HTTP layer needs, built by `main.ts` (or a test). */
export interface AppDeps {
  settings: Settings;
  log: Logger;
  clock: Clock;
  auth: AuthService;
  mesh: MeshService;
  downloads: DownloadsService;
  control: ControlService;
  hub: EventHub;
  status: () => Promise<SystemStatus>;
  internalAuthz: { sharedKey: () => string; resolve: (username: string) => BrokerIdentity | undefined };
  artifacts: ArtifactsService;
  backups: BackupsService;
  metrics: ServiceMetrics;
  mqttSettings: MqttSettingsService;
  /** The public URL hosts are told, read at each use (a change in Settings applies at once). */
  publicUrl: PublicUrlService;
  /** The built web console; default `dist/web` of this installation ({@link defaultConsoleDir}). */
  consoleDir?: string;
  machines: MachinesService;
  users: UsersService;
  accessTokens: AccessTokensService;
  /** Single sign-on through an OpenID provider (off when not configured). */
  oidc: OidcService;
  /** The audit log: every state-changing request and refusal is recorded by the app's hooks. */
  audit: AuditService;
  /** Alert channels and the delivery log. */
  alerts: AlertsService;
  /** Measured link health (docs/links.md). */
  links: LinksService;
  /** Alert rules (docs/alerts.md "Rules"). */
  alertRules: AlertRulesService;
}

export type { App, RouteAuth } from "./route-kit.js";
export { bearerToken } from "./route-kit.js";

/**
 * Builds the Fastify application: zod validation and response whitelists, OpenAPI at
 * `/api/v1/openapi.json`, admin bearer auth on every route not marked `auth: "public"`, and one
 * error handler mapping {@link AppError} codes to statuses through {@link ERROR_CODES}.
 * The caller owns `listen()` and `close()`.
 */
export async function buildApp(deps: AppDeps): Promise<App> {
  const httpLog = deps.log.child({ name: "http" });
  const app = Fastify({
    loggerInstance: httpLog,
    // Request lines are logged by the onResponse hook below, with query strings (which may
    // carry download tokens) removed.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.settings.maxBodyBytes,
    // Slow and unfinished requests: a client has this long to send a whole
    // request, then it is answered 408 REQUEST_TIMEOUT (clientErrorHandler) and closed. Node checks
    // at `connectionsCheckingInterval`, so that runs at a quarter of the limit (at most 30 s).
    requestTimeout: deps.settings.httpRequestTimeoutMs,
    http: {
      headersTimeout: Math.min(60_000, deps.settings.httpRequestTimeoutMs),
      connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(deps.settings.httpRequestTimeoutMs / 4))),
    },
    // Shutdown never waits on a client: a download nobody reads (or an open stream) would
    // otherwise hold close() for the 72 s keep-alive timeout.
    forceCloseConnections: true,
    routerOptions: { maxParamLength: 256 },
    // Each request's id is the audit entry's request_id: unique across restarts, not a counter.
    genReqId: () => randomUUID(),
    // Malformed URLs and over-long path parameters answer our error body too.
    frameworkErrors: (err, _req, reply) => sendError(reply, toAppError(err, httpLog)),
    // Requests Node's parser refuses before Fastify sees them (431 header overflow, 408, 400).
    clientErrorHandler: (err, socket) => answerClientError(err, socket, httpLog),
  }).withTypeProvider<ZodTypeProvider>() as unknown as App;

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  // An empty body with a JSON content type is "no body", not a parse error: POSTs such as
  // download-token take none, and many clients still send the header.
  const defaultJson = app.getDefaultJsonParser("error", "error");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    if (body === "" || (typeof body === "string" && body.trim() === "")) {
      done(null, undefined);
      return;
    }
    defaultJson(req, body as string, done);
  });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Device mesh control service",
        version: VERSION,
        description: errorCodesDescription(),
        license: { name: "MIT", identifier: "MIT" },
      },
      // Generated clients resolve every path against `servers`: the route below answers the public
      // URL as it is at the request (the document itself is generated once).
      servers: [{ url: deps.publicUrl.current() }],
      components: {
        securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
    transformObject: (doc) => {
      const out = jsonSchemaTransformObject(doc) as Record<string, unknown>;
      out["x-error-codes"] = Object.entries(ERROR_CODES).map(([code, v]) => ({
        code,
        status: v.status,
        description: v.description,
      }));
      return out as ReturnType<typeof jsonSchemaTransformObject>;
    },
  });

  // Per-route limits only (login, bind): against guessing, per source address.
  await app.register(fastifyRateLimit, {
    global: false,
    errorResponseBuilder: (_req, ctx) =>
      Object.assign(new AppError("RATE_LIMITED", `too many requests; retry in ${Math.ceil(ctx.ttl / 1000)} s`), {
        statusCode: 429,
      }),
  });

  // The web console: what no route takes, a GET of a non-API path, is its file or page.
  const serveConsole = await consoleHandler(app, { root: deps.consoleDir ?? defaultConsoleDir() });
  // A header that decides who is asking or how the body is read must not be
  // ambiguous. Node keeps the first Authorization and Host of duplicates and joins the rest; a
  // proxy in front may keep another one. Refused before auth, so nothing runs.
  app.addHook("onRequest", async (req) => {
    const duplicate = duplicateHeader(req.raw.rawHeaders);
    if (duplicate !== undefined) throw new AppError("VALIDATION_FAILED", `the request carries more than one ${duplicate} header`);
    // A transfer coding other than chunked (gzip, chunked) is not decoded by Node: the body would
    // be read as something else than the client sent (request smuggling).
    const te = req.headers["transfer-encoding"];
    if (te !== undefined && te.trim().toLowerCase() !== "chunked") {
      throw new AppError("VALIDATION_FAILED", "Transfer-Encoding other than chunked is not supported");
    }
  });

  // What a request changes in a node's machine is recorded with its route.
  app.addHook("onRequest", (req, _reply, done) => {
    runInRoute(`${req.method} ${req.routeOptions.url ?? "?"}`, done);
  });

  app.addHook("onRequest", async (req) => {
    if (req.routeOptions.config.auth === "public") return;
    // The console's files are public (the page asks for the password); API 404s still need a session.
    if (req.is404 && isConsoleRequest(req)) return;
    req.principal = await deps.auth.verifyAccessToken(bearerToken(req));
    if (req.is404) return;
    // Before the body is read or validated: a refused call changes nothing and learns nothing.
    requireRole(req.principal, minRoleOf(req));
  });

  // spec §1.7, §4 rule 14: a route whose schema carries `x-mqtt-write: true` (shown in the
  // OpenAPI document) is an MQTT write API and answers MQTT_DISABLED while MQTT is off, after
  // auth and before its body is validated. Services check again; nothing runs when MQTT is on.
  if (!deps.settings.mqttEnabled) {
    app.addHook("preValidation", async (req) => {
      if ((req.routeOptions.schema as Record<string, unknown> | undefined)?.["x-mqtt-write"] === true) {
        throw new AppError("MQTT_DISABLED", "MQTT services are disabled (SVC_ENABLE_MQTT_SERVICES=false)");
      }
    });
  }

  app.addHook("onResponse", async (req, reply) => {
    httpLog.info(
      { method: req.method, path: req.url.split("?")[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      "request",
    );
  });

  app.setNotFoundHandler(async (req, reply) => {
    if (isConsoleRequest(req)) return serveConsole(req, reply);
    sendError(reply, new AppError("NOT_FOUND", `no route ${req.method} ${req.url.split("?")[0]}`));
    return reply;
  });

  app.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    sendError(reply, toAppError(err, httpLog));
  });

  app.addHook("onRoute", operationIdCheck());
  registerAuditHooks(app, deps.audit);
  await app.register(healthRoutes);
  const guessing = { max: deps.settings.authRateLimitMax, timeWindow: 60_000 };
  await app.register(authRoutes, { auth: deps.auth, rateLimit: guessing });
  await app.register(usersRoutes, { users: deps.users });
  await app.register(oidcRoutes, { oidc: deps.oidc, rateLimit: guessing, secureCookie: () => deps.publicUrl.current().startsWith("https:") });
  await app.register(accessTokensRoutes, { tokens: deps.accessTokens });
  await app.register(configsRoutes, { mesh: deps.mesh });
  await app.register(nodesRoutes, {
    mesh: deps.mesh,
    downloads: deps.downloads,
    clock: deps.clock,
  });
  await app.register(meshPairsRoutes, { mesh: deps.mesh });
  await app.register(portForwardsRoutes, { mesh: deps.mesh });
  await app.register(clientRoutes, { control: deps.control, rateLimit: guessing });
  await app.register(eventsRoutes, { hub: deps.hub, auth: deps.auth, maxStreamsPerSession: deps.settings.sseMaxStreamsPerSession });
  await app.register(internalAuthzRoutes, deps.internalAuthz);
  await app.register(systemRoutes, { status: deps.status });
  await app.register(metricsRoutes, { metrics: deps.metrics, auth: deps.auth, metricsToken: deps.settings.metricsToken });
  await app.register(settingsRoutes, { mqttSettings: deps.mqttSettings, publicUrl: deps.publicUrl });
  await app.register(artifactsRoutes, { artifacts: deps.artifacts, downloads: deps.downloads, auth: deps.auth });
  await app.register(backupsRoutes, { backups: deps.backups, downloads: deps.downloads, auth: deps.auth });
  await app.register(machinesRoutes, { machines: deps.machines });
  await app.register(auditRoutes, { audit: deps.audit });
  await app.register(alertsRoutes, { alerts: deps.alerts, rules: deps.alertRules });
  await app.register(linksRoutes, { links: deps.links });
  await app.register(mcpRoutes, {
    backups: deps.backups,
    mesh: deps.mesh,
    control: deps.control,
    auth: deps.auth,
    publicUrl: () => deps.publicUrl.current(),
  });

  app.get(
    "/api/v1/openapi.json",
    { schema: { hide: true } },
    async () => ({ ...app.swagger(), servers: [{ url: deps.publicUrl.current() }] }),
  );
  return app;
}

/** Headers a request may carry once only: a duplicate could be read differently by a proxy in front (request smuggling). */
const SINGLE_HEADERS: ReadonlySet<string> = new Set(["authorization", "host", "content-type", "content-length", "transfer-encoding", "x-svc-internal-key"]);

/**
 * The first of {@link SINGLE_HEADERS} that occurs more than once in Node's `rawHeaders`
 * (`[name, value, name, value, …]`), lower-cased; undefined when none repeats.
 */
export function duplicateHeader(rawHeaders: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] ?? "").toLowerCase();
    if (!SINGLE_HEADERS.has(name)) continue;
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return undefined;
}

/**
 * Answers a request Node's HTTP parser refused (its `clientError` event; docs/history/decisions-2026.md "Client
 * errors before routing"): the DESIGN §3 error body with a registered code, written straight to the
 * socket, which is then closed. `HPE_HEADER_OVERFLOW` → 431 HEADERS_TOO_LARGE,
 * `ERR_HTTP_REQUEST_TIMEOUT` → 408 REQUEST_TIMEOUT, anything else (bad request line, header token,
 * chunking) → 400 VALIDATION_FAILED. A reset or destroyed socket gets nothing. Logged at debug,
 * without headers.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex, log: Logger): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const appError =
    err.code === "HPE_HEADER_OVERFLOW"
      ? new AppError("HEADERS_TOO_LARGE", "the request's header section is too large")
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? new AppError("REQUEST_TIMEOUT", "the request was not completed in time")
        : new AppError("VALIDATION_FAILED", "malformed HTTP request");
  log.debug({ code: err.code, status: appError.status }, "client error before routing");
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(appError.toBody());
  const head =
    `HTTP/1.1 ${appError.status} ${STATUS_CODES[appError.status] ?? ""}\r\n` +
    `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    "Connection: close\r\n\r\n";
  // Destroyed once the answer is flushed: the parser cannot go on with this connection.
  socket.end(head + body, () => socket.destroy());
}

function sendError(reply: FastifyReply, err: AppError): void {
  void reply.status(err.status).type("application/json; charset=utf-8").send(err.toBody());
}

/** Maps anything thrown in a request to a registered error; unknown errors become INTERNAL. */
function toAppError(err: FastifyError | Error, log: Logger): AppError {
  if (err instanceof AppError) return err;
  if (hasZodFastifySchemaValidationErrors(err)) {
    const issues = err.validation.map((v) => ({
      where: (err as FastifyError).validationContext ?? "request",
      path: v.instancePath,
      message: v.message ?? "invalid",
    }));
    const first = issues[0];
    return new AppError(
      "VALIDATION_FAILED",
      first ? `${first.where}${first.path.replaceAll("/", ".")}: ${first.message}` : "invalid request",
      { issues },
    );
  }
  if (isResponseSerializationError(err)) {
    log.error({ err }, "response failed its schema");
    return new AppError("INTERNAL", "internal error");
  }
  const code = (err as FastifyError).code;
  const byFastifyCode: Record<string, ErrorCode> = {
    FST_ERR_CTP_BODY_TOO_LARGE: "PAYLOAD_TOO_LARGE",
    FST_ERR_CTP_INVALID_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
    FST_ERR_CTP_INVALID_CONTENT_LENGTH: "VALIDATION_FAILED",
    FST_ERR_CTP_EMPTY_JSON_BODY: "VALIDATION_FAILED",
    FST_ERR_CTP_INVALID_JSON_BODY: "VALIDATION_FAILED",
    FST_ERR_BAD_URL: "VALIDATION_FAILED",
    FST_ERR_MAX_PARAM_LENGTH: "VALIDATION_FAILED",
  };
  const mapped = code === undefined ? undefined : byFastifyCode[code];
  if (mapped) return new AppError(mapped, err.message);
  if (code === "SQLITE_CONSTRAINT_UNIQUE") return new AppError("CONFLICT", "the request conflicts with stored data");
  const storage = storageFaultError(err);
  if (storage) {
    log.warn({ err, reason: storage.details?.["reason"] }, "storage fault: write refused");
    return storage;
  }
  const status = (err as FastifyError).statusCode;
  if (status === 400 || err instanceof SyntaxError) return new AppError("VALIDATION_FAILED", "malformed request body");
  if (status === 429) return new AppError("RATE_LIMITED", err.message);
  log.error({ err }, "unhandled error");
  return new AppError("INTERNAL", "internal error");
}

/**
 * An `onRoute` hook that refuses to register a documented route without an `operationId`, or with
 * one that is not camelCase or is taken: generated clients name their functions after it, so it is
 * declared next to the route's schema and never derived. Hidden routes (aliases, the document
 * itself) and the HEAD twins of GET routes are not in the document and are not checked.
 * @throws Error at registration, naming the route
 */
function operationIdCheck(): (route: RouteOptions) => void {
  const taken = new Map<string, string>();
  return (route) => {
    const schema = route.schema as { hide?: boolean; operationId?: string } | undefined;
    if (schema?.hide === true || route.method === "HEAD") return;
    const where = `${String(route.method)} ${route.url}`;
    const id = schema?.operationId;
    if (id === undefined || !/^[a-z][A-Za-z0-9]*$/.test(id)) throw new Error(`route ${where}: schema.operationId must be camelCase, got ${String(id)}`);
    const other = taken.get(id);
    if (other !== undefined && other !== where) throw new Error(`route ${where}: operationId ${id} is already ${other}'s`);
    taken.set(id, where);
  };
}

function errorCodesDescription(): string {
  const rows = Object.entries(ERROR_CODES).map(([code, v]) => `| ${code} | ${v.status} | ${v.description} |`);
  return [
    "REST API of the device mesh control service. Every error answers `{\"error\": {\"code\", \"message\", \"details\"?}}` with one of these codes:",
    "",
    "| code | HTTP status | meaning |",
    "|---|---|---|",
    ...rows,
  ].join("\n");
}
