import { createHash } from "node:crypto";
import { CLIENT_GOOS, CLIENT_TARGETS, checkVersion, type ClientTarget } from "../protocol/client-targets.js";

// The names the console builds too (spec §4 rule 5) live in src/protocol, re-exported here.
export { CLIENT_UNZIP_DIR, artifactFilename, downloadCommand, releaseTag, shellQuote } from "../protocol/client-targets.js";

/**
 * Names of client artifacts (spec §2.2, §9 rule 2; DESIGN §3 "Client artifact"): the supported
 * targets, the zip name `svc-client-{goos}-{goarch}-v{version}.zip`, the release tag
 * `v{version}`, the stable `artifact_id` of a local build, and the copied download command
 * (spec §4 rules 5 and 6). Pure functions only.
 */

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
