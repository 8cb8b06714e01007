import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { repoRoot } from "../helpers/service.js";

/** The stand-in tunnel tools the agent tests use (`wg`/`wg-quick` that only record). */
export const STANDIN = join(import.meta.dirname, "..", "fixtures", "awg-standin");

export interface Child {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  /** Resolves when the output contains `text`. */
  printed: (text: string) => Promise<void>;
}

/** A child process with its output kept; SIGKILLed after the test if still running. */
export function start(t: TestContext, cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): Child {
  const proc = spawn(cmd, args, { cwd: repoRoot, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const waiters: Array<{ text: string; resolve: () => void }> = [];
  const onData = (d: Buffer) => {
    out += d.toString("utf8");
    for (const w of [...waiters]) if (out.includes(w.text)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(); }
  };
  proc.stdout!.on("data", onData);
  proc.stderr!.on("data", onData);
  const exited = new Promise<number | null>((resolve) => proc.on("close", (code) => resolve(code)));
  t.after(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
  });
  return {
    proc,
    output: () => out,
    exited,
    printed: (text) =>
      out.includes(text)
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            waiters.push({ text, resolve });
            void exited.then(() => reject(new Error(`exited before printing ${JSON.stringify(text)}:\n${out}`)));
          }),
  };
}
