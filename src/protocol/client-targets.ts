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
