import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { test } from "node:test";
import ts from "typescript";

/**
 * DESIGN §2: `src/store/` is "the only folder with SQL" (repositories, plain functions with `db`
 * first; prepared statements of the hot path made by store factories). This test parses every
 * `src/**\/*.ts` outside `src/store/` with the TypeScript parser and lists each call that runs
 * SQL: better-sqlite3 `prepare(` / `exec("…")` / `pragma(` / `transaction(` on a raw connection,
 * Kysely's query builders (`selectFrom`, `insertInto`, `updateTable`, `deleteFrom`, `replaceInto`,
 * `mergeInto`, `selectNoFrom`) and its `sql` template tag. The Store's own
 * `store.transaction(async (trx) => …)` is not SQL: services own transactions (DESIGN §2).
 */

const ROOT = join(import.meta.dirname, "..", "..");
const SRC = join(ROOT, "src");

/** What a call runs, as listed in failures and in the allow-list. */
type SqlKind = "prepare" | "exec" | "pragma" | "transaction" | "kysely" | "sql-tag";

interface Finding {
  /** Path relative to the repository root, `/`-separated. */
  file: string;
  line: number;
  kind: SqlKind;
  /** The enclosing named declaration: `Class.method`, `function`, or `(module)`. */
  where: string;
  text: string;
}

const KYSELY_BUILDERS = new Set(["selectFrom", "insertInto", "updateTable", "deleteFrom", "replaceInto", "mergeInto", "selectNoFrom"]);
/** Receivers of `.transaction(` that are the Store's API, not a raw connection. */
const STORE_RECEIVERS = new Set(["store", "#store"]);

function lastName(expr: ts.Expression): string | undefined {
  if (ts.isIdentifier(expr) || ts.isPrivateIdentifier(expr)) return expr.text;
  if (ts.isPropertyAccessExpression(expr)) return expr.name.text;
  if (ts.isCallExpression(expr)) return lastName(expr.expression);
  return undefined;
}

function enclosing(node: ts.Node): string {
  const names: string[] = [];
  for (let n: ts.Node | undefined = node.parent; n; n = n.parent) {
    if (ts.isMethodDeclaration(n) || ts.isFunctionDeclaration(n) || ts.isGetAccessor(n) || ts.isSetAccessor(n)) {
      if (n.name) names.unshift(n.name.getText());
    } else if (ts.isConstructorDeclaration(n)) {
      names.unshift("constructor");
    } else if (ts.isClassDeclaration(n) && n.name) {
      names.unshift(n.name.text);
    } else if (ts.isVariableDeclaration(n) && ts.isIdentifier(n.name) && n.parent.parent && ts.isVariableStatement(n.parent.parent)) {
      if (ts.isSourceFile(n.parent.parent.parent)) names.unshift(n.name.text);
    }
  }
  return names.length === 0 ? "(module)" : names.join(".");
}

/** Every SQL-running call of one source text (see the module comment for what counts). */
export function findSql(file: string, text: string): Finding[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const out: Finding[] = [];
  const add = (node: ts.Node, kind: SqlKind) => {
    // The call itself (`updateTable("bind_tokens")`), not the chain before it.
    const shown = ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) ? node.expression.name : node;
    const { line } = source.getLineAndCharacterOfPosition(shown.getStart(source));
    const text = source.text.slice(shown.getStart(source), node.getEnd()).split("\n")[0]!.slice(0, 100);
    out.push({ file, line: line + 1, kind, where: enclosing(node), text });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isTaggedTemplateExpression(node)) {
      const tag = node.tag;
      if ((ts.isIdentifier(tag) && tag.text === "sql") || (ts.isPropertyAccessExpression(tag) && ts.isIdentifier(tag.expression) && tag.expression.text === "sql")) {
        add(node, "sql-tag");
      }
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const name = ts.isIdentifier(callee) ? callee.text : ts.isPropertyAccessExpression(callee) ? callee.name.text : undefined;
      const receiver = ts.isPropertyAccessExpression(callee) ? callee.expression : undefined;
      const arg = node.arguments[0];
      if (name !== undefined && KYSELY_BUILDERS.has(name)) add(node, "kysely");
      else if (receiver && ts.isIdentifier(receiver) && receiver.text === "sql") add(node, "sql-tag");
      else if (receiver && name === "prepare") add(node, "prepare");
      else if (receiver && name === "pragma") add(node, "pragma");
      else if (receiver && name === "exec" && !ts.isRegularExpressionLiteral(receiver) && arg && (ts.isStringLiteral(arg) || ts.isNoSubstitutionTemplateLiteral(arg) || ts.isTemplateExpression(arg))) {
        add(node, "exec");
      } else if (receiver && name === "transaction" && !STORE_RECEIVERS.has(lastName(receiver) ?? "")) add(node, "transaction");
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

/**
 * The SQL allowed outside `src/store`, each named exactly (file, enclosing declaration, kind, how
 * many): none. The command tracker's statements and the control service's
 * bind, reset and control-log queries live in store repositories too, so any SQL-running call
 * outside `src/store` fails this test. An entry would need a reason (`waitsFor`) to be added.
 */
const ALLOWED: Array<{ file: string; where: string; kind: SqlKind; count: number; waitsFor: string }> = [];

function allowKey(f: { file: string; where: string; kind: SqlKind }): string {
  return `${f.file} ${f.where} ${f.kind}`;
}

function sqlOutsideStore(): Finding[] {
  const found: Finding[] = [];
  for (const path of sourceFiles(SRC)) {
    const file = relative(ROOT, path).split(sep).join("/");
    if (file.startsWith("src/store/")) continue;
    found.push(...findSql(file, readFileSync(path, "utf8")));
  }
  return found;
}

test("DESIGN §2 'the only folder with SQL': no SQL-running call in src/ outside src/store but the allow-listed ones, each allow-list entry matching exactly", () => {
  const found = sqlOutsideStore();
  const byKey = new Map<string, Finding[]>();
  for (const f of found) byKey.set(allowKey(f), [...(byKey.get(allowKey(f)) ?? []), f]);
  const problems: string[] = [];
  const allowedKeys = new Set<string>();
  for (const a of ALLOWED) {
    const key = allowKey(a);
    allowedKeys.add(key);
    const n = byKey.get(key)?.length ?? 0;
    if (n !== a.count) problems.push(`allow-list entry "${key}" expects ${a.count} call(s), found ${n}: update the entry (or drop it once moved to src/store)`);
  }
  for (const [key, list] of byKey) {
    if (allowedKeys.has(key)) continue;
    for (const f of list) problems.push(`${f.file}:${f.line} ${f.kind} in ${f.where}: ${f.text}  -> move it into a repository under src/store`);
  }
  assert.deepEqual(problems, [], `SQL outside src/store:\n${problems.join("\n")}`);
});

test("the scan finds each kind of SQL call and leaves the Store's transaction, regex exec and process exec alone", () => {
  const found = findSql(
    "src/services/planted.ts",
    `
    import { sql } from "kysely";
    export class Planted {
      run(sqlite: any, db: any, store: any, host: any) {
        sqlite.prepare("SELECT 1").get();
        sqlite.exec("VACUUM");
        sqlite.pragma("foreign_keys = ON");
        sqlite.transaction(() => 1)();
        db.selectFrom("nodes").selectAll().execute();
        db.insertInto("nodes").values({}).execute();
        db.updateTable("nodes").set({}).execute();
        db.deleteFrom("nodes").execute();
        void sql\`SELECT 1\`;
        void sql.raw("SELECT 1");
        void store.transaction(async () => {});
        void /x/.exec("x");
        void host.exec(["ls"]);
      }
    }
    `,
  );
  assert.deepEqual(
    found.map((f) => `${f.kind}@${f.where}`),
    [
      "prepare@Planted.run",
      "exec@Planted.run",
      "pragma@Planted.run",
      "transaction@Planted.run",
      "kysely@Planted.run",
      "kysely@Planted.run",
      "kysely@Planted.run",
      "kysely@Planted.run",
      "sql-tag@Planted.run",
      "sql-tag@Planted.run",
    ],
  );
});
