import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkCode, findingsOf } from "../../scripts/check-code.js";
import { fixtureTree, runCheck } from "./harness.js";

// scripts/check-code.ts (issue 11 "Must show": no `!` non-null assertions in src/; §5: long
// functions split), checked over fixture trees so that each rule is seen to fail.

const tree = fixtureTree;
const run = (root?: string) => runCheck("check-code.ts", root);

/** A function of `n` lines in all (header and closing brace included). */
const fn = (name: string, n: number) => `export function ${name}(): number {\n${"  void 0;\n".repeat(n - 3)}  return 1;\n}\n`;

describe("scripts/check-code.ts (no non-null assertion, no long function in src/)", () => {
  test("only NonNullExpression nodes count: `!==`, `!x`, and `!` in strings or comments do not", () => {
    const text = [
      "const a: string | undefined = undefined;",
      "const b = a !== undefined && !a.startsWith('x!');",
      "// a! in a comment",
      "const c = a!.length;",
      "const d = [a][0]!;",
      "export { b, c, d };",
    ].join("\n");
    const found = findingsOf("src/x.ts", text).map((f) => `${f.kind} ${f.line}:${f.column} ${f.text}`);
    assert.deepEqual(found, ["non-null 4:11 a!", "non-null 5:11 [a][0]!"]);
  });

  test("a function over the limit is reported by name with its length; at the limit it is not", () => {
    const text = fn("atLimit", 60) + fn("over", 61) + "export class K {\n  m(): void {\n" + "    void 0;\n".repeat(60) + "  }\n}\n";
    const found = findingsOf("src/x.ts", text).map((f) => `${f.text} ${f.lines}`);
    assert.deepEqual(found, ["over 61", "K.m 62"]);
  });

  test("an anonymous function is named after the function it stands in", () => {
    const text = "export function outer(): () => void {\n  return () => {\n" + "    void 0;\n".repeat(60) + "  };\n}\n";
    assert.deepEqual(
      findingsOf("src/x.ts", text).map((f) => f.text),
      ["outer", "outer/<anonymous>"],
    );
  });

  test("a clean tree passes with exit 0; a `!` or a long function fails with one line each and exit 1", (t) => {
    const clean = run(tree(t, { "src/a.ts": fn("short", 10), "src/lib/b.ts": "export const b = (x?: string) => x ?? '';\n" }));
    assert.equal(clean.status, 0, clean.lines.join("\n"));
    assert.match(clean.lines.at(-1) ?? "", /^check-code: 2 files, no non-null assertion/);

    const bad = run(tree(t, { "src/a.ts": fn("long", 61), "src/lib/b.ts": "export const b = (x?: string) => x!;\n" }));
    assert.equal(bad.status, 1);
    assert.deepEqual(bad.lines.slice(0, 2), [
      "src/a.ts:1: function long is 61 lines (limit 60) — split it, or list it in LONG_FUNCTIONS with the reason",
      "src/lib/b.ts:1:34: non-null assertion `x!` — narrow the value instead",
    ]);
    assert.match(bad.lines.at(-1) ?? "", /^check-code: 1 non-null assertion\(s\), 1 long function\(s\), 0 stale/);
  });

  test("an allow-listed long function passes; an entry that matches nothing is stale and fails", (t) => {
    const root = tree(t, { "src/a.ts": fn("long", 61) });
    const entry = { file: "src/a.ts", name: "long", reason: "test" };
    const stale = { file: "src/a.ts", name: "gone", reason: "test" };
    const res = checkCode(root, [entry, stale]);
    assert.deepEqual(res.findings, []);
    assert.deepEqual(res.stale, [stale]);
  });

  test("an allow-listed function with a ceiling of its own is reported once longer than that (issue 11 §1: the composition root under 120 lines)", (t) => {
    const root = tree(t, { "src/a.ts": fn("root", 121) + fn("fits", 120) });
    const res = checkCode(root, [
      { file: "src/a.ts", name: "root", reason: "test", max: 120 },
      { file: "src/a.ts", name: "fits", reason: "test", max: 120 },
    ]);
    assert.deepEqual(res.findings.map((f) => `${f.text} ${f.lines}`), ["root 121"]);
    assert.deepEqual(res.stale, []);
  });

  test("this repository's src/ passes", () => {
    const res = run();
    assert.equal(res.status, 0, res.lines.join("\n"));
  });
});
