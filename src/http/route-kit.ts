import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import type { Logger } from "../logger.js";

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
    /** Defaults to "admin". */
    auth?: RouteAuth;
  }
}

/** The token of an `Authorization: Bearer <token>` header, if any. */
export function bearerToken(req: FastifyRequest): string | undefined {
  const header = req.headers.authorization;
  if (typeof header !== "string") return undefined;
  const m = /^Bearer ([^\s]+)$/i.exec(header.trim());
  return m?.[1];
}
