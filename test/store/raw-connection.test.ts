import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test, type TestContext } from "node:test";
import ts from "typescript";

// DESIGN §2 "src/store: the only folder with SQL", and the store owns its connection: outside
// src/store nothing reaches the better-sqlite3 handle. Code holds the Store and goes through its
// doors (Store.transaction, Store.read, Store.whenIdle, Kysely's `db`); raw-statement
// repositories and statement factories take the Store itself.

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Names only src/store may import: the handle behind a Connected, and the statement cache. */
const INTERNAL_NAMES = new Set(["sqliteOf", "CONNECTION", "StatementCache"]);

/**
 * Every place under `<root>/src` (src/store excepted) that touches the raw connection, one line
 * each, `path:line: what`, sorted: an import of better-sqlite3 (type-only, dynamic and
 * `import("…")` types included), a `.sqlite` property (the store's raw handle), a `.statements`
 * property of a store (Kysely's statement cache, whose `prepare` is the handle's), a
 * `.connection()` call (holding Kysely's connection by hand), or an import of one of
 * {@link INTERNAL_NAMES}. Walked with the TypeScript parser, no regexes.
 */
function rawConnectionUses(root: string): string[] {
  const src = join(root, "src");
  const out: string[] = [];
  for (const file of tsFiles(src)) {
    const rel = relative(root, file).split(sep).join("/");
    if (rel.startsWith("src/store/")) continue;
    const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true, file.endsWith(".tsx") ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
    const report = (node: ts.Node, what: string) => out.push(`${rel}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}: ${what}`);
    const visit = (node: ts.Node): void => {
      for (const what of offences(node)) report(node, what);
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out.sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
}

/** What one syntax node does to the raw connection (usually nothing). */
function offences(node: ts.Node): string[] {
  const found: string[] = [];
  const specifier = moduleSpecifier(node);
  if (specifier === "better-sqlite3") found.push("imports better-sqlite3");
  if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && specifier !== undefined && /(^|\/)store\//.test(specifier)) {
    for (const name of importedNames(node)) if (INTERNAL_NAMES.has(name)) found.push(`imports the store's internal ${name}`);
  }
  if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.name)) {
    if (node.name.text === "sqlite") found.push(`reads the raw handle (${node.getText()})`);
    if (node.name.text === "statements" && /store$/i.test(node.expression.getText())) found.push(`reads the statement cache (${node.getText()})`);
  }
  if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression) && node.argumentExpression.text === "sqlite") {
    found.push(`reads the raw handle (${node.getText()})`);
  }
  if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && ts.isIdentifier(node.expression.name) && node.expression.name.text === "connection") {
    found.push(`holds Kysely's connection (${node.expression.getText()}())`);
  }
  return found;
}

/** The module a node imports: import/export-from, `import x = require`, `import()` and `import("…")` types. */
function moduleSpecifier(node: ts.Node): string | undefined {
  if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) return node.moduleSpecifier.text;
  if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) return node.moduleReference.expression.text;
  if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] !== undefined && ts.isStringLiteral(node.arguments[0])) return node.arguments[0].text;
  if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) return node.argument.literal.text;
  return undefined;
}

/** The names an import or export-from brings in (the original names of renamed ones). */
function importedNames(node: ts.ImportDeclaration | ts.ExportDeclaration): string[] {
  if (ts.isExportDeclaration(node)) {
    return node.exportClause !== undefined && ts.isNamedExports(node.exportClause) ? node.exportClause.elements.map((e) => (e.propertyName ?? e.name).text) : [];
  }
  const bindings = node.importClause?.namedBindings;
  return bindings !== undefined && ts.isNamedImports(bindings) ? bindings.elements.map((e) => (e.propertyName ?? e.name).text) : [];
}

function tsFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...tsFiles(path));
    else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith(".d.ts")) files.push(path);
  }
  return files;
}

function fixtureTree(t: TestContext, files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "raw-connection-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe("only src/store touches the raw connection", () => {
  test("each way of reaching the handle outside src/store is listed with its file and line; src/store itself and the store's doors are not", (t) => {
    const root = fixtureTree(t, {
      "src/store/db.ts": 'import SQLite from "better-sqlite3";\nexport const open = (f: string) => new SQLite(f).prepare("SELECT 1");\n',
      "src/services/good.ts": [
        'import type { Store } from "../store/db.js";',
        'import { countStore } from "../store/summary.repository.js";',
        "export const counts = (store: Store) => store.read(countStore);",
        "export const later = (store: Store) => store.whenIdle(() => countStore(store));",
        "",
      ].join("\n"),
      "src/services/bad.ts": [
        'import type SQLite from "better-sqlite3";',
        'import { sqliteOf, type Connected } from "../store/connection.js";',
        'import type { Store } from "../store/db.js";',
        "export const a = (store: Store) => store.sqlite.prepare('SELECT 1');",
        "export const b = (store: Store) => store.db.connection().execute(async () => 1);",
        "export const c = (conn: Connected): SQLite.Database => sqliteOf(conn);",
        'export const d = (store: Store) => store["sqlite"];',
        "export const e = (store: Store) => store.statements.prepare('SELECT 1');",
        "",
      ].join("\n"),
      "src/mqtt/later.ts": 'export const load = () => import("better-sqlite3");\nexport type H = import("better-sqlite3").Database;\nexport { StatementCache } from "../store/db.js";\n',
    });
    assert.deepEqual(rawConnectionUses(root), [
      "src/mqtt/later.ts:1: imports better-sqlite3",
      "src/mqtt/later.ts:2: imports better-sqlite3",
      "src/mqtt/later.ts:3: imports the store's internal StatementCache",
      "src/services/bad.ts:1: imports better-sqlite3",
      "src/services/bad.ts:2: imports the store's internal sqliteOf",
      "src/services/bad.ts:4: reads the raw handle (store.sqlite)",
      "src/services/bad.ts:5: holds Kysely's connection (store.db.connection())",
      'src/services/bad.ts:7: reads the raw handle (store["sqlite"])',
      "src/services/bad.ts:8: reads the statement cache (store.statements)",
    ]);
  });

  test("no file of src/ outside src/store touches the raw connection", () => {
    const uses = rawConnectionUses(REPO);
    assert.deepEqual(uses, [], `the raw connection is touched outside src/store:\n${uses.join("\n")}`);
  });
});
