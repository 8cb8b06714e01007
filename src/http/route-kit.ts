import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import type { Logger } from "../logger.js";
import type { Principal } from "../services/auth.service.js";
import { AppError } from "../errors.js";
import { MIN_ROLE_KEY, roleAtLeast, roleSchema, type Role } from "../protocol/roles.js";

/**
 * What a route plugin needs from the application, kept apart from `app.ts` so that the plugins
 * `app.ts` registers never import it back: the instance type they receive, the route's auth
 * declaration and the bearer token reader.
 */

/** The Fastify instance of `buildApp`: Node's HTTP server, pino logger, zod schemas on every route. */
export type App = FastifyInstance<Server, IncomingMessage, ServerResponse, Logger, ZodTypeProvider>;

/** Who may call a route: the admin (bearer token) or anyone (the route checks its own token). */
export type RouteAuth = "admin" | "public";

declare module "fastify" {
  interface FastifyContextConfig {
    /** Defaults to "admin": a signed-in caller whose role is at least the route's `x-min-role`. */
    auth?: RouteAuth;
  }
  interface FastifyRequest {
    /** Who is calling (set by the auth hook on every route not marked public). */
    principal?: Principal;
  }
}

/**
 * The minimum role a route declares in its schema (`"x-min-role"`, listed in the OpenAPI
 * document); `owner` when it declares none or an unknown one, so a route someone forgot to
 * classify is closed rather than open.
 */
export function minRoleOf(req: FastifyRequest): Role {
  const declared = (req.routeOptions.schema as Record<string, unknown> | undefined)?.[MIN_ROLE_KEY];
  const parsed = roleSchema.safeParse(declared);
  return parsed.success ? parsed.data : "owner";
}

/** The token of an `Authorization: Bearer <token>` header, if any. */
export function bearerToken(req: FastifyRequest): string | undefined {
  const header = req.headers.authorization;
  if (typeof header !== "string") return undefined;
  const m = /^Bearer ([^\s]+)$/i.exec(header.trim());
  return m?.[1];
}

/**
 * The caller the auth hook set on a route for signed-in callers.
 * @throws AppError UNAUTHORIZED when no principal is set (a route marked public, or no hook ran)
 */
export function principalOf(req: FastifyRequest): Principal {
  if (req.principal === undefined) throw new AppError("UNAUTHORIZED", "a valid bearer token is required");
  return req.principal;
}

/**
 * Refuses a caller below `min`.
 * @throws AppError FORBIDDEN (details `{ min_role, role }`) when `principal.role` is below `min`
 */
export function requireRole(principal: Principal, min: Role): void {
  if (roleAtLeast(principal.role, min)) return;
  throw new AppError("FORBIDDEN", `this needs the ${min} role or above; ${principal.username} is ${principal.role}`, { min_role: min, role: principal.role });
}
