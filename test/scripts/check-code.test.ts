import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkCode, citationsOf, findingsOf, LONG_FILES, lineCount, main, MAX_FILE_LINES } from "../../scripts/check-code.js";
import { fixtureTree, runCheck, runMain } from "./harness.js";

// scripts/check-code.ts: no `!` non-null assertion and no long function in src/ and web/src,
// no file in src/ over 500 lines; checked over fixture trees so that each rule is seen to fail.

const tree = fixtureTree;
/** A fixture tree is checked in this process; this repository through the command itself, as `npm test` runs it. */
const run = (root?: string) => (root === undefined ? runCheck("check-code.ts") : runMain(main, root));

/** A function of `n` lines in all (header and closing brace included). */
const fn = (name: string, n: number) => `export function ${name}(): number {\n${"  void 0;\n".repeat(n - 3)}  return 1;\n}\n`;

describe("scripts/check-code.ts (no non-null assertion, no long function)", () => {
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
    assert.match(bad.lines.at(-1) ?? "", /^check-code: 1 non-null assertion\(s\), 1 long function\(s\), 0 long file\(s\), 0 issue\/session citation\(s\), 0 stale/);
  });

  test("an allow-listed long function passes; an entry that matches nothing is stale and fails", (t) => {
    const root = tree(t, { "src/a.ts": fn("long", 61) });
    const entry = { file: "src/a.ts", name: "long", reason: "test" };
    const stale = { file: "src/a.ts", name: "gone", reason: "test" };
    const res = checkCode(root, { functions: [entry, stale] });
    assert.deepEqual(res.findings, []);
    assert.deepEqual(res.stale, [stale]);
  });

  test("an allow-listed function with a ceiling of its own is reported once longer than that (the composition root keeps under its own ceiling)", (t) => {
    const root = tree(t, { "src/a.ts": fn("root", 121) + fn("fits", 120) });
    const res = checkCode(root, {
      functions: [
        { file: "src/a.ts", name: "root", reason: "test", max: 120 },
        { file: "src/a.ts", name: "fits", reason: "test", max: 120 },
      ],
    });
    assert.deepEqual(res.findings.map((f) => `${f.text} ${f.lines}`), ["root 121"]);
    assert.deepEqual(res.stale, []);
  });

  test("this repository's src/ and web/src pass", () => {
    const res = run();
    assert.equal(res.status, 0, res.lines.join("\n"));
  });
});

/** A file of `n` lines in all: short functions, each well under the function limit. */
const file = (n: number) => {
  const lines = Array.from({ length: n }, (_, i) => `export const v${i} = ${i};`);
  return `${lines.join("\n")}\n`;
};

describe("scripts/check-code.ts: no file in src/ over 500 lines", () => {
  test("lines are counted as `wc -l` does, a last line without a newline included", () => {
    assert.deepEqual(["", "a", "a\n", "a\nb", "a\nb\n", "\n\n"].map(lineCount), [0, 1, 1, 2, 2, 2]);
    assert.equal(lineCount(file(MAX_FILE_LINES)), 500);
  });

  test("a file at the limit passes; one line over fails with its length; the console's files are not held to it", (t) => {
    const atLimit = run(tree(t, { "src/a.ts": file(500), "web/src/big.ts": file(800) }));
    assert.equal(atLimit.status, 0, atLimit.lines.join("\n"));
    const over = run(tree(t, { "src/a.ts": file(500), "src/mqtt/b.ts": file(501) }));
    assert.equal(over.status, 1);
    assert.deepEqual(over.lines, [
      "src/mqtt/b.ts: file is 501 lines (limit 500) — split it by responsibility, or list it in LONG_FILES if it is generated or migrations",
      "check-code: 0 non-null assertion(s), 0 long function(s), 1 long file(s), 0 issue/session citation(s), 0 stale allow-list entries",
    ]);
  });

  test("the migrations are excepted by name whatever their length; an exception whose file is gone is stale", (t) => {
    assert.deepEqual(
      LONG_FILES.map((f) => f.file),
      ["src/store/migrations.ts"],
    );
    const root = tree(t, { "src/store/migrations.ts": file(900), "src/store/db.ts": file(501) });
    const res = checkCode(root, { files: [...LONG_FILES, { file: "src/generated/gone.ts", reason: "test" }] });
    assert.deepEqual(res.findings.map((f) => `${f.kind} ${f.file} ${f.lines}`), ["long-file src/store/db.ts 501"]);
    assert.deepEqual(res.stale.map((a) => a.file), ["src/generated/gone.ts"]);
  });
});

describe("scripts/check-code.ts: the console (web/src) keeps the same shape", () => {
  const component = (name: string, n: number) =>
    `export function ${name}(p: { x?: string }) {\n  const y = p.x ?? "";\n  return (\n    <ul>\n${"      <li>wait!</li>\n".repeat(n - 7)}    </ul>\n  );\n}\n`;

  test("`.tsx` is parsed as JSX: a `!` in JSX text is no assertion, a long component and `x!` are reported", (t) => {
    const res = run(
      tree(t, {
        "src/a.ts": fn("short", 10),
        "web/src/pages/home.tsx": component("Home", 60) + component("Long", 61),
        "web/src/main.tsx": 'export const root = document.getElementById("root")!;\n',
      }),
    );
    assert.equal(res.status, 1);
    assert.deepEqual(res.lines.slice(0, -1), [
      "web/src/main.tsx:1:21: non-null assertion `document.getElementById(\"root\")!` — narrow the value instead",
      "web/src/pages/home.tsx:61: function Long is 61 lines (limit 60) — split it, or list it in LONG_FUNCTIONS with the reason",
    ]);
  });

  test("an allow-list entry can name a console file", (t) => {
    const root = tree(t, { "src/a.ts": fn("short", 10), "web/src/pages/home.tsx": component("Long", 61) });
    assert.equal(checkCode(root).findings.length, 1);
    const res = checkCode(root, { functions: [{ file: "web/src/pages/home.tsx", name: "Long", reason: "test" }] });
    assert.deepEqual(res.findings, []);
    assert.deepEqual(res.stale, []);
  });
});

describe("scripts/check-code.ts: no comment, test name or doc cites an issue number or a session of work", () => {
  // The citations are assembled from parts so that this file does not cite anything itself.
  const issue = (n: number) => `issue ${n}`;
  const session = (ordinal: string) => `${ordinal} session`;
  const cited = (text: string) => citationsOf("test/x.test.ts", text).map((f) => `${f.line} ${f.text}`);

  test("an issue number is a citation wherever it stands: a comment, a test name, a heading", () => {
    assert.deepEqual(cited(`// the lease is renewed early (${issue(14)})\nconst a = 1;`), [`1 // the lease is renewed early (${issue(14)})`]);
    assert.deepEqual(cited(`test("${issue(10)}, spec §2.4: a stale lease expires", () => {});`), [`1 test("${issue(10)}, spec §2.4: a stale lease expires", () => {});`]);
    assert.deepEqual(cited(`## ${issue(14).replace("i", "I")}: prepared statements`).length, 1);
    assert.deepEqual(cited(`see ${issue(3).replace(" ", " #")} and ${issue(4).replace("issue", "issues")}`).length, 1);
  });

  test("an ordinal, 'this' or 'work' session is a citation; a domain session is not", () => {
    for (const s of [session("eighth"), session("3rd"), session("Twelfth").replace(" ", "-"), session("this"), session("work")]) {
      assert.equal(cited(`// measured in the ${s}`).length, 1, s);
    }
    const domain = ["// an admin session expires after 8 h", "// the MQTT session is resumed", "if (ack.session_present) return;", "// one SSE session per tab", "// an issue with the lease", "no issue or work-session citation (the rule's name)"];
    assert.deepEqual(cited(domain.join("\n")), []);
  });

  test("src/, web/src/, test/, docs/*.md and README.md are read; docs/history/ (the archive) is not", (t) => {
    const res = run(
      tree(t, {
        "src/a.ts": `// retried on the next turn (${issue(14)})\nexport const a = 1;\n`,
        "web/src/b.tsx": `export const b = "${session("eighth")}";\n`,
        "test/c.test.mjs": `// ${session("work")}\n`,
        "docs/d.md": `# D\n\nSince ${issue(9)}.\n`,
        "docs/history/decisions-2026.md": `## ${issue(14)}: prepared statements (${session("eighth")})\n`,
        "README.md": "An admin session lasts 8 h.\n",
      }),
    );
    assert.equal(res.status, 1);
    assert.deepEqual(res.lines.slice(0, -1), [
      `src/a.ts:1: cites an issue/session: "// retried on the next turn (${issue(14)})" — say why in the domain's terms`,
      `web/src/b.tsx:1: cites an issue/session: "export const b = "${session("eighth")}";" — say why in the domain's terms`,
      `test/c.test.mjs:1: cites an issue/session: "// ${session("work")}" — say why in the domain's terms`,
      `docs/d.md:3: cites an issue/session: "Since ${issue(9)}." — say why in the domain's terms`,
    ]);
    assert.match(res.lines.at(-1) ?? "", /, 4 issue\/session citation\(s\), /);
  });
});
