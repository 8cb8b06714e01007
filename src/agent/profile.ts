import { mkdir, readFile } from "node:fs/promises";
import { join, win32 } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../lib/atomic-write.js";
import { ID_PATTERN } from "../protocol/ids.js";

/**
 * The agent's bind profile (spec §2.6; DESIGN §5 bind answer): what `svcctl bind` receives from
 * `POST /api/client/bind` and stores, and what `svcctl agent run` reads at start.
 *
 * Stored as `profile.json` in the profile directory. It holds the node's MQTT password, so the
 * directory is created 0700 and the file written 0600 (POSIX); on Windows the CLI restricts the
 * directory's ACL (see `src/cli/service/windows.ts`).
 */

export const PROFILE_FILE = "profile.json";
/** Environment variable that overrides the platform's default profile directory. */
export const PROFILE_DIR_ENV = "SVC_AGENT_DIR";

const id = z.string().regex(ID_PATTERN, "must match ^[a-z0-9][a-z0-9_-]{0,63}$");
/** A concrete MQTT topic: never empty, never a wildcard filter (spec §5 rule 2). */
const topic = z
  .string()
  .min(1)
  .max(256)
  .refine((t) => !t.includes("+") && !t.includes("#") && !t.includes("\u0000"), "must be a concrete topic, not a filter");

/** The node's topics, named as in the bind answer (DESIGN §5; spec §6.1). */
export const profileTopicsSchema = z.object({
  config_push: topic,
  control: topic,
  detect: topic,
  info: topic,
  config_push_ack: topic,
  control_ack: topic,
  detect_ack: topic,
  info_ack: topic,
  event: topic,
  heartbeat: topic,
});

/**
 * The bind answer. Every field the specification names is required and typed; unknown extra
 * fields are ignored (a newer server may add some) and dropped when the profile is stored.
 * `mqtt.ca_cert` (PEM) is optional and, per spec §2.6, only allowed when `mqtt.tls` is true.
 */
export const agentProfileSchema = z.object({
  profile: z.object({
    config_id: id,
    node_id: id,
    server_url: z.url({ protocol: /^https?$/ }).max(2048),
  }),
  mqtt: z
    .object({
      host: z.string().min(1).max(253),
      port: z.number().int().min(1).max(65535),
      tls: z.boolean(),
      username: z.string().min(1).max(256),
      password: z.string().min(1).max(1024),
      client_id: z.string().min(1).max(256),
      ca_cert: z.string().min(1).max(64 * 1024).optional(),
    })
    .refine((m) => m.ca_cert === undefined || m.tls, { message: "ca_cert is only allowed when tls is true", path: ["ca_cert"] }),
  topics: profileTopicsSchema,
});

export type AgentProfile = z.infer<typeof agentProfileSchema>;

/**
 * The platform's default profile directory: Linux (and other Unix) `/etc/svc-agent`, macOS
 * `/Library/Application Support/svc-agent`, Windows `%ProgramData%\svc-agent`.
 * @param env only `ProgramData` is read (Windows); `C:\ProgramData` when unset
 */
export function defaultProfileDir(platform: NodeJS.Platform, env: Record<string, string | undefined> = {}): string {
  switch (platform) {
    case "darwin":
      return "/Library/Application Support/svc-agent";
    case "win32":
      return win32.join(env["ProgramData"] || env["PROGRAMDATA"] || "C:\\ProgramData", "svc-agent");
    default:
      return "/etc/svc-agent";
  }
}

/**
 * The profile directory to use: an explicit choice (the `--profile-dir` flag), else
 * `SVC_AGENT_DIR`, else {@link defaultProfileDir}.
 */
export function resolveProfileDir(explicit: string | undefined, platform: NodeJS.Platform, env: Record<string, string | undefined>): string {
  if (explicit !== undefined && explicit !== "") return explicit;
  const fromEnv = env[PROFILE_DIR_ENV];
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  return defaultProfileDir(platform, env);
}

/** The profile file inside a profile directory. */
export function profilePath(dir: string): string {
  return join(dir, PROFILE_FILE);
}

/** Why a profile could not be read: `missing` (never bound), `invalid` (bad JSON or field), `io`. */
export type ProfileErrorKind = "missing" | "invalid" | "io";

/** A profile that cannot be read or is not valid; the message names the file (and the field). */
export class ProfileError extends Error {
  readonly kind: ProfileErrorKind;
  readonly file: string;
  /** The errno code for `io` and `missing` (`ENOENT`, `EACCES`, ...). */
  readonly errno: string | undefined;

  constructor(kind: ProfileErrorKind, file: string, message: string, opts: { errno?: string; cause?: unknown } = {}) {
    super(message, { cause: opts.cause });
    this.name = "ProfileError";
    this.kind = kind;
    this.file = file;
    this.errno = opts.errno;
  }
}

function errnoOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** One readable line per problem: `mqtt.port: Invalid input: expected number, received string`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length > 0 ? i.path.join(".") : "(root)"}: ${i.message}`).join("; ");
}

/**
 * Creates the profile directory (and parents) with mode 0700 when missing. An existing directory
 * keeps its mode: it may be a shared one chosen with `--profile-dir`.
 * @throws the fs error (EACCES without privileges)
 */
export async function ensureProfileDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
}

/**
 * Validates and stores the profile atomically: a temp file in the same directory, written with
 * mode 0600 and fsynced, then renamed over `profile.json`. A crash leaves the old profile or the
 * new one, never half of one.
 * @returns the path of the written file
 * @throws ProfileError `invalid` when the profile does not match the schema (nothing written);
 *   the fs error when the directory or file cannot be written
 */
export async function writeProfile(dir: string, profile: AgentProfile): Promise<string> {
  const file = profilePath(dir);
  const parsed = agentProfileSchema.safeParse(profile);
  if (!parsed.success) throw new ProfileError("invalid", file, `refusing to write ${file}: ${describeIssues(parsed.error)}`);
  await ensureProfileDir(dir);
  await writeFileAtomic(file, `${JSON.stringify(parsed.data, null, 2)}\n`, { mode: 0o600 });
  return file;
}

/**
 * Reads and validates `profile.json` from `dir`.
 * @throws ProfileError `missing` (no file: the node was never bound here), `io` (unreadable,
 *   e.g. EACCES without root), `invalid` (not JSON, or a field fails the schema: the message
 *   names the file and the field)
 */
export async function readProfile(dir: string): Promise<AgentProfile> {
  const file = profilePath(dir);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    const errno = errnoOf(err);
    if (errno === "ENOENT") {
      throw new ProfileError("missing", file, `no profile at ${file}: run \`svcctl bind\` first (or pass --profile-dir)`, { errno, cause: err });
    }
    throw new ProfileError("io", file, `cannot read ${file}: ${(err as Error).message}`, { errno, cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ProfileError("invalid", file, `${file} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  const parsed = agentProfileSchema.safeParse(json);
  if (!parsed.success) throw new ProfileError("invalid", file, `${file} is not a valid profile: ${describeIssues(parsed.error)}`);
  return parsed.data;
}
