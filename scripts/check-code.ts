/**
 * Code-shape check (no `!` non-null assertions; long functions and long files split by
 * responsibility; no comment citing an issue or a work session). Run by `npm test` (pretest),
 * beside check-imports.ts.
 *
 *   tsx scripts/check-code.ts            check this repository
 *   tsx scripts/check-code.ts <root>     check the tree at <root> (tests run it on a fixture tree)
 *
 * The server (`src/`) and the console (`web/src/`, `.ts` and `.tsx`) keep the same shape. The
 * first three rules are read from the TypeScript compiler's syntax tree (no regexes, so `!==`,
 * `!x` and a `!` inside a string, a comment or JSX text are never mistaken for an assertion):
 *
 * 1. **No non-null assertion.** Every `NonNullExpression` (`x!`, `a[i]!.b`, `f()!`) is reported:
 *    narrow the value instead (a check that throws or returns, a default, a type whose field is
 *    not optional; where the value exists by construction, a check that throws and says why).
 *    No allow-list: a new `!` fails.
 * 2. **No long function.** A function (declaration, expression, arrow, method, constructor,
 *    accessor) spanning more than {@link MAX_FUNCTION_LINES} lines, counted from the line of
 *    its first token to the line of its last, nested functions included (a factory that
 *    returns an object of closures is as long as all of them; so is a React component with its
 *    handlers). The few that stay long are listed in {@link LONG_FUNCTIONS} with the reason,
 *    `src/` and `web/src/` files alike; an entry that names no function over the limit any
 *    more fails the check too, so the list only shrinks.
 * 3. **No long file in `src/`.** A file over {@link MAX_FILE_LINES} lines holds more than one
 *    responsibility: split it by responsibility, keeping the module path of its exports (a
 *    re-export) when others import them. Generated files and the migrations are excepted,
 *    each named in {@link LONG_FILES} with the reason; an entry whose file is gone fails the
 *    check.
 * 4. **No issue or work-session citation.** Comments, test names, strings and docs say why in
 *    the domain's terms; "issue 14", "issues 3 and 4", "Issue 14:" and "eighth session",
 *    "3rd session", "this session", "work session" are reported wherever they appear in the text
 *    ({@link citationsOf}). Domain sessions (an admin session, an MQTT session,
 *    `session_present`, an SSE session) are not citations. Read line by line with regexes over
 *    `src/`, `web/src/`, `test/` (`.ts`, `.tsx`, `.mjs`), `docs/*.md` and `README.md`; the
 *    archive `docs/history/` keeps its dated labels and is not read.
 *
 * Output: one line per finding, `src/a.ts:12:5: non-null assertion \`x!\``,
 * `src/a.ts:40: function runAgent is 120 lines (limit 60)`, `src/a.ts: file is 577 lines
 * (limit 500)` or `test/a.test.ts:3: cites an issue/session: "…"`, then a summary; exit 1 on
 * any finding or stale allow-list entry, 0 otherwise.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { slash, sourceFiles } from "./check-imports.js";

/** The most lines a function may span ("no function over ~60 lines"). */
export const MAX_FUNCTION_LINES = 60;

/** The most lines a file in `src/` may have (a last line without a newline counts). */
export const MAX_FILE_LINES = 500;

/** A file of `src/` excepted from {@link MAX_FILE_LINES}. `file` from the root. */
export interface LongFile {
  file: string;
  /** What kind of file it is (generated, migrations) and why its length is not a design smell. */
  reason: string;
}

/**
 * The files of this repository excepted from the file length limit, whatever their length: the
 * migrations, and any generated file (none in `src/` so far; its entry names the generator).
 */
export const LONG_FILES: readonly LongFile[] = [
  { file: "src/store/migrations.ts", reason: "the migrations: one frozen entry per released schema change, only ever appended to" },
];

/** A function allowed to stay over the limit. `file` from the root, `name` as reported. */
export interface LongFunction {
  file: string;
  name: string;
  /** Why it stays: what the lines are, and why splitting them would not make it easier to read. */
  reason: string;
  /** A ceiling of its own, lines: longer than this it is reported even though it is listed. */
  max?: number;
}

/**
 * Functions of this repository (`src/` and `web/src/`) that stay over the limit, each with its
 * reason. Remove an entry when its function is split (a stale entry fails the check).
 */
export const LONG_FUNCTIONS: readonly LongFunction[] = [
  // Declarative tables: one statement per table, route, option or metric family; splitting cuts a list.
  { file: "src/store/migrations.ts", name: "up", reason: "the schema's CREATE TABLE statements, one after another (a migration is never edited)" },
  { file: "src/services/metrics.ts", name: "ServiceMetrics.constructor", reason: "one metric family declaration per statement, each with its collect callback" },
  { file: "src/cli/svcctl.ts", name: "buildProgram", reason: "the commander declaration of every command and option of svcctl" },
  { file: "src/services/client-bundle.ts", name: "readme", reason: "the client zip's README text, a template" },
  { file: "src/http/app.ts", name: "buildApp", reason: "Fastify setup and plugin registration in order" },
  { file: "src/http/routes/artifacts.routes.ts", name: "artifactsRoutes", reason: "route registration" },
  { file: "src/http/routes/backups.routes.ts", name: "backupsRoutes", reason: "route registration" },
  { file: "src/http/routes/client.routes.ts", name: "clientRoutes", reason: "route registration" },
  { file: "src/http/routes/configs.routes.ts", name: "configsRoutes", reason: "route registration" },
  { file: "src/http/routes/nodes.routes.ts", name: "nodesRoutes", reason: "route registration" },
  // Sequential procedures read top to bottom; each waits for its own change.
  { file: "src/config.ts", name: "loadSettings", reason: "one settings object built field by field from the parsed environment" },
  { file: "src/services/snapshots.ts", name: "extractSnapshotZip", reason: "the zip checks in the order the archive is read" },
  { file: "src/mqtt/broker-sync.ts", name: "BrokerSync.#run", reason: "the reconcile loop with its retry policy" },
];

/** One finding. */
export interface Finding {
  /** `/`-separated, relative to the checked root (`src/agent/agent.ts`). */
  file: string;
  /** 1-based. */
  line: number;
  /** 1-based. */
  column: number;
  kind: "non-null" | "long-function" | "long-file" | "citation";
  /**
   * For `non-null`: the expression's text; for `long-function`: the function's name; for
   * `long-file`: the file; for `citation`: the line, trimmed.
   */
  text: string;
  /** For `long-function`: lines spanned; for `long-file`: lines of the file. */
  lines?: number;
}

/**
 * The name a function is reported by: its own, its variable's or property's; methods as
 * `Class.method`; an anonymous one as `enclosing/<anonymous>` (`<anonymous>` at the top level).
 */
export function functionName(node: ts.FunctionLikeDeclaration, sf: ts.SourceFile): string {
  const own = (): string | undefined => {
    if (ts.isConstructorDeclaration(node)) return "constructor";
    if (node.name !== undefined) return node.name.getText(sf);
    const parent = node.parent;
    if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) return parent.name.getText(sf);
    return undefined;
  };
  const name = own();
  const holder = node.parent;
  if (name !== undefined && (ts.isClassDeclaration(holder) || ts.isClassExpression(holder)) && holder.name !== undefined) return `${holder.name.text}.${name}`;
  if (name !== undefined) return name;
  // An anonymous function is named after the function it stands in: `outer/<anonymous>`.
  for (let up: ts.Node | undefined = holder; up !== undefined; up = up.parent) {
    if (ts.isFunctionLike(up) && "body" in up) return `${functionName(up as ts.FunctionLikeDeclaration, sf)}/<anonymous>`;
  }
  return "<anonymous>";
}

/** Every non-null assertion and long function of one source text (`.tsx` parsed as JSX), in source order. */
export function findingsOf(file: string, sourceText: string, maxLines = MAX_FUNCTION_LINES): Finding[] {
  const sf = ts.createSourceFile(file, sourceText, ts.ScriptTarget.Latest, true, file.endsWith(".tsx") ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const out: Finding[] = [];
  const at = (node: ts.Node) => sf.getLineAndCharacterOfPosition(node.getStart(sf));
  const visit = (node: ts.Node): void => {
    if (ts.isNonNullExpression(node)) {
      const pos = at(node);
      out.push({ file, line: pos.line + 1, column: pos.character + 1, kind: "non-null", text: node.getText(sf) });
    } else if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      const fn = node as ts.FunctionLikeDeclaration;
      const start = at(fn);
      const end = sf.getLineAndCharacterOfPosition(fn.getEnd()).line;
      const lines = end - start.line + 1;
      if (lines > maxLines) {
        out.push({ file, line: start.line + 1, column: start.character + 1, kind: "long-function", text: functionName(fn, sf), lines });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** Lines of a text as `wc -l` counts them, plus a last line without a newline. */
export function lineCount(text: string): number {
  let n = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) n++;
  return text === "" || text.endsWith("\n") ? n : n + 1;
}

/**
 * An issue citation: "issue 14", "issues 3 and 4", "issue #14", "Issue 14:". A number must
 * follow the word, so "an issue with the lease" is prose.
 */
const ISSUE_CITATION = /\bissues?\s*#?\d+/i;

/**
 * A work-session citation: an ordinal session ("eighth session", "3rd-session"), "this session"
 * or "work session". Domain sessions (admin, MQTT, SSE, `session_present`) have no ordinal; "a
 * work-session citation", the name of this rule, is not one either (a hyphen, not a space).
 */
const SESSION_CITATION =
  /\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\d+(?:st|nd|rd|th))[- ]session\b|\b(?:this|work) session\b/i;

/** Every line of a text that cites an issue or a work session, as `citation` findings (column 1). */
export function citationsOf(file: string, text: string): Finding[] {
  const out: Finding[] = [];
  text.split("\n").forEach((line, i) => {
    if (ISSUE_CITATION.test(line) || SESSION_CITATION.test(line)) out.push({ file, line: i + 1, column: 1, kind: "citation", text: line.trim() });
  });
  return out;
}

/**
 * The files read for citations: `src/`, `web/src/` and `test/` (`.ts`, `.tsx`, `.mjs`, not
 * `.d.ts`), the top level of `docs/` (`.md`; `docs/history/` is the archive) and `README.md`.
 */
export function citationFiles(root: string): string[] {
  const code = (dir: string): string[] => {
    if (!existsSync(dir)) return [];
    const out: string[] = [];
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) out.push(...code(p));
      else if (/\.(ts|tsx|mjs)$/.test(name) && !name.endsWith(".d.ts")) out.push(p);
    }
    return out;
  };
  const docs = join(root, "docs");
  const markdown = existsSync(docs) ? readdirSync(docs).sort().filter((n) => n.endsWith(".md")).map((n) => join(docs, n)) : [];
  const readme = join(root, "README.md");
  return [...code(join(root, "src")), ...code(join(root, "web", "src")), ...code(join(root, "test")), ...markdown, ...(existsSync(readme) ? [readme] : [])];
}

/** What a check of a tree tolerates; empty for a fixture tree. */
export interface CodeAllowances {
  /** Long functions ({@link LONG_FUNCTIONS} for this repository). */
  functions?: readonly LongFunction[];
  /** Files excepted from the length limit ({@link LONG_FILES} for this repository). */
  files?: readonly LongFile[];
}

/**
 * Checks every file of `<root>/src` and `<root>/web/src` (the file length limit: `src/` only),
 * and the files of {@link citationFiles} for issue and work-session citations.
 * @param root directory holding `src/` (and `web/src/`, `test/`, `docs/`, when the tree has them)
 * @param allowed what to tolerate; nothing by default
 * @returns the findings not allowed, the allow-list entries that matched nothing (stale: a long
 *   function gone or short, an excepted file gone), and the file count
 */
export function checkCode(
  root: string,
  allowed: CodeAllowances = {},
  limits: { functionLines?: number; fileLines?: number } = {},
): { findings: Finding[]; stale: (LongFunction | LongFile)[]; files: number } {
  const maxLines = limits.functionLines ?? MAX_FUNCTION_LINES;
  const maxFileLines = limits.fileLines ?? MAX_FILE_LINES;
  const longFunctions = allowed.functions ?? [];
  const longFiles = allowed.files ?? [];
  const web = join(root, "web", "src");
  const files = [...sourceFiles(join(root, "src")), ...(existsSync(web) ? sourceFiles(web) : [])];
  const findings: Finding[] = [];
  const used = new Set<LongFunction>();
  for (const path of files) {
    const file = slash(relative(root, path));
    const text = readFileSync(path, "utf8");
    const lines = lineCount(text);
    if (file.startsWith("src/") && lines > maxFileLines && !longFiles.some((a) => a.file === file)) {
      findings.push({ file, line: 1, column: 1, kind: "long-file", text: file, lines });
    }
    for (const f of findingsOf(file, text, maxLines)) {
      const allowance = f.kind === "long-function" ? longFunctions.find((a) => a.file === f.file && a.name === f.text) : undefined;
      if (allowance !== undefined) used.add(allowance);
      if (allowance === undefined || (allowance.max !== undefined && f.lines !== undefined && f.lines > allowance.max)) findings.push(f);
    }
  }
  for (const path of citationFiles(root)) findings.push(...citationsOf(slash(relative(root, path)), readFileSync(path, "utf8")));
  const present = new Set(files.map((p) => slash(relative(root, p))));
  const stale = [...longFunctions.filter((a) => !used.has(a)), ...longFiles.filter((a) => !present.has(a.file))];
  return { findings, stale, files: files.length };
}

/** One output line per finding. */
export function formatFinding(f: Finding, maxLines = MAX_FUNCTION_LINES, maxFileLines = MAX_FILE_LINES): string {
  if (f.kind === "long-file") return `${f.file}: file is ${f.lines} lines (limit ${maxFileLines}) — split it by responsibility, or list it in LONG_FILES if it is generated or migrations`;
  if (f.kind === "citation") return `${f.file}:${f.line}: cites an issue/session: "${f.text.length > 80 ? `${f.text.slice(0, 77)}...` : f.text}" — say why in the domain's terms`;
  if (f.kind === "non-null") return `${f.file}:${f.line}:${f.column}: non-null assertion \`${f.text.length > 60 ? `${f.text.slice(0, 57)}...` : f.text}\` — narrow the value instead`;
  return `${f.file}:${f.line}: function ${f.text} is ${f.lines} lines (limit ${maxLines}) — split it, or list it in LONG_FUNCTIONS with the reason`;
}

/** The line for an allow-list entry that matches nothing. */
function formatStale(a: LongFunction | LongFile): string {
  if ("name" in a) return `${a.file}: allow-listed long function ${a.name} is gone or short — remove it from LONG_FUNCTIONS in scripts/check-code.ts`;
  return `${a.file}: excepted from the file length limit but gone — remove it from LONG_FILES in scripts/check-code.ts`;
}

/** The command: checks `argv[0]` (default this repository), writes one line per finding and a summary to `out`; the exit status (0 clean, 1 findings). */
export function main(argv: string[], out: (line: string) => void = console.log): number {
  const repoRoot = fileURLToPath(new URL("..", import.meta.url));
  const root = resolve(argv[0] ?? repoRoot);
  // The allow-lists name this repository's files; a fixture tree is checked without them.
  const allowed: CodeAllowances = resolve(root) === resolve(repoRoot) ? { functions: LONG_FUNCTIONS, files: LONG_FILES } : {};
  const { findings, stale, files } = checkCode(root, allowed);
  for (const f of findings) out(formatFinding(f));
  for (const a of stale) out(formatStale(a));
  if (findings.length + stale.length > 0) {
    const count = (kind: Finding["kind"]) => findings.filter((f) => f.kind === kind).length;
    const staleCount = `${stale.length} stale allow-list entr${stale.length === 1 ? "y" : "ies"}`;
    out(
      `check-code: ${count("non-null")} non-null assertion(s), ${count("long-function")} long function(s), ${count("long-file")} long file(s), ${count("citation")} issue/session citation(s), ${staleCount}`,
    );
    return 1;
  }
  const listed = (allowed.functions?.length ?? 0) + (allowed.files?.length ?? 0);
  out(`check-code: ${files} files, no non-null assertion, no function over ${MAX_FUNCTION_LINES} lines, no src/ file over ${MAX_FILE_LINES} lines (${listed} allow-listed), no issue/session citation`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
