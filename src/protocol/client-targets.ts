/**
 * The supported client targets (DESIGN §3 "Client artifact": a fixed list), the `goos` and
 * `goarch` enums of the artifact routes' path parameters (spec §4) and of the artifact names
 * built from them (`src/domain/artifact-name.ts`).
 */

/** Every supported goos with its supported goarch values (DESIGN §3: a fixed list). */
export const CLIENT_TARGETS = {
  linux: ["amd64", "arm64", "arm"],
  darwin: ["amd64", "arm64"],
  windows: ["amd64", "arm64"],
} as const satisfies Record<string, readonly string[]>;

export type ClientGoos = keyof typeof CLIENT_TARGETS;
/** Every goos of {@link CLIENT_TARGETS}, for enum schemas. */
export const CLIENT_GOOS = ["linux", "darwin", "windows"] as const satisfies readonly ClientGoos[];
/** Every goarch that appears in {@link CLIENT_TARGETS}, for enum schemas; not every pair exists. */
export const CLIENT_GOARCH = ["amd64", "arm64", "arm"] as const;
export type ClientGoarch = (typeof CLIENT_GOARCH)[number];

/** One supported goos/goarch pair. */
export interface ClientTarget {
  goos: ClientGoos;
  goarch: ClientGoarch;
}

/**
 * The Node.js the client needs on its host, as the console's setup steps and the zip's README say
 * it. The bundle is built for Node.js 20 syntax and APIs (`src/services/client-bundle.ts`), but
 * Node.js 20 is past its end of life: an operator is told to install a release still in support.
 */
export const CLIENT_NODE_REQUIREMENT = "Node.js 22 or newer (an LTS release still in support)";

/** The directory the copied command unzips into (spec §4 rule 5: `unzip -oq <file> -d <dir>`). */
export const CLIENT_UNZIP_DIR = "svc-client";

/** Versions we put into file names: semver characters only, never a path separator. */
const VERSION_PATTERN = /^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$/;

/** `version` when usable in a file name or tag. @throws Error for anything else (a `/`, spaces, > 64 characters) */
export function checkVersion(version: string): string {
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

/**
 * The release asset URL the console builds itself for `remote_release` (spec §4 rules 2 and 5):
 * `{releaseDownloadUrl}/v{version}/svc-client-{goos}-{goarch}-v{version}.zip`.
 * @param releaseDownloadUrl `update.release_download_url` of system status (no trailing slash)
 */
export function releaseAssetUrl(releaseDownloadUrl: string, target: ClientTarget, version: string): string {
  return `${releaseDownloadUrl.replace(/\/+$/, "")}/${releaseTag(version)}/${artifactFilename(target, version)}`;
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
