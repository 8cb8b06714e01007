// @ts-check
/**
 * A `node:test` reporter: the top-level tests' durations summed per test file, longest first,
 * with when each file's last test ended (s after the run started). Where the CI's test step
 * spends its time (docs/history/decisions-2026.md "CI time: test files three at a time…" (now four)); not part of
 * `npm test`. Plain JavaScript: Node loads reporters before `--import tsx` applies. Add it
 * beside the usual reporter:
 *
 *   node --import tsx --test --test-concurrency=4 --test-timeout=300000 \
 *     --test-reporter=spec --test-reporter-destination=stdout \
 *     --test-reporter=./scripts/test-file-times.mjs --test-reporter-destination=/tmp/file-times.txt \
 *     $(find test -name '*.test.ts' | sort)
 *
 * Lines: `seconds tests end@seconds path`. The durations are the tests' own; a file's process
 * start-up (tsx, the module graph) is not in them.
 *
 * @param {AsyncIterable<{ type: string; data?: any }>} source the run's events
 * @returns {AsyncGenerator<string>} the table, once the run ends
 */
export default async function* fileTimes(source) {
  /** @type {Map<string, { ms: number; tests: number; endedAt: number }>} */
  const files = new Map();
  const started = Date.now();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const data = event.data;
    if (data.nesting !== 0 || data.file === undefined) continue;
    const entry = files.get(data.file) ?? { ms: 0, tests: 0, endedAt: 0 };
    entry.ms += data.details.duration_ms;
    entry.tests += 1;
    entry.endedAt = Date.now() - started;
    files.set(data.file, entry);
  }
  const rows = [...files].sort((a, b) => b[1].ms - a[1].ms);
  const total = rows.reduce((sum, [, f]) => sum + f.ms, 0);
  yield `${(total / 1000).toFixed(1)} s of top-level tests in ${rows.length} files\n`;
  for (const [file, f] of rows) {
    const path = file.replace(/^.*\/(test\/)/, "$1");
    yield `${(f.ms / 1000).toFixed(1).padStart(7)} s ${String(f.tests).padStart(4)} end@${(f.endedAt / 1000).toFixed(0).padStart(4)} ${path}\n`;
  }
}
