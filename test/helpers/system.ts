import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import type { TestContext } from "node:test";

export interface SystemRequirements {
  /** Executables that must be found on PATH. */
  binaries?: string[];
  /** The test needs uid 0 (network namespaces, TUN devices). */
  root?: boolean;
}

/** Absolute path of an executable found on PATH, or undefined. */
export function findOnPath(binary: string): string | undefined {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, binary);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory: keep looking
    }
  }
  return undefined;
}

/**
 * Checks that the system parts a test needs are present (DESIGN §4). When something is missing
 * the test is skipped with a printed reason and false is returned, so the caller returns at once;
 * with SVC_TEST_REQUIRE_SYSTEM=1 (set by .ci/run after installing them) it throws instead.
 */
export function requireSystem(t: TestContext, what: SystemRequirements): boolean {
  const missing: string[] = [];
  if (what.root === true && process.getuid?.() !== 0) missing.push("root (uid 0)");
  for (const binary of what.binaries ?? []) {
    if (findOnPath(binary) === undefined) missing.push(`${binary} on PATH`);
  }
  if (missing.length === 0) return true;
  const reason = `missing: ${missing.join(", ")}`;
  if (process.env["SVC_TEST_REQUIRE_SYSTEM"] === "1") {
    throw new Error(`SVC_TEST_REQUIRE_SYSTEM=1 and ${reason}`);
  }
  t.skip(reason);
  return false;
}
