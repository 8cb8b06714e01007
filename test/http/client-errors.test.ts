import assert from "node:assert/strict";
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { test } from "node:test";
import { ERROR_CODES } from "../../src/errors.js";
import { answerClientError } from "../../src/http/app.js";
import { createLogger } from "../../src/logger.js";
import { startHarness } from "./harness.js";

/**
 * Requests Node's HTTP parser refuses before any route runs (a 431 for too large headers among
 * them) keep the error shape: over a real socket, each answers the DESIGN §3 error body
 * `{"error":{"code","message"}}` with a code from `src/errors.ts` and that code's status.
 */

interface RawAnswer {
  status: number;
  headers: Map<string, string>;
  body: string;
}

/** Writes `request` as raw bytes to the listening service and reads until the server closes. */
async function raw(port: number, request: string | Buffer): Promise<RawAnswer> {
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("utf8")));
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer within 10 s")));
    socket.write(request);
  });
  const split = text.indexOf("\r\n\r\n");
  assert.ok(split > 0, `an HTTP answer: ${JSON.stringify(text.slice(0, 200))}`);
  const [statusLine, ...lines] = text.slice(0, split).split("\r\n");
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine ?? "")?.[1]);
  const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  return { status, headers, body: text.slice(split + 4) };
}

function assertShape(res: RawAnswer, code: keyof typeof ERROR_CODES, why: string): void {
  assert.equal(res.status, ERROR_CODES[code].status, `${why}: status; body ${res.body}`);
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/, why);
  assert.equal(Number(res.headers.get("content-length")), Buffer.byteLength(res.body), `${why}: content-length`);
  const json = JSON.parse(res.body) as { error: { code: string; message: string } };
  assert.deepEqual(Object.keys(json), ["error"], why);
  assert.equal(json.error.code, code, why);
  assert.equal(typeof json.error.message, "string", why);
  assert.ok(json.error.message.length > 0, why);
}

test("DESIGN §3: an oversized header section answers 431 HEADERS_TOO_LARGE in the error shape, over a real socket", async (t) => {
  const h = await startHarness(t);
  const address = await h.server.app.listen({ host: "127.0.0.1", port: 0 });
  const port = Number(new URL(address).port);
  const big = `GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Filler: ${"a".repeat(32 * 1024)}\r\n\r\n`;
  assertShape(await raw(port, big), "HEADERS_TOO_LARGE", "32 KiB header");
  // Many small headers overflow the same way.
  const many = `GET /api/v1/health HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 600 }, (_, i) => `X-H${i}: ${"b".repeat(40)}\r\n`).join("")}\r\n`;
  assertShape(await raw(port, many), "HEADERS_TOO_LARGE", "600 headers");
  // The service still answers a well-formed request afterwards.
  const ok = await raw(port, "GET /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  assert.equal(ok.status, 200, ok.body);
});

test("DESIGN §3: requests the HTTP parser refuses (bad header token, bad request line, bad chunking) answer 400 VALIDATION_FAILED in the error shape", async (t) => {
  const h = await startHarness(t);
  const address = await h.server.app.listen({ host: "127.0.0.1", port: 0 });
  const port = Number(new URL(address).port);
  for (const [request, why] of [
    ["GET /api/v1/health HTTP/1.1\r\nHost: x\r\nBad Header Name: 1\r\n\r\n", "space in a header name"],
    ["GET /api/v1/health HTTP/9.9.9\r\nHost: x\r\n\r\n", "bad HTTP version"],
    ["GET\r\n\r\n", "request line without target"],
    ["POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"],
    ["POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "two content lengths"],
  ] as const) {
    assertShape(await raw(port, request), "VALIDATION_FAILED", why);
  }
});

test("DESIGN §3: a request Node times out (ERR_HTTP_REQUEST_TIMEOUT) answers 408 REQUEST_TIMEOUT in the error shape; a reset connection gets nothing", async (t) => {
  // Node's requestTimeout is 300 s: the handler is driven directly, on a real socket pair.
  const server = createNetServer();
  const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as AddressInfo).port;
  const answer = raw(port, "GET /api/v1/health HTTP/1.1\r\nHost: x\r\n");
  answerClientError(Object.assign(new Error("timeout"), { code: "ERR_HTTP_REQUEST_TIMEOUT" }), await accepted, createLogger("silent"));
  assertShape(await answer, "REQUEST_TIMEOUT", "request timeout");

  // ECONNRESET: the peer is gone; nothing is written and the socket is left to Node.
  const second = new Promise<Socket>((resolve) => server.once("connection", resolve));
  const client = connect({ host: "127.0.0.1", port });
  t.after(() => client.destroy());
  const socket = await second;
  let written = false;
  socket.write = (() => {
    written = true;
    return true;
  }) as typeof socket.write;
  answerClientError(Object.assign(new Error("reset"), { code: "ECONNRESET" }), socket, createLogger("silent"));
  assert.equal(written, false);
  socket.destroy();
});
