import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import yazl from "yazl";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { ERROR_CODES } from "../../src/errors.js";
import { PAGE_LIMIT_MAX, PAIR_PAGE_LIMIT_MAX } from "../../src/protocol/rest.schema.js";
import { createLogger } from "../../src/logger.js";
import { createServer, type AppContext } from "../../src/server.js";
import { encode, rawExchange, type RawAnswer, type RawRequest } from "./http-raw.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * HTTP fuzzing of every route of the OpenAPI document over real HTTP (raw
 * sockets) against a real service on a real SQLite file. Each request is hostile by construction;
 * each answer must be a 4xx carrying the registry's error body (`src/errors.ts`, DESIGN §3), never
 * a success, never a 5xx, and the database fingerprint (SHA-256 over every row of every table)
 * must be unchanged after every refused write.
 *
 * Generated and seeded: `HTTP_FUZZ_SEED=<n>` (or `SVC_TEST_SEED=<n>`) replays a run (the seed is printed first). The
 * requests per threat class are printed as a table (docs/reliability.md "HTTP fuzzing").
 */

/** `HTTP_FUZZ_SEED`, else the suite-wide `SVC_TEST_SEED` (test/security/seed.ts on main), else 15. */
const SEED = Number(process.env.HTTP_FUZZ_SEED || process.env.SVC_TEST_SEED || 15);
if (!Number.isInteger(SEED)) throw new Error(`HTTP_FUZZ_SEED / SVC_TEST_SEED must be an integer`);
const ADMIN_PASSWORD = "correct horse battery staple";
/** The server's request timeout in this test (slow bodies must be answered 408 within it). */
const REQUEST_TIMEOUT_MS = 1500;

interface Route {
  method: string;
  /** OpenAPI form: `/api/v1/configs/{config_id}`. */
  path: string;
  pathParams: string[];
  queryParams: string[];
  hasBody: boolean;
  bodyContentTypes: string[];
  bodySchema: JsonSchema | undefined;
  /** Admin bearer route (OpenAPI `security` not emptied). */
  admin: boolean;
}

type JsonSchema = { type?: string; properties?: Record<string, JsonSchema>; anyOf?: JsonSchema[]; minimum?: number; maximum?: number; maxLength?: number; maxItems?: number; items?: JsonSchema; enum?: unknown[] };

interface Fixture {
  ids: Record<string, string>;
  /** A second id of each kind, for "token of another resource". */
  otherIds: Record<string, string>;
  admin: string;
  tokens: { config: string; configOther: string; snapshot: string; snapshotOther: string; pkg: string; bind: string };
  /** Tokens no longer valid: logged out, reset, regenerated. */
  revoked: { admin: string; bindAfterReset: string; bindRegenerated: string };
}

/** One hostile request. */
interface Case {
  cls: string;
  req: RawRequest;
  /** Sent in these parts, `gapMs` apart (slow bodies). */
  parts?: Buffer[];
  gapMs?: number;
  timeoutMs?: number;
  /** When given, the answer's code must be one of these. */
  codes?: ReadonlyArray<keyof typeof ERROR_CODES>;
}

interface Finding {
  cls: string;
  what: string;
  status: number;
  body: string;
}

/** Values of one arbitrary, reproducible from the run's seed and a salt. */
function sample<T>(arb: fc.Arbitrary<T>, n: number, salt: number): T[] {
  return fc.sample(arb, { seed: SEED + salt * 7919, numRuns: n });
}

function fill(path: string, ids: Record<string, string>): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => ids[name] ?? `${name.split("_")[0]}-unknown`);
}

function withQuery(url: string, route: Route, fx: Fixture, query?: string): string {
  if (query !== undefined) return `${url}?${query}`;
  if (route.queryParams.includes("download_token")) return `${url}?download_token=${validTokenFor(route, fx)}`;
  return url;
}

/** The token that would open a download route (the cases break something else). */
function validTokenFor(route: Route, fx: Fixture): string {
  if (route.path.includes("/config/download")) return fx.tokens.config;
  if (route.path.includes("/backups/export/")) return fx.tokens.snapshot;
  if (route.path.includes("/config-bulk/package/")) return fx.tokens.pkg;
  return fx.tokens.config;
}

function auth(route: Route, fx: Fixture): Array<[string, string]> {
  return route.admin ? [["Authorization", `Bearer ${fx.admin}`]] : [];
}

function json(route: Route, fx: Fixture, url: string, body: string | Buffer, extra: Array<[string, string]> = []): RawRequest {
  return { method: route.method, target: url, headers: [...auth(route, fx), ["Content-Type", "application/json"], ...extra], body };
}

/** The fields of a body schema, by JSON type (first `anyOf` branch that names a type). */
function fields(schema: JsonSchema | undefined): Array<{ name: string; s: JsonSchema }> {
  const props = schema?.properties ?? schema?.anyOf?.find((b) => b.properties)?.properties ?? {};
  return Object.entries(props).map(([name, s]) => ({ name, s: s.type ? s : (s.anyOf?.find((b) => b.type) ?? s) }));
}

/** A body that fails validation on `field` alone (the other fields absent or fixed to valid-looking values). */
function bodyWith(field: string, value: unknown): string {
  return JSON.stringify({ [field]: value });
}

// ---- the threat classes -------------------------------------------------------------------

type Gen = (routes: Route[], fx: Fixture) => Case[];

const bodyRoutes = (routes: Route[]) => routes.filter((r) => r.hasBody && r.bodyContentTypes.includes("application/json"));
const paramRoutes = (routes: Route[]) => routes.filter((r) => r.pathParams.length > 0);
// Routes taking either the admin token or a download token are driven by the download classes.
const adminRoutes = (routes: Route[]) => routes.filter((r) => r.admin && !r.queryParams.includes("download_token"));
const downloadRoutes = (routes: Route[]) => routes.filter((r) => r.queryParams.includes("download_token"));

/** Replaces each path parameter in turn with each value (everything else valid). */
function perParam(cls: string, routes: Route[], fx: Fixture, values: string[]): Case[] {
  const out: Case[] = [];
  for (const r of paramRoutes(routes)) {
    for (const name of r.pathParams) {
      for (const v of values) {
        const url = withQuery(fill(r.path, { ...fx.ids, [name]: v }), r, fx);
        out.push({ cls, req: r.hasBody ? json(r, fx, url, "{}") : { method: r.method, target: url, headers: auth(r, fx) } });
      }
    }
  }
  return out;
}

const CLASSES: Record<string, Gen> = {
  "malformed JSON": (routes, fx) => {
    const bad = ["{", "{\"a\":", "{\"a\" 1}", "{'a':1}", "{\"a\":1,}", "[1,2", "\uFEFF{\"a\"", "{\"a\":01}", "{\"a\":\"\\x41\"}", "nul", "{}{}", "{\"a\":\"\u0000\"", ...sample(fc.string({ maxLength: 12 }).map((s) => `{,${s}`), 3, 1)];
    return bodyRoutes(routes).flatMap((r) => bad.map((b) => ({ cls: "malformed JSON", req: json(r, fx, withQuery(fill(r.path, fx.ids), r, fx), b) })));
  },
  "JSON nested 10,000 deep": (routes, fx) =>
    bodyRoutes(routes).flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const arrays = `${"[".repeat(10_000)}${"]".repeat(10_000)}`;
      const objects = `${"{\"a\":".repeat(10_000)}1${"}".repeat(10_000)}`;
      const inField = `{"name":${"[".repeat(10_000)}${"]".repeat(10_000)}}`;
      return [arrays, objects, inField].map((b) => ({ cls: "JSON nested 10,000 deep", req: json(r, fx, url, b) }));
    }),
  "__proto__ / constructor keys": (routes, fx) =>
    bodyRoutes(routes).flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const first = fields(r.bodySchema)[0]?.name ?? "name";
      const bodies = [
        '{"__proto__":{"polluted":1}}',
        '{"constructor":{"prototype":{"polluted":1}}}',
        `{"${first}":{"__proto__":{"polluted":1}}}`,
        `{"${first}":"x","__proto__":{"isAdmin":true}}`,
        '{"a":[{"constructor":{"prototype":{"polluted":1}}}]}',
      ];
      return bodies.map((b) => ({ cls: "__proto__ / constructor keys", req: json(r, fx, url, b) }));
    }),
  "huge strings": (routes, fx) =>
    bodyRoutes(routes).flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const strs = fields(r.bodySchema).filter((f) => f.s.type === "string" || f.s.maxLength !== undefined);
      const targets = strs.length > 0 ? strs : [{ name: "name", s: {} }];
      return targets.flatMap((f) => [
        { cls: "huge strings", req: json(r, fx, url, bodyWith(f.name, "x".repeat(Math.max(65_536, (f.s.maxLength ?? 0) + 1)))) },
        { cls: "huge strings", req: json(r, fx, url, bodyWith(f.name, "\u{1F600}".repeat(100_000))) },
      ]);
    }),
  "huge arrays": (routes, fx) =>
    bodyRoutes(routes).flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const first = fields(r.bodySchema)[0]?.name ?? "name";
      return [
        { cls: "huge arrays", req: json(r, fx, url, JSON.stringify(Array.from({ length: 100_000 }, () => 0))) },
        { cls: "huge arrays", req: json(r, fx, url, bodyWith(first, Array.from({ length: 10_001 }, (_, i) => `node-${i}`))) },
      ];
    }),
  "numbers at and past bounds": (routes, fx) => {
    const out: Case[] = [];
    for (const r of bodyRoutes(routes)) {
      // At a bound the value is valid: the request still fails on its unknown resource (404) or
      // its missing fields (400). Past a bound it must fail validation.
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      for (const f of fields(r.bodySchema).filter((x) => x.s.type === "integer" || x.s.type === "number")) {
        const lo = f.s.minimum ?? 0;
        const hi = f.s.maximum ?? 2 ** 31;
        for (const v of [lo - 1, hi + 1, 2 ** 31, 2 ** 53 + 2, -(2 ** 53) - 2, 1e308, lo + 0.5, `${lo}`]) {
          out.push({ cls: "numbers at and past bounds", req: json(r, fx, url, bodyWith(f.name, v)) });
        }
        const unknown = withQuery(fill(r.path, {}), r, fx);
        if (r.pathParams.length > 0) {
          for (const v of [lo, hi]) out.push({ cls: "numbers at and past bounds", req: json(r, fx, unknown, bodyWith(f.name, v)), codes: ["NOT_FOUND", "VALIDATION_FAILED"] });
        }
      }
    }
    for (const r of routes.filter((x) => x.queryParams.includes("limit"))) {
      // One past the route's bound: every list's PAGE_LIMIT_MAX, the pair list's PAIR_PAGE_LIMIT_MAX.
      const pastMax = String((r.path.endsWith("/mesh-pairs") ? PAIR_PAGE_LIMIT_MAX : PAGE_LIMIT_MAX) + 1);
      for (const v of ["0", "-1", pastMax, "10001", "4294967297", "9007199254740993", "1e3", "0x10", "1.5", "", "%201", "1%00"]) {
        out.push({ cls: "numbers at and past bounds", req: { method: r.method, target: `${fill(r.path, fx.ids)}?limit=${v}`, headers: auth(r, fx) } });
      }
      // In bounds, a list without a path parameter (GET /api/v1/configs) answers its page: only
      // routes with a resource in the path can fail on an unknown one.
      for (const v of r.path.includes("{") ? ["1", "100"] : []) {
        out.push({ cls: "numbers at and past bounds", req: { method: r.method, target: `${fill(r.path, {})}?limit=${v}`, headers: auth(r, fx) }, codes: ["NOT_FOUND", "VALIDATION_FAILED"] });
      }
    }
    return out;
  },
  "NaN / Infinity / -0": (routes, fx) => {
    const out: Case[] = [];
    for (const r of bodyRoutes(routes)) {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const nums = fields(r.bodySchema).filter((x) => x.s.type === "integer" || x.s.type === "number");
      const name = nums[0]?.name ?? fields(r.bodySchema)[0]?.name ?? "x";
      for (const lit of ["NaN", "Infinity", "-Infinity", "1e309", "-1e309", "-0", "-0.0", "0e0"]) {
        out.push({ cls: "NaN / Infinity / -0", req: json(r, fx, url, `{"${name}":${lit}}`) });
      }
    }
    for (const r of routes.filter((x) => x.queryParams.includes("limit") || x.queryParams.includes("before"))) {
      for (const v of ["NaN", "Infinity", "-Infinity", "-0", "1e309"]) {
        for (const q of ["limit", "before"].filter((p) => r.queryParams.includes(p))) {
          out.push({ cls: "NaN / Infinity / -0", req: { method: r.method, target: `${fill(r.path, fx.ids)}?${q}=${v}`, headers: auth(r, fx) } });
        }
      }
    }
    return out;
  },
  "wrong content types": (routes, fx) =>
    routes
      .filter((r) => r.hasBody)
      .flatMap((r) => {
        const url = withQuery(fill(r.path, fx.ids), r, fx);
        const types = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "application/jsonx", "text/json", "image/png"];
        const out: Case[] = types.map((t) => ({ cls: "wrong content types", req: { method: r.method, target: url, headers: [...auth(r, fx), ["Content-Type", t]], body: "{\"name\":\"x\"}" } }));
        out.push({ cls: "wrong content types", req: { method: r.method, target: url, headers: auth(r, fx), body: "{\"name\":\"x\"}" } });
        return out;
      }),
  "duplicate headers": (routes, fx) =>
    routes.flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const bearer = `Bearer ${fx.admin}`;
      const cases: Case[] = [
        { cls: "duplicate headers", req: { method: r.method, target: url, headers: [["Authorization", bearer], ["Authorization", "Bearer x"]] } },
        { cls: "duplicate headers", req: { method: r.method, target: url, headers: [["Authorization", "Bearer x"], ["Authorization", bearer]] } },
        { cls: "duplicate headers", req: { method: r.method, target: url, headers: [...auth(r, fx), ["Content-Length", "2"], ["Content-Length", "3"]], body: "{}", autoLength: false } },
        { cls: "duplicate headers", req: { method: r.method, target: url, headers: [...auth(r, fx), ["Host", "a"], ["Host", "b"]] } },
      ];
      if (r.hasBody) {
        cases.push({ cls: "duplicate headers", req: { method: r.method, target: url, headers: [...auth(r, fx), ["Content-Type", "application/json"], ["Content-Type", "text/plain"]], body: "{}" } });
      }
      return cases;
    }),
  "oversized headers": (routes, fx) =>
    routes.flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      return [
        { cls: "oversized headers", req: { method: r.method, target: url, headers: [...auth(r, fx), ["X-Filler", "a".repeat(20_000)]] }, codes: ["HEADERS_TOO_LARGE"] as const },
        { cls: "oversized headers", req: { method: r.method, target: url, headers: [...auth(r, fx), ...Array.from({ length: 300 }, (_, i): [string, string] => [`X-H${i}`, "b".repeat(60)])] }, codes: ["HEADERS_TOO_LARGE"] as const },
        { cls: "oversized headers", req: { method: r.method, target: `${url}${url.includes("?") ? "&" : "?"}pad=${"c".repeat(20_000)}`, headers: auth(r, fx) }, codes: ["HEADERS_TOO_LARGE"] as const },
      ];
    }),
  "ids with / + # NUL % ..": (routes, fx) =>
    perParam("ids with / + # NUL % ..", routes, fx, ["a%2Fb", "a+b", "a%2Bb", "a%23b", "a%00b", "%", "a%zz", "%25", "..", "%2e%2e", "a..b%2F..", "a;b", "a%0d%0ab"]),
  "Unicode confusables in ids": (routes, fx) => {
    const real = fx.ids.config_id ?? "config";
    const swaps = [
      real.replace(/[aceopx]/, (c) => ({ a: "\u0430", c: "\u0441", e: "\u0435", o: "\u043e", p: "\u0440", x: "\u0445" })[c] ?? c),
      real.toUpperCase(),
      `${real}\u200b`,
      `\u202e${real}`,
      // Each swap falls back to adding the character, so the count does not depend on the random id.
      /[ksi]/.test(real) ? real.replace(/k|s|i/, (c) => ({ k: "\u212a", s: "\u017f", i: "\u0131" })[c] ?? c) : `${real}\u212a`,
      /[0-9]/.test(real) ? real.replace(/[0-9]/, (d) => String.fromCharCode(0xff10 + Number(d))) : `${real}\uff11`,
      `${real}\u0301`,
      /e/.test(real) ? real.replace(/e/, "e\u0301") : `e\u0301${real}`,
    ].map((s) => encodeURIComponent(s));
    return perParam("Unicode confusables in ids", routes, fx, [...new Set(swaps)].filter((s) => s !== real));
  },
  "SQL metacharacters": (routes, fx) => {
    const sql = ["' OR '1'='1", "1; DROP TABLE nodes; --", "\" OR \"\"=\"", "%' --", "x' UNION SELECT token_hash FROM admin_sessions --", "\\'; --", "1) OR (1=1"];
    const out = perParam("SQL metacharacters", routes, fx, sql.map((s) => encodeURIComponent(s)));
    for (const r of bodyRoutes(routes)) {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      for (const f of fields(r.bodySchema).filter((x) => x.s.type === "string" && (x.s.enum || x.name.endsWith("_id") || x.name.startsWith("node_") || x.name.endsWith("address") || x.name === "network_cidr" || x.name === "bind_token"))) {
        for (const s of sql) out.push({ cls: "SQL metacharacters", req: json(r, fx, url, bodyWith(f.name, s)) });
      }
    }
    for (const r of downloadRoutes(routes)) {
      for (const s of sql) out.push({ cls: "SQL metacharacters", req: { method: r.method, target: `${fill(r.path, fx.ids)}?download_token=${encodeURIComponent(s)}`, headers: [] } });
    }
    return out;
  },
  "path traversal in path and file parameters": (routes, fx) => {
    const trav = ["..%2F..%2Fetc%2Fpasswd", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "..%5C..%5Cwindows", "%252e%252e%252f", "....%2F%2F", "%2Fetc%2Fpasswd", "..%c0%af..%c0%afetc", "snapshot%2F..%2F..%2Fsvc.db"];
    const out = perParam("path traversal in path and file parameters", routes, fx, trav);
    for (const r of downloadRoutes(routes)) {
      for (const t of trav) out.push({ cls: "path traversal in path and file parameters", req: { method: r.method, target: `${fill(r.path, fx.ids)}?download_token=${t}`, headers: [] } });
    }
    // Raw (unencoded) dot segments in the request target.
    for (const t of ["/api/v1/../../etc/passwd", "/api/v1/backups/export/../../../etc/passwd", "/api/v1/tools/download/client-artifacts/..%2f..%2fsvc.db"]) {
      out.push({ cls: "path traversal in path and file parameters", req: { method: "GET", target: t, headers: [["Authorization", `Bearer ${fx.admin}`]] } });
    }
    return out;
  },
  "snapshot zips with traversal and garbage": (routes, fx) =>
    routes
      .filter((r) => r.bodyContentTypes.includes("application/zip"))
      .flatMap((r) => [...zipCases(fx)].map((body) => ({ cls: "snapshot zips with traversal and garbage", req: { method: r.method, target: r.path, headers: [...auth(r, fx), ["Content-Type", "application/zip"]], body } }))),
  "tokens of the wrong kind": (routes, fx) => {
    const out: Case[] = [];
    const wrong = [fx.tokens.config, fx.tokens.snapshot, fx.tokens.bind, fx.tokens.pkg];
    for (const r of adminRoutes(routes)) {
      for (const t of wrong) out.push({ cls: "tokens of the wrong kind", req: { ...bare(r, fx), headers: [["Authorization", `Bearer ${t}`], ...bodyHeaders(r)] }, codes: ["UNAUTHORIZED"] });
    }
    for (const r of downloadRoutes(routes)) {
      for (const t of [fx.admin, fx.tokens.bind, ...wrong.filter((w) => w !== validTokenFor(r, fx))]) {
        out.push({ cls: "tokens of the wrong kind", req: { method: r.method, target: `${fill(r.path, fx.ids)}?download_token=${t}`, headers: [] } });
      }
    }
    for (const r of routes.filter((x) => x.path === "/api/client/bind")) {
      for (const t of [fx.admin, ...wrong.filter((w) => w !== fx.tokens.bind)]) out.push({ cls: "tokens of the wrong kind", req: json(r, fx, r.path, bindBody(t)) });
    }
    return out;
  },
  "tokens for another resource": (routes, fx) => {
    const out: Case[] = [];
    for (const r of downloadRoutes(routes)) {
      const own = validTokenFor(r, fx);
      const other = own === fx.tokens.config ? fx.tokens.configOther : own === fx.tokens.snapshot ? fx.tokens.snapshotOther : fx.tokens.config;
      out.push({ cls: "tokens for another resource", req: { method: r.method, target: `${fill(r.path, fx.ids)}?download_token=${other}`, headers: [] }, codes: ["DOWNLOAD_TOKEN_SCOPE_MISMATCH", "INVALID_DOWNLOAD_TOKEN"] });
      // The own token on another resource's URL.
      out.push({ cls: "tokens for another resource", req: { method: r.method, target: `${fill(r.path, fx.otherIds)}?download_token=${own}`, headers: [] }, codes: ["DOWNLOAD_TOKEN_SCOPE_MISMATCH", "INVALID_DOWNLOAD_TOKEN", "NOT_FOUND"] });
    }
    return out;
  },
  "truncated and altered tokens": (routes, fx) => {
    const alter = (t: string) => [t.slice(0, -1), t.slice(0, t.length >> 1), `${t}A`, flip(t), t.toUpperCase(), t.toLowerCase(), `${t.slice(1)}${t[0]}`].filter((x) => x !== t);
    const out: Case[] = [];
    for (const r of adminRoutes(routes)) {
      for (const t of sample(fc.constantFrom(...alter(fx.admin)), 3, r.path.length)) out.push({ cls: "truncated and altered tokens", req: { ...bare(r, fx), headers: [["Authorization", `Bearer ${t}`], ...bodyHeaders(r)] }, codes: ["UNAUTHORIZED"] });
    }
    for (const r of downloadRoutes(routes)) {
      for (const t of alter(validTokenFor(r, fx))) out.push({ cls: "truncated and altered tokens", req: { method: r.method, target: `${fill(r.path, fx.ids)}?download_token=${encodeURIComponent(t)}`, headers: [] } });
    }
    for (const r of routes.filter((x) => x.path === "/api/client/bind")) {
      for (const t of alter(fx.tokens.bind)) out.push({ cls: "truncated and altered tokens", req: json(r, fx, r.path, bindBody(t)) });
    }
    return out;
  },
  "tokens replayed after revocation": (routes, fx) => {
    const out: Case[] = [];
    for (const r of adminRoutes(routes)) out.push({ cls: "tokens replayed after revocation", req: { ...bare(r, fx), headers: [["Authorization", `Bearer ${fx.revoked.admin}`], ...bodyHeaders(r)] }, codes: ["UNAUTHORIZED"] });
    for (const r of routes.filter((x) => x.path === "/api/client/bind")) {
      for (const t of [fx.revoked.bindAfterReset, fx.revoked.bindRegenerated]) out.push({ cls: "tokens replayed after revocation", req: json(r, fx, r.path, bindBody(t)), codes: ["INVALID_BIND_TOKEN", "BIND_TOKEN_USED"] });
    }
    return out;
  },
  "bearer whitespace and case games": (routes, fx) => {
    const t = fx.admin;
    const games = [`Bearer  ${t}`, `Bearer\t${t}`, `Bearer ${t} ${t}`, `Bearer${t}`, "Bearer", `Basic ${t}`, `Token ${t}`, `Bearer ${t},`, `Bearer "${t}"`, `Bearer ${swapCase(t)}`, `Bearer ${Buffer.from(t).toString("base64")}`, `Bearer ${t.slice(0, 10)} ${t.slice(10)}`, `Bearer Bearer ${t}`, `Bearer\u00a0${t}`];
    return adminRoutes(routes).flatMap((r) =>
      sample(fc.shuffledSubarray(games, { minLength: 5, maxLength: 5 }), 1, r.path.length + r.method.length)[0]?.map((g) => ({
        cls: "bearer whitespace and case games",
        req: { ...bare(r, fx), headers: [["Authorization", g], ...bodyHeaders(r)] },
      })) ?? [],
    );
  },
  "CIDRs and addresses at the edges": (routes, fx) => {
    const out: Case[] = [];
    const cidrs = ["0.0.0.0/0", "::ffff:10.0.0.0/104", "::ffff:10.0.0.0/8", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/", "/24", "10.0.0.0/24 ", "010.000.000.000/24", "10.0.0.0/0x18", "127.0.0.0/8", "224.0.0.0/4", "169.254.0.0/16", "255.255.255.255/32", "0.0.0.0/8", "10.0.0.0/1", "1e1.0.0.0/24", "10.0.0.0/24/24"];
    // A port forward's target may be any IPv4 address (0.0.0.0, 255.255.255.255 and the network's
    // own network address are accepted there: reported to the lead), so the unspecified,
    // broadcast, network and outside addresses go to node addresses only.
    const addresses = ["::ffff:10.20.0.5", "::ffff:127.0.0.1", "010.020.000.005", "10.20.0.5/32", "10.20.0.256", "::1"];
    for (const r of bodyRoutes(routes)) {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      for (const f of fields(r.bodySchema)) {
        if (f.name === "network_cidr") for (const c of cidrs) out.push({ cls: "CIDRs and addresses at the edges", req: json(r, fx, url, JSON.stringify({ name: "edge", tunnel_protocol: "wireguard", [f.name]: c })) });
        if (f.name === "address") for (const a of ["0.0.0.0", "255.255.255.255", "10.20.0.0", "10.20.0.255", "10.99.0.1", "10.20.0.2" /* n2's: overlapping */]) out.push({ cls: "CIDRs and addresses at the edges", req: json(r, fx, url, JSON.stringify({ name: "edge", mode: "static", address: a })) });
        if (f.name === "address" || f.name === "target_address") {
          for (const a of addresses) out.push({ cls: "CIDRs and addresses at the edges", req: json(r, fx, url, JSON.stringify(f.name === "address" ? { name: "edge", mode: "static", address: a } : { protocol: "tcp", listen_port: 1, target_address: a, target_port: 1, ...(r.method === "PATCH" ? { listen_port: 0 } : {}) })) });
        }
      }
    }
    return out;
  },
  "oversized bodies": (routes, fx) =>
    routes
      .filter((r) => r.hasBody || r.method !== "GET")
      .flatMap((r) => {
        const url = withQuery(fill(r.path, fx.ids), r, fx);
        const ct = r.bodyContentTypes.includes("application/json") || !r.hasBody ? "application/json" : (r.bodyContentTypes[0] ?? "application/json");
        const big = ct === "application/json" ? JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) }) : Buffer.alloc(2 * 1024 * 1024, 7);
        const limit = ct === "application/json";
        const cases: Case[] = [
          { cls: "oversized bodies", req: { method: r.method, target: url, headers: [...auth(r, fx), ["Content-Type", ct], ["Content-Length", "99999999999"]], body: "{}", autoLength: false }, timeoutMs: 5000 },
        ];
        if (limit) {
          cases.push({ cls: "oversized bodies", req: { method: r.method, target: url, headers: [...auth(r, fx), ["Content-Type", ct]], body: big }, codes: r.path === "/api/internal/emqx/authz" ? ["PAYLOAD_TOO_LARGE", "UNAUTHORIZED"] : ["PAYLOAD_TOO_LARGE"] });
          cases.push({ cls: "oversized bodies", req: { method: r.method, target: url, headers: [...auth(r, fx), ["Content-Type", ct], ["Transfer-Encoding", "chunked"]], body: chunked(big) }, codes: r.path === "/api/internal/emqx/authz" ? ["PAYLOAD_TOO_LARGE", "UNAUTHORIZED"] : ["PAYLOAD_TOO_LARGE"] });
        }
        return cases;
      }),
  "slow and unfinished bodies": (routes, fx) =>
    bodyRoutes(routes).flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const head = encode({ method: r.method, target: url, headers: [...auth(r, fx), ["Content-Type", "application/json"], ["Content-Length", "64"]] });
      return [
        // Ten bytes, then nothing: the server must give up at its request timeout.
        { cls: "slow and unfinished bodies", req: { method: r.method, target: url }, parts: [head, Buffer.from("{\"name\":\"x")], timeoutMs: REQUEST_TIMEOUT_MS + 15_000, codes: slowCodes(r) },
        // One byte every 300 ms: never finished within the request timeout.
        { cls: "slow and unfinished bodies", req: { method: r.method, target: url }, parts: [head, ...Array.from({ length: 12 }, () => Buffer.from(" "))], gapMs: 300, timeoutMs: REQUEST_TIMEOUT_MS + 15_000, codes: slowCodes(r) },
      ];
    }),
  "unknown and overridden methods": (routes, fx) => {
    const paths = [...new Set(routes.map((r) => r.path))];
    const out: Case[] = [];
    for (const p of paths) {
      const have = new Set(routes.filter((r) => r.path === p).map((r) => r.method));
      const url = fill(p, fx.ids);
      for (const m of ["PUT", "PATCH", "DELETE", "POST", "OPTIONS", "PROPFIND"].filter((x) => !have.has(x)).slice(0, 3)) {
        out.push({ cls: "unknown and overridden methods", req: { method: m, target: url, headers: [["Authorization", `Bearer ${fx.admin}`]] } });
      }
      // A GET with an override header must not run a DELETE.
      if (have.has("DELETE") && !have.has("GET")) out.push({ cls: "unknown and overridden methods", req: { method: "GET", target: url, headers: [["Authorization", `Bearer ${fx.admin}`], ["X-HTTP-Method-Override", "DELETE"]] } });
    }
    return out;
  },
  "query pollution": (routes, fx) =>
    routes
      .filter((r) => r.queryParams.length > 0)
      .flatMap((r) => {
        const base = fill(r.path, fx.ids);
        const q = r.queryParams[0] ?? "x";
        const good = r.queryParams.includes("download_token") ? validTokenFor(r, fx) : "1";
        const bad = r.queryParams.includes("download_token") ? "x" : "0";
        return [`${q}=${good}&${q}=${bad}`, `${q}=${bad}&${q}=${good}`, `${q}[]=${good}`, `${q}[a]=${good}`, `__proto__[${q}]=${good}&${q}=${bad}`, `constructor[prototype][${q}]=1&${q}=${bad}`, `${q}=${bad}%00${good}`].map((query) => ({
          cls: "query pollution",
          req: { method: r.method, target: `${base}?${query}`, headers: auth(r, fx) },
        }));
      }),
  "invalid UTF-8 and lone surrogates": (routes, fx) =>
    bodyRoutes(routes).flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const f = fields(r.bodySchema).find((x) => x.s.enum || x.name.endsWith("_id") || x.name.startsWith("node_") || x.name === "bind_token" || x.name.endsWith("address")) ?? { name: "x" };
      const raw = (bytes: number[]) => Buffer.concat([Buffer.from(`{"${f.name}":"`), Buffer.from(bytes), Buffer.from("\"}")]);
      return [raw([0xff, 0xfe]), raw([0xc0, 0xaf]), raw([0xed, 0xa0, 0x80]), Buffer.from(`{"${f.name}":"\\ud800"}`), Buffer.from(`{"${f.name}":"\\udfff\\ud800"}`)].map((b) => ({ cls: "invalid UTF-8 and lone surrogates", req: json(r, fx, url, b) }));
    }),
  "request smuggling and framing": (routes, fx) =>
    routes.filter((r) => r.method !== "GET").flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      const h = [...auth(r, fx), ["Content-Type", "application/json"]] as Array<[string, string]>;
      return [
        { cls: "request smuggling and framing", req: { method: r.method, target: url, headers: [...h, ["Content-Length", "2"], ["Transfer-Encoding", "chunked"]], body: "2\r\n{}\r\n0\r\n\r\n", autoLength: false } },
        { cls: "request smuggling and framing", req: { method: r.method, target: url, headers: [...h, ["Transfer-Encoding", "chunked"]], body: "zz\r\n{}\r\n0\r\n\r\n", autoLength: false } },
        { cls: "request smuggling and framing", req: { method: r.method, target: url, headers: [...h, ["Transfer-Encoding", "gzip, chunked"]], body: "2\r\n{}\r\n0\r\n\r\n", autoLength: false } },
        { cls: "request smuggling and framing", req: { method: r.method, target: url, headers: [...h, ["Content-Length", "+2"]], body: "{}", autoLength: false } },
        { cls: "request smuggling and framing", req: { method: r.method, target: url, headers: [...h, ["Content-Length", "-1"]], body: "{}", autoLength: false } },
      ] as Case[];
    }),
  "request line and Host games": (routes, fx) =>
    routes.slice(0, 30).flatMap((r) => {
      const url = withQuery(fill(r.path, fx.ids), r, fx);
      return [
        { cls: "request line and Host games", req: { method: r.method, target: url.replace(/^\/api\/([a-z0-9]+)/, (_m, seg: string) => `/api/${seg.toUpperCase()}`), headers: auth(r, fx) } },
        { cls: "request line and Host games", req: { method: r.method, target: `${url}%`, headers: auth(r, fx) } },
        { cls: "request line and Host games", req: { method: r.method, target: url.replace("/api/", "/api//").replace(/\/(?=[^/]*$)/, "//"), headers: auth(r, fx) } },
        { cls: "request line and Host games", req: { method: r.method, target: `${url}\u0000`.replace("\u0000", "%00"), headers: auth(r, fx) } },
      ];
    }),
  "broker authz hook without its key": (routes) =>
    routes
      .filter((r) => r.path === "/api/internal/emqx/authz")
      .flatMap((r) => {
        const body = JSON.stringify({ clientid: "c", username: "backend", action: "publish", topic: "#" });
        return ["", "x", "Bearer x", " ".repeat(20), "A".repeat(64), "a".repeat(2000)].map((key) => ({
          cls: "broker authz hook without its key",
          req: { method: r.method, target: r.path, headers: [["Content-Type", "application/json"], ...(key === "" ? [] : [["X-Svc-Internal-Key", key] as [string, string]])], body },
          codes: ["UNAUTHORIZED", "FORBIDDEN", "VALIDATION_FAILED"] as const,
        }));
      }),
  "login password guessing": (routes) =>
    routes
      .filter((r) => r.path === "/api/v1/auth/login")
      .flatMap((r) =>
        [
          ...sample(fc.string({ unit: "grapheme", minLength: 1, maxLength: 64 }), 40, 3).filter((p) => p !== ADMIN_PASSWORD).map((p) => JSON.stringify({ password: p })),
          JSON.stringify({ password: ADMIN_PASSWORD.toUpperCase() }),
          JSON.stringify({ password: `${ADMIN_PASSWORD} ` }),
          JSON.stringify({ password: [ADMIN_PASSWORD] }),
          JSON.stringify({ password: { $ne: "" } }),
          JSON.stringify({ password: ADMIN_PASSWORD.slice(0, -1) }),
        ].map((body) => ({ cls: "login password guessing", req: { method: r.method, target: r.path, headers: [["Content-Type", "application/json"]], body }, codes: ["UNAUTHORIZED", "VALIDATION_FAILED"] as const })),
      ),
};

/** The broker's authz hook refuses a missing key before it reads the body. */
function slowCodes(r: Route): ReadonlyArray<keyof typeof ERROR_CODES> {
  return r.path === "/api/internal/emqx/authz" ? ["REQUEST_TIMEOUT", "UNAUTHORIZED"] : ["REQUEST_TIMEOUT"];
}

/** A bind request complete but for its token. */
function bindBody(token: string): string {
  return JSON.stringify({ bind_token: token, server_url: "http://127.0.0.1:8080", client_version: "0.1.0", platform: "linux-amd64", hostname: "fuzz" });
}

function bare(r: Route, fx: Fixture): RawRequest {
  return { method: r.method, target: withQuery(fill(r.path, fx.ids), r, fx), ...(r.hasBody ? { body: "{}" } : {}) };
}

function bodyHeaders(r: Route): Array<[string, string]> {
  return r.hasBody ? [["Content-Type", r.bodyContentTypes.includes("application/json") ? "application/json" : "application/zip"]] : [];
}

function flip(t: string): string {
  const i = t.length >> 1;
  return `${t.slice(0, i)}${t[i] === "A" ? "B" : "A"}${t.slice(i + 1)}`;
}

function swapCase(t: string): string {
  return [...t].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join("");
}

function chunked(body: string | Buffer): Buffer {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const parts: Buffer[] = [];
  for (let at = 0; at < buf.length; at += 65_536) {
    const c = buf.subarray(at, at + 65_536);
    parts.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from("\r\n"));
  }
  parts.push(Buffer.from("0\r\n\r\n"));
  return Buffer.concat(parts);
}

/** Snapshot uploads (built once by {@link buildZips}): entries that climb out of the work directory, absolute paths, garbage. */
function zipCases(_fx: Fixture): Buffer[] {
  return ZIPS;
}
const ZIPS: Buffer[] = [];

async function buildZips(): Promise<void> {
  const make = (entries: Array<[string, string]>, rename?: [string, string]) =>
    new Promise<Buffer>((resolve) => {
      const z = new yazl.ZipFile();
      for (const [name, text] of entries) z.addBuffer(Buffer.from(text), name);
      z.end();
      const chunks: Buffer[] = [];
      z.outputStream.on("data", (c: Buffer) => chunks.push(c));
      z.outputStream.on("end", () => {
        let buf = Buffer.concat(chunks);
        if (rename) buf = Buffer.from(buf.toString("latin1").replaceAll(rename[0], rename[1]), "latin1");
        resolve(buf);
      });
    });
  const manifest = JSON.stringify({ format: 1, kind: "snapshot" });
  ZIPS.push(
    await make([["XX/XX/evil.txt", "x"], ["manifest.json", manifest]], ["XX/XX/evil.txt", "../../evil.txt"]),
    await make([["XXXXXXXX", "x"], ["manifest.json", manifest]], ["XXXXXXXX", "/etc/x.."]),
    await make([["manifest.json", "{"]]),
    await make([["manifest.json", manifest], ["svc.db", "not a database"]]),
    await make([["manifest.json", "{\"__proto__\":{\"polluted\":1}}"]]),
    Buffer.from("PK\u0003\u0004garbage"),
    Buffer.alloc(0),
    Buffer.from(sample(fc.uint8Array({ minLength: 1, maxLength: 4096 }), 1, 99)[0] ?? [1]),
  );
}

// ---- the run ------------------------------------------------------------------------------

async function routesOf(port: number, token: string): Promise<Route[]> {
  const res = await rawExchange(port, [encode({ method: "GET", target: "/api/v1/openapi.json", headers: [["Authorization", `Bearer ${token}`]] })]);
  assert.equal(res.status, 200, res.body.slice(0, 200));
  const doc = JSON.parse(res.body) as { paths: Record<string, Record<string, { parameters?: Array<{ in: string; name: string }>; requestBody?: { content: Record<string, { schema?: JsonSchema }> }; security?: unknown[] }>> };
  const out: Route[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const content = op.requestBody?.content ?? {};
      out.push({
        method: method.toUpperCase(),
        path,
        pathParams: (op.parameters ?? []).filter((p) => p.in === "path").map((p) => p.name),
        queryParams: (op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name),
        hasBody: op.requestBody !== undefined || path === "/api/v1/backups/import",
        bodyContentTypes: path === "/api/v1/backups/import" ? ["application/zip"] : Object.keys(content),
        bodySchema: content["application/json"]?.schema,
        admin: !(Array.isArray(op.security) && op.security.length === 0),
      });
    }
  }
  return out;
}

/**
 * SHA-256 over every row of every table but `audit_log`: a refused request appends its audit
 * entry there by design (README "Audit log"); "changes nothing" means the installation's state.
 */
function fingerprint(server: AppContext): string {
  const sqlite = sqliteOf(server.store);
  const tables = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'audit_log' ORDER BY name").all() as Array<{ name: string }>;
  const hash = createHash("sha256");
  for (const { name } of tables) {
    hash.update(`#${name}\n`);
    for (const row of sqlite.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all()) hash.update(JSON.stringify(row));
  }
  return hash.digest("hex");
}

/** Sets up what the cases aim at: two of each resource and tokens of every kind. */
async function fixture(port: number, clock: ManualClock): Promise<Fixture> {
  const call = async (method: string, target: string, token: string | undefined, body?: unknown) => {
    const res = await rawExchange(port, [encode({ method, target, headers: [...(token ? [["Authorization", `Bearer ${token}`] as [string, string]] : []), ...(body === undefined ? [] : [["Content-Type", "application/json"] as [string, string]])], ...(body === undefined ? {} : { body: JSON.stringify(body) }) })]);
    assert.ok(res.status >= 200 && res.status < 300, `${method} ${target}: ${res.status} ${res.body.slice(0, 300)}`);
    return res.body === "" ? {} : (JSON.parse(res.body) as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any -- fixture answers
  };
  const login = async () => (await call("POST", "/api/v1/auth/login", undefined, { password: ADMIN_PASSWORD })).access_token as string;
  const admin = await login();
  const cfg = await call("POST", "/api/v1/configs", admin, { name: "mesh-a", tunnel_protocol: "wireguard", network_cidr: "10.20.0.0/24" });
  const cfg2 = await call("POST", "/api/v1/configs", admin, { name: "mesh-b", tunnel_protocol: "awg_2", network_cidr: "10.30.0.0/24" });
  const base = `/api/v1/configs/${cfg.config_id}`;
  const n1 = await call("POST", `${base}/nodes`, admin, { name: "n1", mode: "static", public_address: "192.0.2.10" });
  const n2 = await call("POST", `${base}/nodes`, admin, { name: "n2", mode: "dynamic", public_address: "192.0.2.11" });
  const pairs = await call("GET", `${base}/mesh-pairs`, admin);
  const pf = await call("POST", `${base}/nodes/${n1.node_id}/port-forwards`, admin, { protocol: "tcp", listen_port: 8080, target_address: n2.address, target_port: 80 });
  const pf2 = await call("POST", `${base}/nodes/${n1.node_id}/port-forwards`, admin, { protocol: "udp", listen_port: 8081, target_address: n2.address, target_port: 81 });
  const dl1 = await call("POST", `${base}/nodes/${n1.node_id}/download-token`, admin);
  const dl2 = await call("POST", `${base}/nodes/${n2.node_id}/download-token`, admin);
  const s1 = await call("POST", "/api/v1/backups", admin);
  const s2 = await call("POST", "/api/v1/backups", admin);
  const st1 = await call("POST", `/api/v1/backups/${s1.snapshot_id}/download-token`, admin);
  const st2 = await call("POST", `/api/v1/backups/${s2.snapshot_id}/download-token`, admin);
  const pkg = await call("POST", "/api/v1/tools/download/config-bulk/package", admin, { config_ids: [cfg.config_id] });
  // Bind tokens: one invalidated by reset-client, one by regeneration, one live.
  const nodeUrl = `${base}/nodes/${n2.node_id}`;
  const bindToken = async () => /--token (\S+)/.exec((await call("POST", `${nodeUrl}/bind-command`, admin)).command as string)?.[1] ?? "";
  const bindAfterReset = await bindToken();
  await call("POST", `${nodeUrl}/reset-client`, admin);
  const bindRegenerated = await bindToken();
  const bind = await bindToken();
  const revokedAdmin = await login();
  await call("POST", "/api/v1/auth/logout", revokedAdmin);
  const packageId = pkg.package_id as string;
  void clock;
  return {
    ids: { config_id: cfg.config_id, node_id: n1.node_id, pair_id: pairs.mesh_pairs[0].pair_id, forward_id: pf.forward_id, snapshot_id: s1.snapshot_id, package_id: packageId, artifact_id: "artifact-unknown" },
    otherIds: { config_id: cfg2.config_id, node_id: n2.node_id, pair_id: pairs.mesh_pairs[0].pair_id, forward_id: pf2.forward_id, snapshot_id: s2.snapshot_id, package_id: "package-other", artifact_id: "artifact-other" },
    admin,
    tokens: { config: dl1.download_token, configOther: dl2.download_token, snapshot: st1.download_token, snapshotOther: st2.download_token, pkg: pkg.download_token, bind },
    revoked: { admin: revokedAdmin, bindAfterReset, bindRegenerated },
  };
}

/** The refusal rules of one answer; a message per broken rule. */
function judge(c: Case, res: RawAnswer, path: string): string | undefined {
  if (res.status === -1) return "no answer within the timeout";
  if (res.status === 0) return "connection closed without an HTTP answer";
  if (res.status >= 500) return `5xx (${res.status})`;
  if (res.status < 400) return `accepted (${res.status})`;
  if (/root:.*:0:0:/.test(res.body)) return "leaked /etc/passwd";
  let body: { error?: { code?: string; message?: unknown }; jsonrpc?: string };
  try {
    body = JSON.parse(res.body) as typeof body;
  } catch {
    return `not a JSON error body: ${JSON.stringify(res.body.slice(0, 80))}`;
  }
  // The MCP endpoint speaks JSON-RPC (its protocol's error shape) once past our auth.
  if (path.endsWith("/mcp") && body.jsonrpc === "2.0") return undefined;
  const code = body.error?.code as keyof typeof ERROR_CODES | undefined;
  if (code === undefined || !(code in ERROR_CODES)) return `unregistered error code ${String(code)}`;
  if (ERROR_CODES[code].status !== res.status) return `status ${res.status} is not ${code}'s ${ERROR_CODES[code].status}`;
  if (typeof body.error?.message !== "string") return "error without a message";
  if (c.codes && !c.codes.includes(code)) return `code ${code}, expected one of ${c.codes.join(", ")}`;
  return undefined;
}

test("DESIGN §3, spec §5/§7: ≥ 1,000 generated hostile requests over ≥ 25 threat classes against every OpenAPI route answer a registered 4xx error, never a success or 5xx, and change nothing", { timeout: 120_000 }, async (t) => {
  console.log(`http-fuzz seed: ${SEED} (replay with HTTP_FUZZ_SEED=${SEED})`);
  const started = Date.now();
  const dataDir = mkdtempSync(join(tmpdir(), "svc-fuzz-"));
  const clock = new ManualClock();
  const settings = testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, authRateLimitMax: 100_000, httpRequestTimeoutMs: REQUEST_TIMEOUT_MS } as Partial<ReturnType<typeof testSettings>>);
  const server = await createServer(settings, createLogger("silent"), { clock });
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const address = await server.app.listen({ host: "127.0.0.1", port: 0 });
  const port = Number(new URL(address).port);
  const fx = await fixture(port, clock);
  await buildZips();
  const routes = await routesOf(port, fx.admin);
  assert.ok(routes.length >= 40, `routes from the OpenAPI document: ${routes.length}`);

  const cases: Case[] = [];
  let salt = 0;
  for (const [name, gen] of Object.entries(CLASSES)) {
    const made = gen(routes, fx);
    assert.ok(made.length > 0, `class ${name} generated no request`);
    for (const c of made) cases.push({ ...c, cls: name });
    salt++;
  }
  void salt;
  const counts = new Map<string, number>();
  const findings: Finding[] = [];
  const routeHits = new Set<string>();
  const record = (c: Case, res: RawAnswer, before: string) => {
    counts.set(c.cls, (counts.get(c.cls) ?? 0) + 1);
    const path = c.req.target.split("?")[0] ?? "";
    const broken = judge(c, res, path);
    const what = `${c.req.method} ${c.req.target.slice(0, 160)} [${(c.req.headers ?? []).map(([k, v]) => `${k}: ${v.slice(0, 30)}`).join("; ").slice(0, 200)}] body ${c.req.body === undefined ? "-" : JSON.stringify(c.req.body.toString().slice(0, 80))}`;
    if (broken) findings.push({ cls: c.cls, what: `${broken}: ${what}`, status: res.status, body: res.body.slice(0, 300) });
    if (c.req.method !== "GET" && fingerprint(server) !== before) findings.push({ cls: c.cls, what: `database changed: ${what}`, status: res.status, body: res.body.slice(0, 300) });
  };
  for (const r of routes) routeHits.add(`${r.method} ${r.path}`);

  // Slow bodies run first, concurrently (each waits for the server's request timeout); the DB is
  // checked once they all ended.
  const slow = cases.filter((c) => c.parts !== undefined);
  const slowBefore = fingerprint(server);
  const slowRuns = await Promise.all(slow.map(async (c) => ({ c, res: await rawExchange(port, c.parts ?? [], { timeoutMs: c.timeoutMs ?? 10_000, gapMs: c.gapMs ?? 0 }) })));
  for (const { c, res } of slowRuns) record(c, res, slowBefore);
  for (const c of cases.filter((x) => x.parts === undefined)) {
    const before = c.req.method === "GET" ? "" : fingerprint(server);
    const res = await rawExchange(port, [encode(c.req)], { timeoutMs: c.timeoutMs ?? 10_000 });
    record(c, res, before);
  }
  // Expired tokens: download and bind tokens (5 minutes), then the admin session (12 hours).
  clock.advance(6 * 60 * 1000);
  for (const r of downloadRoutes(routes)) {
    const c: Case = { cls: "expired tokens", req: { method: r.method, target: `${fill(r.path, fx.ids)}?download_token=${validTokenFor(r, fx)}`, headers: [] }, codes: ["INVALID_DOWNLOAD_TOKEN"] };
    record(c, await rawExchange(port, [encode(c.req)]), fingerprint(server));
  }
  for (const r of routes.filter((x) => x.path === "/api/client/bind")) {
    const c: Case = { cls: "expired tokens", req: json(r, fx, r.path, bindBody(fx.tokens.bind)), codes: ["INVALID_BIND_TOKEN"] };
    record(c, await rawExchange(port, [encode(c.req)]), fingerprint(server));
  }
  clock.advance(12 * 3600 * 1000);
  for (const r of adminRoutes(routes)) {
    const c: Case = { cls: "expired tokens", req: { ...bare(r, fx), headers: [["Authorization", `Bearer ${fx.admin}`], ...bodyHeaders(r)] }, codes: ["UNAUTHORIZED"] };
    const before = fingerprint(server);
    record(c, await rawExchange(port, [encode(c.req)]), before);
  }
  assert.equal(({} as Record<string, unknown>).polluted, undefined, "Object.prototype polluted");

  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  const rows = [...counts.entries()].map(([cls, n]) => `| ${cls} | ${n} | ${findings.filter((f) => f.cls === cls).length} |`);
  console.log(["| threat class | requests | findings |", "|---|---:|---:|", ...rows, `| **total** (${counts.size} classes, ${routeHits.size} routes) | ${total} | ${findings.length} |`].join("\n"));
  console.log(`accepted that should not be: ${findings.filter((f) => f.what.startsWith("accepted")).length}; 5xx: ${findings.filter((f) => f.status >= 500).length}; database changed: ${findings.filter((f) => f.what.startsWith("database changed")).length}; wall ${Date.now() - started} ms`);
  const shown = findings.filter((f, i) => findings.findIndex((g) => g.cls === f.cls) > i - 3);
  for (const f of shown) console.log(`FINDING [${f.cls}] ${f.what}\n   -> ${f.status} ${f.body}`);
  assert.ok(total >= 1000, `requests: ${total}`);
  assert.ok(counts.size >= 25, `classes: ${counts.size}`);
  assert.deepEqual(findings.map((f) => `[${f.cls}] ${f.what}`), [], `findings (seed ${SEED})`);
});
