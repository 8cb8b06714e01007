import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { test } from "node:test";
import { ManualClock } from "../src/lib/clock.js";
import { testSettings } from "../src/config.js";
import { createLogger, logFormatFor } from "../src/logger.js";
import { publicUrlNotice } from "../src/services/public-url.service.js";
import { createServer } from "../src/server.js";

function capture(): { stream: Writable; text(): string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  return { stream, text: () => chunks.join("") };
}

test("the logger redacts passwords, tokens, private keys and config texts", () => {
  const out = capture();
  const log = createLogger("info", out.stream);
  log.info({
    password: "p-secret",
    access_token: "a-secret",
    download_token: "d-secret",
    nested: { private_key: "k-secret", config_text: "c-secret", bind_token: "b-secret" },
    req: { headers: { authorization: "Bearer h-secret" } },
  }, "x");
  const text = out.text();
  for (const secret of ["p-secret", "a-secret", "d-secret", "k-secret", "c-secret", "b-secret", "h-secret"]) {
    assert.ok(!text.includes(secret), `${secret} leaked: ${text}`);
  }
  assert.match(text, /\[redacted\]/);
});

test("request logs carry no password, bearer token, download token or config text", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-log-"));
  const out = capture();
  const server = await createServer(
    testSettings({ dataDir, adminPassword: "log-test-password", logLevel: "info" }),
    createLogger("info", out.stream),
    { clock: new ManualClock() },
  );
  t.after(async () => {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const login = await server.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: "log-test-password" } });
  const auth = { authorization: `Bearer ${login.json().access_token}` };
  const config = await server.app.inject({ method: "POST", url: "/api/v1/configs", headers: auth, payload: { name: "c", tunnel_protocol: "wireguard", network_cidr: "10.0.0.0/24" } });
  const node = await server.app.inject({ method: "POST", url: `/api/v1/configs/${config.json().config_id}/nodes`, headers: auth, payload: { name: "n", mode: "static" } });
  const issued = await server.app.inject({ method: "POST", url: `/api/v1/configs/${config.json().config_id}/nodes/${node.json().node_id}/download-token`, headers: auth });
  const download = await server.app.inject({ method: "GET", url: issued.json().download_path });
  assert.equal(download.statusCode, 200);
  await server.app.inject({ method: "GET", url: `${issued.json().download_path}x` }); // a failing one too
  const text = out.text();
  assert.match(text, /"msg":"request"/, "requests are logged");
  for (const secret of ["log-test-password", login.json().access_token, issued.json().download_token, /PrivateKey = (.+)/.exec(download.body)?.[1] ?? "missing"]) {
    assert.ok(!text.includes(secret), `a secret leaked into the log`);
  }
});

test("log lines are pretty only when stdout is a terminal; pipes, files and unknown streams get JSON", () => {
  assert.equal(logFormatFor({ isTTY: true }), "pretty");
  assert.equal(logFormatFor({ isTTY: false }), "json");
  assert.equal(logFormatFor({}), "json");
});

test("the pretty format writes readable lines, redacted like the JSON ones; the JSON format one object per line", () => {
  const pretty = capture();
  createLogger("info", pretty.stream, "pretty").child({ name: "http" }).info({ password: "p-secret", status: 200 }, "request");
  const text = pretty.text();
  assert.match(text, /INFO.*\(http\).*request/);
  assert.match(text, /status: 200/);
  assert.ok(!text.includes("p-secret"), text);
  assert.throws(() => JSON.parse(text.trim()));

  const json = capture();
  createLogger("info", json.stream).info({ status: 200 }, "request");
  assert.equal(JSON.parse(json.text().trim()).msg, "request");
});

test("npm start's public URL sentences: the URL and its source; a loopback URL is warned about with where to set it", () => {
  assert.deepEqual(publicUrlNotice({ public_url: "https://mesh.example.com", source: "stored", loopback: false, stored_public_url: "https://mesh.example.com" }), [
    "Hosts are told to reach this service at https://mesh.example.com (set in the console's Settings).",
  ]);
  const local = publicUrlNotice({ public_url: "http://localhost:8080", source: "default", loopback: true, stored_public_url: null });
  assert.equal(local.length, 3);
  assert.match(local[0] ?? "", /at http:\/\/localhost:8080 \(the default; set it in the console's Settings or with SVC_PUBLIC_URL\)/);
  assert.match(local[1] ?? "", /^Warning: http:\/\/localhost:8080 is a loopback address/);
  assert.match(local[2] ?? "", /Set the public URL in Settings/);
});
