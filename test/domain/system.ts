import type { TestContext } from "node:test";
import { requireSystem } from "../helpers/system.js";

/**
 * True when the executable `name` is on PATH (DESIGN §4). When it is missing the test is skipped
 * with a printed reason and false is returned, so the caller returns at once; with
 * SVC_TEST_REQUIRE_SYSTEM=1 it throws instead, failing the test. Delegates to the shared
 * `test/helpers/system.ts` so the skip-or-fail rule lives in one place.
 */
export function requireBinary(t: TestContext, name: string): boolean {
  return requireSystem(t, { binaries: [name] });
}
