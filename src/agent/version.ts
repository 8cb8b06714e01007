import { readFileSync } from "node:fs";

/**
 * The client version (spec §9 rule 3: injected once at client build time; reported in bind
 * requests and detect ACKs, spec §6.3).
 *
 * The release bundle defines it with esbuild:
 * `define: { "globalThis.__SVC_CLIENT_VERSION__": JSON.stringify(version) }`, which replaces the
 * expression below by a string literal. Run from a checkout (tsx), nothing is defined and the
 * repository's package.json version is used; when that file cannot be found or is not this
 * project's, the version is `0.0.0-dev`.
 */

declare global {
  // Must be `var`: only a `var` declaration adds a property to `globalThis`'s type.
  // eslint-disable-next-line no-var
  var __SVC_CLIENT_VERSION__: string | undefined;
}

/** The package name whose version a checkout reports (guards against a foreign package.json). */
const PACKAGE_NAME = "svc-mesh-control";
/** What a build without a define and without this repository's package.json reports. */
export const DEV_VERSION = "0.0.0-dev";

/**
 * The version from `package.json` at `url`, or {@link DEV_VERSION} when the file is missing,
 * unreadable, not JSON, or belongs to another package. Never throws.
 */
export function packageVersion(url: URL | string): string {
  try {
    const pkg = JSON.parse(readFileSync(url, "utf8")) as { name?: unknown; version?: unknown };
    if (pkg.name === PACKAGE_NAME && typeof pkg.version === "string" && pkg.version !== "") return pkg.version;
  } catch {
    // no package.json beside a bundle, or an unreadable one: the development fallback below
  }
  return DEV_VERSION;
}

function injectedVersion(): string | undefined {
  // esbuild's `define` rewrites this exact member expression; unbundled it is a plain global read.
  const v = globalThis.__SVC_CLIENT_VERSION__;
  return typeof v === "string" && v !== "" ? v : undefined;
}

function checkoutVersion(): string {
  try {
    // src/agent/version.ts → the repository root's package.json; compiled, dist/src/agent/version.js
    const url = import.meta.url;
    return packageVersion(new URL(url.endsWith(".ts") ? "../../package.json" : "../../../package.json", url));
  } catch {
    // import.meta.url is unusable in some bundle formats: same fallback
    return DEV_VERSION;
  }
}

/** The one client version of this build (spec §9 rule 3). */
export const CLIENT_VERSION: string = injectedVersion() ?? checkoutVersion();
