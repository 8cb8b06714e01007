import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import type { CommandResult, CommandRunner } from "../../agent/toolchain.types.js";
import { writeFileAtomic } from "../../lib/atomic-write.js";

/**
 * What the platform executors (systemd, launchd, Windows SCM) share: the service they install,
 * the status they report, the error they throw, and the {@link ServiceHost} through which they
 * touch the system (tests run them against a temp directory and a recording runner).
 */

/** What the service runs. */
export interface ServiceSpec {
  /** The agent's argv: absolute executable first (see {@link agentCommand}). */
  command: readonly string[];
}

export interface ServiceStatus {
  manager: "systemd" | "launchd" | "windows-scm" | "none";
  /** Unit name, launchd label or Windows service name. */
  name: string;
  /** The unit or plist file; null on Windows (the SCM keeps the registration). */
  file: string | null;
  installed: boolean;
  running: boolean;
  /** What the service manager said, for people. */
  detail: string;
}

export type ServiceErrorReason = "privileges" | "unsupported" | "command";

/** A service operation that could not be done; `reason` decides the CLI's exit code. */
export class ServiceError extends Error {
  readonly reason: ServiceErrorReason;

  constructor(reason: ServiceErrorReason, message: string, opts: { cause?: unknown } = {}) {
    super(message, opts);
    this.name = "ServiceError";
    this.reason = reason;
  }
}

/** The side effects the executors need; {@link createServiceHost} gives the real ones. */
export interface ServiceHost {
  /** Runs `argv[0]` with the rest, no shell; never throws (exit 127 when the program is missing). */
  exec(argv: readonly string[]): Promise<CommandResult>;
  /**
   * Like {@link exec}, but a non-zero exit throws {@link ServiceError} `command` naming the
   * command and its output, unless the output matches `tolerate`.
   */
  mustExec(argv: readonly string[], opts?: { tolerate?: RegExp }): Promise<CommandResult>;
  /** Atomic write (temp file + rename) with `mode`, creating the parent directory. */
  writeFile(path: string, text: string, mode: number): Promise<void>;
  /** Removes a file; a missing one is fine. */
  removeFile(path: string): Promise<void>;
  exists(path: string): boolean;
}

/** Runs a program without a shell, collecting output; bounded by `timeoutMs` (default 60 s). */
export const execRunner: CommandRunner = (file, args, opts = {}) =>
  new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let settled = false;
    const done = (r: CommandResult) => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    const child = spawn(file, args, { env: opts.env ?? process.env, windowsHide: true, stdio: ["ignore", "pipe", "pipe"], timeout: opts.timeoutMs ?? 60_000 });
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", (err: NodeJS.ErrnoException) => done({ code: err.code === "ENOENT" ? 127 : 126, stdout, stderr: `${stderr}${err.message}` }));
    child.on("close", (code, signal) => done({ code: code ?? 128, stdout, stderr: signal ? `${stderr}killed by ${signal}` : stderr }));
  });

/** The real host over a runner (tests pass a recording runner and temp paths). */
export function createServiceHost(runner: CommandRunner = execRunner): ServiceHost {
  const exec = ([file, ...args]: readonly string[]) => {
    if (file === undefined) throw new Error("empty command");
    return runner(file, args);
  };
  return {
    exec,
    async mustExec(argv, opts = {}) {
      const res = await exec(argv);
      if (res.code === 0) return res;
      const output = `${res.stderr}\n${res.stdout}`.trim();
      if (opts.tolerate?.test(output)) return res;
      const what = res.code === 127 ? "not found" : `exited with ${res.code}`;
      throw new ServiceError("command", `\`${argv.join(" ")}\` ${what}${output ? `: ${output}` : ""}`);
    },
    async writeFile(path, text, mode) {
      await writeFileAtomic(path, text, { mode, mkdir: {} });
    },
    async removeFile(path) {
      await rm(path, { force: true });
    },
    exists: (path) => existsSync(path),
  };
}
