import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A fresh directory under the OS temp directory, removed with everything in it after the test.
 * @param prefix the directory name's start (what a leftover is recognised by)
 */
export function tempDir(t: { after(fn: () => void): void }, prefix = "svc-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
