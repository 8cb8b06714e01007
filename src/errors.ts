/**
 * The one registry of error codes the service answers with.
 *
 * Every error that leaves a boundary (HTTP, and later MQTT and the CLI) is an {@link AppError}
 * carrying one of these codes. The HTTP status of each code lives here and nowhere else; the
 * error body is `{"error": {"code", "message", "details"?}}` (DESIGN §3).
 *
 * Codes named by the specification (spec §7): `INVALID_DOWNLOAD_TOKEN`,
 * `DOWNLOAD_TOKEN_SCOPE_MISMATCH`, `MQTT_DISABLED`. The others are ours (DESIGN §3).
 */
export const ERROR_CODES = {
  VALIDATION_FAILED: { status: 400, description: "The request does not match the documented schema." },
  INVALID_CURSOR: { status: 400, description: "The list cursor is not one this server issued for this list; list again without a cursor." },
  UNAUTHORIZED: { status: 401, description: "Missing, unknown or expired admin bearer token, or a wrong password." },
  INVALID_DOWNLOAD_TOKEN: { status: 401, description: "spec §7: the download token is unknown or expired." },
  INVALID_BIND_TOKEN: { status: 401, description: "The bind token is unknown, expired or invalidated." },
  SSO_FAILED: {
    status: 401,
    description: "Single sign-on did not complete (`details.reason`: state_mismatch, code_rejected, id_token_expired, no_role, …); no session was opened.",
  },
  FORBIDDEN: { status: 403, description: "The caller may not do this." },
  DOWNLOAD_TOKEN_SCOPE_MISMATCH: {
    status: 403,
    description: "spec §7: the download token is bound to another kind or resource.",
  },
  NOT_FOUND: { status: 404, description: "No such route or resource." },
  RELEASE_NOT_FOUND: {
    status: 404,
    description: "spec §7: the release tag or asset of the current version is missing; no fallback.",
  },
  SNAPSHOT_PASSPHRASE_REQUIRED: {
    status: 400,
    description: "The snapshot is encrypted and no passphrase was given (import, restore); nothing was changed.",
  },
  SNAPSHOT_PASSPHRASE_WRONG: {
    status: 400,
    description: "The passphrase does not open the encrypted snapshot: a wrong passphrase, or the file was altered; nothing was changed.",
  },
  REQUEST_TIMEOUT: { status: 408, description: "The client did not send a complete request in time." },
  CONFLICT: { status: 409, description: "The request conflicts with stored state (for example a duplicate name)." },
  ADDRESS_POOL_EXHAUSTED: { status: 409, description: "The config's network_cidr has no free tunnel address left." },
  MQTT_DISABLED: { status: 409, description: "spec §7: an MQTT write API was called while SVC_ENABLE_MQTT_SERVICES=false." },
  SETTING_FROM_ENVIRONMENT: {
    status: 409,
    description: "The setting is fixed by an environment variable of the service (named in the message); change or unset it there and restart.",
  },
  NODE_NOT_DYNAMIC: { status: 409, description: "The operation needs a dynamic node." },
  BIND_TOKEN_USED: { status: 409, description: "The bind token was already used." },
  CLIENT_NOT_INITIALIZED: { status: 409, description: "No client has bound to this dynamic node yet." },
  HUB_NEEDS_PUBLIC_ENDPOINT: {
    status: 409,
    description: "A hub must be reachable by every node it forwards for: give it a public_address (its listen_port defaults to 51820), or set hub to false first.",
  },
  PAYLOAD_TOO_LARGE: { status: 413, description: "The request body is larger than allowed." },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, description: "The request body's content type is not accepted." },
  RATE_LIMITED: { status: 429, description: "Too many requests from this address; retry later." },
  HEADERS_TOO_LARGE: { status: 431, description: "The request's header section is larger than the server accepts (Node's limit, 16 KiB by default)." },
  INTERNAL: { status: 500, description: "An unexpected server error; details are logged, not returned." },
  SERVICE_UNAVAILABLE: { status: 503, description: "A dependency is unavailable; retry later." },
  STORAGE_UNAVAILABLE: {
    status: 503,
    description:
      "The data directory cannot take the write: `details.reason` is `full` (no space left), `read_only` (read-only file system), `busy` (another process holds the database's write lock) or `io_error`. Nothing was written; retry once the operator fixed it.",
  },
} as const satisfies Record<string, { status: number; description: string }>;

/** One of the registered error codes. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The JSON error body every failing request answers with (DESIGN §3). */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

/**
 * An error with a stable registered code. Thrown anywhere below the HTTP layer; the HTTP error
 * handler turns it into the status of {@link ERROR_CODES} and the body of {@link ErrorBody}.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = "AppError";
    this.code = code;
    this.details = details;
  }

  /** HTTP status of this error's code. */
  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  /** The body to answer with. */
  toBody(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.details === undefined ? {} : { details: this.details }),
      },
    };
  }
}

/** True when `err` is an {@link AppError}, optionally with the given code. */
export function isAppError(err: unknown, code?: ErrorCode): err is AppError {
  return err instanceof AppError && (code === undefined || err.code === code);
}

/** Why the data directory refused a write (the `details.reason` of `STORAGE_UNAVAILABLE`). */
export type StorageFaultReason = "full" | "read_only" | "busy" | "io_error";

const STORAGE_FAULT_MESSAGES: Record<StorageFaultReason, string> = {
  full: "the data directory is full: free space on its file system and retry",
  read_only: "the data directory is read-only: make its file system writable and retry",
  busy: "the database is locked by another process: retry once it released the lock",
  io_error: "the data directory failed an I/O operation: check the disk and retry",
};

/**
 * The reason a SQLite (better-sqlite3 `SqliteError.code`) or file-system (`errno` code) error
 * means the data directory cannot take a write, or undefined for any other error.
 * SQLITE_FULL / ENOSPC / EDQUOT → full; SQLITE_READONLY* / EROFS → read_only;
 * SQLITE_BUSY* / SQLITE_LOCKED* → busy; SQLITE_IOERR* / SQLITE_CANTOPEN / EIO → io_error.
 */
export function storageFaultReason(err: unknown): StorageFaultReason | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    if (code === "SQLITE_FULL" || code === "ENOSPC" || code === "EDQUOT") return "full";
    if (code.startsWith("SQLITE_READONLY") || code === "EROFS") return "read_only";
    if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return "busy";
    if (code.startsWith("SQLITE_IOERR") || code === "SQLITE_CANTOPEN" || code === "EIO") return "io_error";
  }
  return undefined;
}

/**
 * `err` as a 503 `STORAGE_UNAVAILABLE` {@link AppError} with `details.reason`, when it is a
 * storage fault ({@link storageFaultReason}); else undefined. docs/history/decisions-2026.md "chaos
 * and resource faults": the server truly cannot write, so 503, never a 500 or a success.
 */
export function storageFaultError(err: unknown): AppError | undefined {
  const reason = storageFaultReason(err);
  return reason === undefined ? undefined : new AppError("STORAGE_UNAVAILABLE", STORAGE_FAULT_MESSAGES[reason], { reason });
}
