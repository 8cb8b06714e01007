import { connect } from "node:net";

/**
 * A raw HTTP/1.1 client over `node:net` for the security tests: it sends exactly the bytes it is
 * given (duplicate and malformed headers, bad framing, bodies sent slowly or never finished) and
 * reads the answer until the server closes the connection.
 */

export interface RawAnswer {
  /** 0 when the server closed without an HTTP answer; -1 when none came within the timeout. */
  status: number;
  headers: Map<string, string>;
  body: string;
}

export interface RawRequest {
  method: string;
  /** The request target, sent as is (no encoding is added). */
  target: string;
  /** In order, duplicates allowed. `Host` and `Connection: close` are added unless present. */
  headers?: Array<[string, string]>;
  body?: string | Buffer;
  /** Adds `Content-Length` for the body unless a `Content-Length` or `Transfer-Encoding` header is given. */
  autoLength?: boolean;
}

/** The request's bytes. */
export function encode(req: RawRequest): Buffer {
  const headers = [...(req.headers ?? [])];
  const has = (name: string) => headers.some(([k]) => k.toLowerCase() === name);
  if (!has("host")) headers.unshift(["Host", "127.0.0.1"]);
  if (!has("connection")) headers.push(["Connection", "close"]);
  const body = req.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(req.body) ? req.body : Buffer.from(req.body, "utf8");
  if (req.body !== undefined && req.autoLength !== false && !has("content-length") && !has("transfer-encoding")) {
    headers.push(["Content-Length", String(body.length)]);
  }
  const head = `${req.method} ${req.target} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`;
  return Buffer.concat([Buffer.from(head, "latin1"), body]);
}

/**
 * Sends `parts` (written one after the other, `gapMs` apart; one part = all at once) and reads
 * the answer until the server closes or `timeoutMs` passes (status -1, socket destroyed).
 * `localAddress` picks the client's source address (e.g. `127.0.0.2`: another client on loopback).
 */
export function rawExchange(port: number, parts: Buffer[], opts: { timeoutMs?: number; gapMs?: number; localAddress?: string } = {}): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port, ...(opts.localAddress === undefined ? {} : { localAddress: opts.localAddress }) });
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (timedOut: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(timedOut ? { status: -1, headers: new Map(), body: "" } : parse(Buffer.concat(chunks)));
    };
    const timer = setTimeout(() => finish(true), opts.timeoutMs ?? 10_000);
    socket.on("data", (c: Buffer) => {
      chunks.push(c);
      const answer = parse(Buffer.concat(chunks));
      // A complete answer with a length is enough; the connection may stay open (keep-alive).
      if (answer.status > 0 && answer.headers.has("content-length") && Buffer.byteLength(answer.body) >= Number(answer.headers.get("content-length"))) {
        finish(false);
      }
    });
    socket.on("error", () => finish(false));
    socket.on("close", () => finish(false));
    let i = 0;
    const writeNext = () => {
      if (done || socket.destroyed) return;
      const part = parts[i++];
      if (part === undefined) return;
      socket.write(part, () => {
        if (i < parts.length) setTimeout(writeNext, opts.gapMs ?? 0);
      });
    };
    socket.on("connect", writeNext);
  });
}

/** Parses an HTTP/1.1 answer (Content-Length or chunked body). */
export function parse(buf: Buffer): RawAnswer {
  const text = buf.toString("latin1");
  const split = text.indexOf("\r\n\r\n");
  if (split < 0) return { status: 0, headers: new Map(), body: "" };
  const [statusLine, ...lines] = text.slice(0, split).split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1] ?? 0);
  const headers = new Map<string, string>();
  for (const l of lines) {
    const k = l.slice(0, l.indexOf(":")).toLowerCase();
    const v = l.slice(l.indexOf(":") + 1).trim();
    headers.set(k, headers.has(k) ? `${headers.get(k)}, ${v}` : v);
  }
  let body = buf.subarray(Buffer.byteLength(text.slice(0, split + 4), "latin1"));
  if (headers.get("transfer-encoding")?.includes("chunked")) body = dechunk(body);
  return { status, headers, body: body.toString("utf8") };
}

function dechunk(buf: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  while (at < buf.length) {
    const eol = buf.indexOf("\r\n", at);
    if (eol < 0) break;
    const size = Number.parseInt(buf.subarray(at, eol).toString("latin1"), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}
