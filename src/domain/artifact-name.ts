import { createHash } from "node:crypto";
import { CLIENT_GOOS, CLIENT_TARGETS, type ClientTarget } from "../protocol/client-targets.js";

/**
 * Names of client artifacts (spec §2.2, §9 rule 2; DESIGN §3 "Client artifact"): the supported
 * targets, the zip name `svc-client-{goos}-{goarch}-v{version}.zip`, the release tag
 * `v{version}`, the stable `artifact_id` of a local build, and the copied download command
 * (spec §4 rules 5 and 6). Pure functions only.
 */

/** The directory the copied command unzips into (spec §4 rule 5: `unzip -oq <file> -d <dir>`). */
export const CLIENT_UNZIP_DIR = "svc-client";

/** Every supported target, in {@link CLIENT_TARGETS} order. */
export function supportedTargets(): ClientTarget[] {
  return CLIENT_GOOS.flatMap((goos) => CLIENT_TARGETS[goos].map((goarch) => ({ goos, goarch })));
}

/** The supported target for this goos/goarch pair, or undefined. */
export function findTarget(goos: string, goarch: string): ClientTarget | undefined {
  return supportedTargets().find((t) => t.goos === goos && t.goarch === goarch);
}

/** `goos/goarch, ...` of every supported target, for messages. */
export function describeTargets(): string {
  return supportedTargets()
    .map((t) => `${t.goos}/${t.goarch}`)
    .join(", ");
}

/** Versions we put into file names: semver characters only, never a path separator. */
const VERSION_PATTERN = /^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$/;

function checkVersion(version: string): string {
  if (!VERSION_PATTERN.test(version)) throw new Error(`unusable version for a client artifact: ${JSON.stringify(version)}`);
  return version;
}

/** The release tag of a version (spec §9 rule 2): `v{version}`. */
export function releaseTag(version: string): string {
  return `v${checkVersion(version)}`;
}

/** The zip name (spec §2.2): `svc-client-{goos}-{goarch}-v{version}.zip`. */
export function artifactFilename(target: ClientTarget, version: string): string {
  return `svc-client-${target.goos}-${target.goarch}-v${checkVersion(version)}.zip`;
}

const ID_MAX = 64;

/**
 * The stable id of a local build of `target` at `version`, e.g. `art-linux-amd64-v0-1-0`:
 * the version lower-cased with every run of other characters made one `-`. A version too long
 * for the 64-character id syntax is replaced by 16 hex digits of its SHA-256. Always matches
 * `^[a-z0-9][a-z0-9_-]{0,63}$` (DESIGN §3 Ids).
 */
export function artifactId(target: ClientTarget, version: string): string {
  const prefix = `art-${target.goos}-${target.goarch}-v`;
  const slug = checkVersion(version)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  if (prefix.length + slug.length <= ID_MAX) return `${prefix}${slug}`;
  return `${prefix}${createHash("sha256").update(version, "utf8").digest("hex").slice(0, 16)}`;
}

/**
 * One word for a POSIX shell: left bare when made only of characters no shell treats specially,
 * otherwise single-quoted (a `'` inside becomes `'\''`).
 */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, "'\\''")}'`;
}

/**
 * The copied download command (spec §4 rules 5 and 6): `curl -fL -o <file> <url>` followed by
 * `unzip -oq <file> -d svc-client` of the same archive, nothing else.
 * @param url the file URL: a release asset URL, or `{base_url}{download_path}` carrying only
 *   `?download_token=...` (never an admin token)
 */
export function downloadCommand(filename: string, url: string): string {
  const file = shellQuote(filename);
  return `curl -fL -o ${file} ${shellQuote(url)} && unzip -oq ${file} -d ${shellQuote(CLIENT_UNZIP_DIR)}`;
}
