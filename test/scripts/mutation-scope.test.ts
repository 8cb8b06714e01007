import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { functionRanges } from "../../scripts/mutation-scope.mjs";

// The mutation scope (docs/mutation.md "Scope"): Stryker takes
// line ranges, and hand-written ones had drifted onto other code as the files grew. The
// config now finds its functions by name (scripts/mutation-scope.mjs).

/** Every `file:start-end` entry of stryker.config.mjs's `mutate`. */
async function configRanges(): Promise<Array<{ file: string; start: number; end: number }>> {
  // Through a URL: the config is plain JavaScript (Stryker loads it without tsx) and has no types.
  const config = ((await import(pathToFileURL(resolve("stryker.config.mjs")).href)) as { default: { mutate: string[] } }).default;
  return config.mutate.flatMap((entry) => {
    const m = /^(.*):(\d+)-(\d+)$/.exec(entry);
    return m ? [{ file: m[1] ?? "", start: Number(m[2]), end: Number(m[3]) }] : [];
  });
}

test("docs/mutation.md: every line range of the mutation scope frames one whole function or method, from its declaration to its closing brace, and the bind/reset code of control.service.ts is all in it", async () => {
  const ranges = await configRanges();
  assert.ok(ranges.length > 0, "the scope has line ranges");
  const declared: string[] = [];
  for (const { file, start, end } of ranges) {
    const lines = readFileSync(file, "utf8").split("\n");
    const first = lines[start - 1] ?? "";
    const name = /^\s*(?:export\s+)?(?:async\s+)?(?:function\s+)?([A-Za-z_$][\w$]*)\s*\(/.exec(first)?.[1];
    assert.ok(name !== undefined, `${file}:${start} declares a function: ${JSON.stringify(first)}`);
    assert.match(lines[end - 1] ?? "", /^\s*}\s*$/, `${file}:${end} closes ${name}`);
    declared.push(`${file}#${name}`);
  }
  for (const name of ["bindCommand", "bind", "reset", "clearClientCredentials"]) {
    assert.ok(declared.includes(`src/services/control.service.ts#${name}`), `control.service.ts ${name} is mutated`);
  }
});

test("functionRanges finds functions and methods by name with TypeScript's parser, leaves doc comments out, and refuses a name it finds nowhere or twice", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-mutation-scope-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "a.ts");
  writeFileSync(
    file,
    [
      "/** doc */", //          1
      "export async function one(x: number): Promise<number> {", // 2
      "  return x;", //         3
      "}", //                   4
      "class C {", //           5
      "  /** doc */", //        6
      "  two(): void {", //     7
      "    const f = () => 1;", // 8
      "  }", //                 9
      "  twice(): void {}", //  10
      "}", //                   11
      "function twice(): void {}", // 12
    ].join("\n"),
  );
  assert.deepEqual(functionRanges(file, ["two", "one"]), [`${file}:7-9`, `${file}:2-4`]);
  assert.throws(() => functionRanges(file, ["three"]), /has 0 functions named three/);
  assert.throws(() => functionRanges(file, ["twice"]), /has 2 functions named twice/);
});
