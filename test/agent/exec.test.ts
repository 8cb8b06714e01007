import assert from "node:assert/strict";
import { test } from "node:test";
import { createCommandRunner, EXIT_NOT_STARTED, EXIT_OUTPUT_TOO_LARGE, EXIT_TIMED_OUT, runCommand } from "../../src/agent/exec.js";

// The agent's CommandRunner (src/agent/toolchain.types.ts): execFile, no shell, bounded output and
// time, never throws. Spec §5: control commands are executed by the agent itself.

test("exec: a non-zero exit is a result with stdout and stderr apart, not an exception", async () => {
  const r = await runCommand("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"]);
  assert.deepEqual(r, { code: 3, stdout: "out\n", stderr: "err\n" });
});

test("exec: no shell — metacharacters reach the tool as one literal argument", async () => {
  const literal = "a;b && $(echo injected) `id` * | > /tmp/x";
  const r = await runCommand("printf", ["%s", literal]);
  assert.equal(r.code, 0);
  assert.equal(r.stdout, literal);
});

test("exec: a tool that does not exist is code 127 with the reason in stderr", async () => {
  const r = await runCommand("svc-no-such-tool-xyz", ["show"]);
  assert.equal(r.code, EXIT_NOT_STARTED);
  assert.match(r.stderr, /could not be started \(ENOENT\)/);
});

test("exec: a command over its time limit is killed and reported as 124", async () => {
  const started = Date.now();
  const r = await runCommand("sleep", ["30"], { timeoutMs: 150 });
  assert.equal(r.code, EXIT_TIMED_OUT);
  assert.match(r.stderr, /timed out after 150 ms/);
  assert.ok(Date.now() - started < 5_000);
});

test("exec: a tool that ignores SIGTERM, with a grandchild holding the pipes, is still bounded", async () => {
  const run = createCommandRunner({ killGraceMs: 200 });
  const started = Date.now();
  const r = await run("/bin/sh", ["-c", "trap '' TERM; sleep 2; echo never"], { timeoutMs: 150 });
  assert.equal(r.code, EXIT_TIMED_OUT);
  assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms`);
});

test("exec: output over the cap kills the command and is reported as 125", async () => {
  const run = createCommandRunner({ maxOutputBytes: 1024 });
  const r = await run("head", ["-c", "1000000", "/dev/zero"]);
  assert.equal(r.code, EXIT_OUTPUT_TOO_LARGE);
  assert.ok(r.stdout.length <= 1024);
  assert.match(r.stderr, /output exceeded 1024 bytes/);
});

test("exec: the environment given to a call is the tool's whole environment", async () => {
  const run = createCommandRunner({ env: { PATH: process.env["PATH"] ?? "", SVC_A: "runner" } });
  assert.equal((await run("/bin/sh", ["-c", "printf %s \"$SVC_A\""])).stdout, "runner");
  assert.equal((await run("/bin/sh", ["-c", "printf %s \"${SVC_A:-unset}\""], { env: { SVC_B: "1" } })).stdout, "unset");
});
