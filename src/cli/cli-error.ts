import { ProfileError } from "../agent/profile.js";
import { ServiceError } from "./service/index.js";

/**
 * How svcctl fails: every failure becomes a {@link CliError} with its exit code (usage, refused
 * by the server, network or I/O, privileges) and a stable code that scripts read from `--json`.
 */

/** svcctl's exit codes (the list in svcctl.ts's header). */
export const EXIT = { OK: 0, USAGE: 1, REFUSED: 2, IO: 3, PRIVILEGES: 4 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure with its exit code and a stable code (the server's, or one of svcctl's own). */
export class CliError extends Error {
  readonly exitCode: ExitCode;
  readonly code: string;

  constructor(exitCode: ExitCode, code: string, message: string, opts: { cause?: unknown } = {}) {
    super(message, opts);
    this.name = "CliError";
    this.exitCode = exitCode;
    this.code = code;
  }
}

/** Any failure as a CliError: service and profile errors by their kind, the rest as fs errors. */
export function toCliError(err: unknown): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof ServiceError) {
    if (err.reason === "privileges") return new CliError(EXIT.PRIVILEGES, "NEEDS_PRIVILEGES", err.message, { cause: err });
    return new CliError(EXIT.IO, err.reason === "unsupported" ? "UNSUPPORTED_PLATFORM" : "SERVICE_COMMAND_FAILED", err.message, { cause: err });
  }
  if (err instanceof ProfileError) {
    if (err.errno === "EACCES" || err.errno === "EPERM") {
      return new CliError(EXIT.PRIVILEGES, "NEEDS_PRIVILEGES", `${err.message} (the profile is readable by root only)`, { cause: err });
    }
    return new CliError(EXIT.IO, err.kind === "missing" ? "PROFILE_MISSING" : err.kind === "invalid" ? "PROFILE_INVALID" : "IO", err.message, { cause: err });
  }
  return fsError(err, "unexpected error");
}

/** An fs error as a CliError: permission problems exit 4, the rest 3. */
export function fsError(err: unknown, what: string): CliError {
  const code = (err as { code?: unknown } | null)?.code;
  const message = `${what}: ${err instanceof Error ? err.message : String(err)}`;
  if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
    return new CliError(EXIT.PRIVILEGES, "NEEDS_PRIVILEGES", `${message} (run as root/Administrator, or choose another --profile-dir)`, { cause: err });
  }
  return new CliError(EXIT.IO, "IO", message, { cause: err });
}
