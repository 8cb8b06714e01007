import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../errors.js";
import type { App } from "./route-kit.js";

/**
 * The console's Content-Security-Policy: everything from this origin only. No inline
 * script or style is needed (the Vite build emits none); `data:` images for QR codes.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** Hashed build output (`dist/web/assets/*`): cached for a year, never revalidated. */
const IMMUTABLE = "public, max-age=31536000, immutable";

/**
 * `dist/web` of this installation: the directory holding package.json, found upwards from this
 * module (`src/http/` run by tsx, or `dist/src/http/` of the production build).
 */
export function defaultConsoleDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, "package.json"))) return join(dir, "dist", "web");
    const up = dirname(dir);
    if (up === dir) return join(process.cwd(), "dist", "web");
    dir = up;
  }
}

/** Every file under `root`, as URL paths (`/assets/index-abc.js`). */
function listFiles(root: string, dir = root, out = new Set<string>()): Set<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) listFiles(root, p, out);
    else out.add("/" + relative(root, p).split(sep).join("/"));
  }
  return out;
}

/** Whether `path` (no query) is an API path, which never falls back to the console. */
export function isApiPath(path: string): boolean {
  return path === "/api" || path.startsWith("/api/");
}

/** Whether the not-found handler gives this request to the console: a GET or HEAD of a non-API path. */
export function isConsoleRequest(req: FastifyRequest): boolean {
  return (req.method === "GET" || req.method === "HEAD") && !isApiPath(req.url.split("?")[0] ?? "/");
}

/**
 * The web console (DESIGN §2 "the console's static files") from `root` (`dist/web`,
 * built by `npm run build:web`), served at `/` by the app's not-found handler, so that every
 * route of the API keeps its own answers (errors included) and the console takes only what no
 * route takes. For a request {@link isConsoleRequest} accepts (no admin token needed):
 *
 * - a built file answers itself; files under `/assets/` (content-hashed names)
 *   `Cache-Control: public, max-age=31536000, immutable`, every other file `no-cache`;
 * - a missing `/assets/` file is a JSON 404 (a stale page asking for an old hash gets no HTML);
 * - every other path answers `index.html` (`no-cache`): the SPA fallback, so a reload of
 *   `/configs/abc` opens that page;
 * - every console answer carries {@link CONSOLE_CSP} and `X-Content-Type-Options: nosniff`.
 *
 * Without a build (`root/index.html` missing) it answers 503 `SERVICE_UNAVAILABLE` with the
 * command that builds it. The file list is read once, here (rebuild, then restart).
 * Registers `@fastify/static` (for `reply.sendFile`) on `app` when the build exists.
 * @returns the handler; it throws {@link AppError}s, which the app's error handler answers
 */
export async function consoleHandler(app: App, opts: { root: string }): Promise<(req: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>> {
  const built = existsSync(join(opts.root, "index.html"));
  const files = built ? listFiles(opts.root) : new Set<string>();
  if (built) await app.register(fastifyStatic, { root: opts.root, serve: false, cacheControl: false, etag: true, lastModified: true, dotfiles: "deny" });

  return async (req, reply) => {
    const path = decodeURIComponentSafe(req.url.split("?")[0] ?? "/");
    if (!built) {
      throw new AppError(
        "SERVICE_UNAVAILABLE",
        `the web console is not built: run \`npm run build:web\` (or \`npm start\`, which builds it) to create ${opts.root}`,
      );
    }
    void reply.status(200).header("content-security-policy", CONSOLE_CSP).header("x-content-type-options", "nosniff");
    if (path !== "/index.html" && files.has(path)) {
      void reply.header("cache-control", path.startsWith("/assets/") ? IMMUTABLE : "no-cache");
      return reply.sendFile(path.slice(1));
    }
    // A hashed file that is not (or no longer) built: a 404, not the page in its place.
    if (path.startsWith("/assets/")) throw new AppError("NOT_FOUND", `no console file ${path}`);
    void reply.header("cache-control", "no-cache");
    return reply.type("text/html; charset=utf-8").sendFile("index.html");
  };
}

/** `decodeURIComponent` that leaves a malformed escape as is (it then matches no file). */
function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
