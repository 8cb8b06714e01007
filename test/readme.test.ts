import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { requireSystem } from "./helpers/system.js";

const repo = join(import.meta.dirname, "..");
const readme = readFileSync(join(repo, "README.md"), "utf8");

function codeBlocks(markdown: string): Array<{ heading: string; code: string }> {
  const out: Array<{ heading: string; code: string }> = [];
  let heading = "";
  const re = /^(#{1,6} .*)$|^```sh\n([\s\S]*?)^```$/gm;
  for (let m = re.exec(markdown); m !== null; m = re.exec(markdown)) {
    if (m[1] !== undefined) heading = m[1];
    else out.push({ heading, code: m[2] ?? "" });
  }
  return out;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      srv.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

test("the README opens with the two commands a newcomer needs: npm start and npm test", () => {
  const first = codeBlocks(readme)[0];
  assert.ok(first, "a first code block");
  const commands = first.code.split("\n").map((l) => l.replace(/#.*$/, "").trim()).filter(Boolean);
  assert.deepEqual(commands, ["npm ci && npm start", "npm ci && npm test"]);
  const pkg = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { scripts: Record<string, string> };
  assert.equal(pkg.scripts.start, "tsx src/main.ts");
  assert.match(pkg.scripts.test ?? "", /--test/);
});

test("the README's static-mesh walkthrough, run word for word by bash, downloads a node config", { timeout: 90_000 }, async (t) => {
  if (!requireSystem(t, { binaries: ["bash", "curl", "npm"] })) return;
  const block = codeBlocks(readme).find((b) => b.heading.startsWith("## A static mesh"));
  assert.ok(block, "the walkthrough block");
  const dataDir = mkdtempSync(join(tmpdir(), "svc-readme-"));
  const conf = join(repo, "svc0.conf");
  assert.equal(existsSync(conf), false, "svc0.conf must not exist before the run");
  const port = await freePort();
  const child = spawn("bash", ["-euo", "pipefail", "-c", block.code], {
    cwd: repo,
    // The embedded broker takes a free port too: 1883 may be in use on a CI machine.
    env: { ...process.env, SVC_HTTP_PORT: String(port), SVC_EMBEDDED_BROKER_PORT: "0", SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: "warn" },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr.on("data", (d: Buffer) => (output += d.toString()));
  t.after(() => {
    // The walkthrough leaves `npm start` running in the background: end the whole group.
    try {
      process.kill(-child.pid!, "SIGTERM");
    } catch {
      // already gone
    }
    rmSync(conf, { force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  assert.equal(code, 0, output);
  const text = readFileSync(conf, "utf8");
  assert.match(text, /^\[Interface\]$/m);
  assert.match(text, /^Address = 10\.10\.0\.1\/24$/m);
  assert.match(text, /^ListenPort = 51820$/m);
  assert.match(text, /^\[Peer\]$/m, "paired with the laptop");
});
