/**
 * `npm start` (src/main.ts) as a person and as a pipe see it: on a terminal readable log lines
 * and the public URL hosts are given, as sentences, with a warning when it is loopback; through a
 * pipe (systemd, Docker, a log shipper) one JSON object per line, the public URL in the
 * `listening` line and a JSON warning.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { findOnPath, requireSystem } from "./helpers/system.js";
import { repoRoot } from "./helpers/service.js";

/** How long the service may take to start (tsx compiles on the fly). */
const START_MS = 60_000;

/** Environment of a small service: loopback, port 0, MQTT off, a fresh data dir. */
function serviceEnv(t: TestContext, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-main-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env["SVC_PUBLIC_URL"];
  delete env["NO_COLOR"];
  return { ...env, SVC_DATA_DIR: dataDir, SVC_HTTP_HOST: "127.0.0.1", SVC_HTTP_PORT: "0", SVC_ENABLE_MQTT_SERVICES: "false", SVC_ADMIN_PASSWORD: "main-test-password", ...extra };
}

/** Starts `cmd`, collects stdout until `done(text)` holds, then stops its process group. */
async function outputUntil(t: TestContext, cmd: string, args: string[], env: NodeJS.ProcessEnv, done: (text: string) => boolean): Promise<string> {
  const child: ChildProcess = spawn(cmd, args, { cwd: repoRoot, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const stop = () => {
    if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, "SIGTERM");
  };
  t.after(stop);
  let text = "";
  let errText = "";
  child.stderr?.on("data", (c: Buffer) => (errText += c.toString("utf8")));
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not done within ${START_MS} ms; stdout:\n${text}\nstderr:\n${errText}`)), START_MS);
    child.stdout?.on("data", (c: Buffer) => {
      text += c.toString("utf8");
      if (done(text)) {
        clearTimeout(timer);
        stop();
        resolve(text);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (!done(text)) reject(new Error(`exited ${String(code)} early; stdout:\n${text}\nstderr:\n${errText}`));
    });
  });
}

const MAIN = ["--import", "tsx", "src/main.ts"];

test("through a pipe every stdout line is JSON: `listening` carries the public URL and its source, and a loopback public URL is warned about", async (t) => {
  const out = await outputUntil(t, process.execPath, MAIN, serviceEnv(t), (s) => /"msg":"listening"/.test(s) && /loopback/.test(s));
  const lines = out.split("\n").filter((l) => l.trim() !== "");
  const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const listening = records.find((r) => r["msg"] === "listening");
  assert.equal(listening?.["public_url"], "http://localhost:8080");
  assert.equal(listening?.["public_url_source"], "default");
  const warning = records.find((r) => typeof r["msg"] === "string" && /loopback/.test(r["msg"]));
  assert.equal(warning?.["level"], 40, "a warn record");
  assert.ok(!out.includes("Hosts are told"), "the sentences are for a terminal only");
});

test("on a terminal (a pty through script(1)) log lines are pretty, not JSON, and the public URL hosts are given is printed with its warning", async (t) => {
  if (!requireSystem(t, { binaries: ["script"] })) return;
  const command = [process.execPath, ...MAIN].map((a) => `'${a}'`).join(" ");
  const env = serviceEnv(t, { SVC_PUBLIC_URL: "http://127.0.0.1:8080" });
  const out = await outputUntil(t, findOnPath("script") ?? "/usr/bin/script", ["-qfec", command, "/dev/null"], env, (s) => /Set SVC_PUBLIC_URL/.test(s));
  const plain = out.replace(/\x1b\[[0-9;]*m/g, "");
  assert.match(plain, /INFO.*listening/, "a readable listening line");
  assert.doesNotMatch(plain, /^\{"level"/m, "no raw JSON line");
  assert.match(plain, /Hosts are told to reach this service at http:\/\/127\.0\.0\.1:8080 \(from SVC_PUBLIC_URL\)\./);
  assert.match(plain, /Warning: http:\/\/127\.0\.0\.1:8080 is a loopback address/);
});
