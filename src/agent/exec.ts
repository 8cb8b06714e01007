import { execFile, type ExecFileException } from "node:child_process";
import { constants as osConstants } from "node:os";
import type { CommandResult, CommandRunner } from "./toolchain.types.js";

/**
 * The agent's {@link CommandRunner}: `child_process.execFile`, never a shell, so every argument
 * reaches the tool as one argv element whatever characters it holds. Output and run time are
 * bounded. A non-zero exit is a result, not an exception; a command that cannot run at all is
 * also a result, with a shell-style code, so callers handle every outcome the same way:
 *
 * | outcome | code |
 * |---|---|
 * | exited | its exit code |
 * | could not be started (ENOENT, EACCES, ...) | 127 (`spawn` error in stderr) |
 * | over `timeoutMs` (SIGTERM, then SIGKILL after a grace period) | 124 (as coreutils `timeout`) |
 * | stdout or stderr over `maxOutputBytes` (child killed) | 125 |
 * | killed by another signal | 128 + signal number |
 */

/** Default time limit of one command, ms. The backend's command ACK timeout is 60 s (DESIGN §3). */
export const DEFAULT_COMMAND_TIMEOUT_MS = 20_000;
/** Default cap on each of stdout and stderr, bytes. `wg show` of a large mesh stays well below. */
export const DEFAULT_MAX_OUTPUT_BYTES = 512 * 1024;

/** Default time between SIGTERM and SIGKILL for a command over its time limit, ms. */
export const DEFAULT_KILL_GRACE_MS = 3_000;

export const EXIT_NOT_STARTED = 127;
export const EXIT_TIMED_OUT = 124;
export const EXIT_OUTPUT_TOO_LARGE = 125;

export interface CommandRunnerOptions {
  /** Time limit used when a call gives none, ms. */
  defaultTimeoutMs?: number;
  /** Cap on each of stdout and stderr, bytes; the child is killed when one exceeds it. */
  maxOutputBytes?: number;
  /** Environment used when a call gives none; the default inherits the agent's environment. */
  env?: NodeJS.ProcessEnv;
  /** Time between SIGTERM and SIGKILL for a command over its limit, ms (default 3 s). */
  killGraceMs?: number;
}

/** Builds a {@link CommandRunner} on `execFile` (no shell) with bounded output and time. */
export function createCommandRunner(options: CommandRunnerOptions = {}): CommandRunner {
  const defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const maxBuffer = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const killGraceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  return (file, args, opts) =>
    new Promise<CommandResult>((resolve) => {
      const timeout = opts?.timeoutMs ?? defaultTimeoutMs;
      const env = opts?.env ?? options.env;
      let timedOut = false;
      let hardKill: NodeJS.Timeout | undefined;
      const child = execFile(
        file,
        [...args],
        {
          shell: false,
          windowsHide: true,
          encoding: "utf8",
          maxBuffer,
          ...(env === undefined ? {} : { env }),
        },
        (error, stdout, stderr) => {
          clearTimeout(softKill);
          clearTimeout(hardKill);
          resolve(toResult(error, stdout, stderr, { file, timeout, maxBuffer, timedOut }));
        },
      );
      // SIGTERM first: wg-quick traps TERM and removes a half-built interface. After the grace
      // period SIGKILL, and our ends of the pipes are closed too, so a grandchild that still
      // holds them cannot keep the result from being delivered.
      const softKill = setTimeout(() => {
        timedOut = true;
        child.kill("SIGTERM");
        hardKill = setTimeout(() => {
          child.kill("SIGKILL");
          child.stdout?.destroy();
          child.stderr?.destroy();
        }, killGraceMs);
      }, timeout);
    });
}

/** The default runner: 20 s, 512 KiB per stream, inherited environment. */
export const runCommand: CommandRunner = createCommandRunner();

function toResult(
  error: ExecFileException | null,
  stdout: string,
  stderr: string,
  ctx: { file: string; timeout: number; maxBuffer: number; timedOut: boolean },
): CommandResult {
  if (ctx.timedOut) {
    return { code: EXIT_TIMED_OUT, stdout, stderr: appendLine(stderr, `${ctx.file}: timed out after ${ctx.timeout} ms; command killed`) };
  }
  if (error === null) return { code: 0, stdout, stderr };
  // execFile reports a normal non-zero exit with a numeric `code`; a spawn failure with a string
  // errno code (ENOENT, EACCES); a kill with `killed`/`signal`.
  if (typeof error.code === "number") return { code: error.code, stdout, stderr };
  if (error.code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER") {
    return { code: EXIT_OUTPUT_TOO_LARGE, stdout, stderr: appendLine(stderr, `${ctx.file}: output exceeded ${ctx.maxBuffer} bytes; command killed`) };
  }
  if (typeof error.code === "string") {
    return { code: EXIT_NOT_STARTED, stdout, stderr: appendLine(stderr, `${ctx.file}: could not be started (${error.code})`) };
  }
  if (typeof error.signal === "string") {
    const signo = (osConstants.signals as Record<string, number | undefined>)[error.signal] ?? 0;
    return { code: 128 + signo, stdout, stderr: appendLine(stderr, `${ctx.file}: killed by ${error.signal}`) };
  }
  return { code: 1, stdout, stderr: appendLine(stderr, `${ctx.file}: ${error.message}`) };
}

function appendLine(text: string, line: string): string {
  return text === "" || text.endsWith("\n") ? `${text}${line}` : `${text}\n${line}`;
}
