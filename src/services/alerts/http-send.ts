import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";
import type { Clock } from "../../lib/clock.js";
import { resolveTarget, TargetRefusedError, type AddressLookup } from "./safe-target.js";

/** What one attempt came to; the worker records it and decides what follows. */
export interface AttemptOutcome {
  ok: boolean;
  /** The receiver's status (HTTP; SMTP's reply code for email); null when none came. */
  status: number | null;
  /** Why it failed, for the delivery log (never a secret); null on success. */
  error: string | null;
  /** A 429 or 503's `Retry-After`, ms from now. */
  retryAfterMs?: number;
  /** The receiver answered 410 Gone: the channel is disabled. */
  gone?: boolean;
}

/** What a send needs besides the request. */
export interface SendContext {
  clock: Clock;
  /** Per attempt, ms (15 s). */
  timeoutMs: number;
  allowPrivate: boolean;
  lookup: AddressLookup;
  /** Aborts the attempt (the service is closing). */
  signal?: AbortSignal;
}

export interface HttpPost {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** Longest `Retry-After` taken at its word: a day (a receiver cannot park a delivery forever). */
const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

/**
 * POSTs `req` once: resolves the URL's host and checks it (src/services/alerts/safe-target.ts),
 * connects to that checked address (TLS still verifies the certificate for the host name),
 * follows no redirect, and gives up after `ctx.timeoutMs` on the injected clock. Only a 2xx
 * answer succeeds. Never throws: every failure is an outcome with a reason.
 */
export async function postOnce(req: HttpPost, ctx: SendContext): Promise<AttemptOutcome> {
  const url = new URL(req.url);
  let target;
  try {
    target = await resolveTarget(url.hostname, ctx);
  } catch (err) {
    return { ok: false, status: null, error: err instanceof TargetRefusedError ? err.message : `refused target: ${(err as Error).message}` };
  }
  const pinned = ((_host: string, opts: { all?: boolean } | undefined, cb: (...args: unknown[]) => void) => {
    if (opts?.all === true) cb(null, [{ address: target.address, family: target.family }]);
    else cb(null, target.address, target.family);
  }) as unknown as LookupFunction;
  const hostIsName = !ipaddr.isValid(url.hostname.replace(/^\[(.*)\]$/, "$1"));
  const body = Buffer.from(req.body, "utf8");
  const options = {
    method: "POST",
    hostname: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: url.port === "" ? undefined : Number(url.port),
    path: `${url.pathname}${url.search}`,
    headers: { "user-agent": "svc-alerts/1", ...req.headers, "content-length": String(body.length) },
    lookup: pinned,
    agent: false,
    ...(url.protocol === "https:" && hostIsName ? { servername: url.hostname } : {}),
  } as const;
  return new Promise<AttemptOutcome>((resolve) => {
    let settled = false;
    const done = (outcome: AttemptOutcome) => {
      if (settled) return;
      settled = true;
      ctx.clock.clearTimeout(timer);
      ctx.signal?.removeEventListener("abort", abort);
      resolve(outcome);
    };
    const r = (url.protocol === "https:" ? httpsRequest : httpRequest)(options, (res) => {
      res.resume(); // the body is not needed; reading it frees the socket
      res.on("end", () => done(outcomeOf(res, ctx.clock.now())));
      res.on("error", (err) => done({ ok: false, status: res.statusCode ?? null, error: `the answer broke off: ${err.message}` }));
    });
    const timer = ctx.clock.setTimeout(() => {
      r.destroy();
      done({ ok: false, status: null, error: `no answer within ${Math.round(ctx.timeoutMs / 1000)} s` });
    }, ctx.timeoutMs);
    const abort = () => {
      r.destroy();
      done({ ok: false, status: null, error: "the service is closing" });
    };
    ctx.signal?.addEventListener("abort", abort);
    r.on("error", (err: NodeJS.ErrnoException) => done({ ok: false, status: null, error: `${err.code ?? "error"}: ${err.message}` }));
    r.end(body);
  });
}

/** The outcome of an answer: 2xx succeeds; a redirect is not followed; 410 gone; 429/503 may say when to retry. */
function outcomeOf(res: IncomingMessage, now: number): AttemptOutcome {
  const status = res.statusCode ?? 0;
  if (status >= 200 && status < 300) return { ok: true, status, error: null };
  if (status >= 300 && status < 400) {
    const location = typeof res.headers.location === "string" ? ` to ${res.headers.location.slice(0, 200)}` : "";
    return { ok: false, status, error: `HTTP ${status}: redirect${location} not followed` };
  }
  if (status === 410) return { ok: false, status, error: "HTTP 410 Gone: the receiver is gone; the channel is disabled", gone: true };
  const outcome: AttemptOutcome = { ok: false, status, error: `HTTP ${status}${res.statusMessage ? ` ${res.statusMessage.slice(0, 100)}` : ""}` };
  if (status === 429 || status === 503) {
    const after = retryAfterMs(res.headers["retry-after"], now);
    if (after !== undefined) outcome.retryAfterMs = after;
  }
  return outcome;
}

/**
 * A `Retry-After` value (RFC 9110 §10.2.3: delay-seconds or an HTTP-date) as ms from `now`,
 * at most a day; undefined when absent or unreadable.
 */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | undefined {
  if (typeof value !== "string") return undefined;
  const text = value.trim();
  let ms: number;
  if (/^\d+$/.test(text)) ms = Number(text) * 1000;
  else {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return undefined;
    ms = at - now;
  }
  return Math.min(Math.max(ms, 0), MAX_RETRY_AFTER_MS);
}
