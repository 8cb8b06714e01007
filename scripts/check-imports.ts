/**
 * Import-rule check (DESIGN §2 "may import", and no import cycle). Run by `npm test` (pretest).
 *
 *   tsx scripts/check-imports.ts            check this repository's src/ and web/src/
 *   tsx scripts/check-imports.ts <root>     check <root>/src/ and <root>/web/src/ (tests run it on a fixture tree)
 *
 * Prints one line per offending import and per import cycle (format at the end of this header)
 * and exits 1; prints a one-line summary and exits 0 when every import keeps to the table and
 * none closes a circle. Line format:
 *
 *   src/agent/agent.ts: imports src/server.ts [type-only] — agent may import protocol, lib
 *
 * What counts as an import: every module specifier the TypeScript compiler sees in a source
 * file (a SourceFile walk, no regexes): `import … from`, `import type … from`, side-effect
 * `import "…"`, `export … from` (also `export type … from`), `import x = require("…")`,
 * dynamic `import("…")` with a literal argument, and `import("…")` types. Type-only imports
 * count: DESIGN says what a folder "may import", and a type dependency on a forbidden folder
 * is still the coupling the table forbids (the agent's types must not drag in server code).
 * They are reported with "[type-only]" so that the fix is clear. A dynamic import whose
 * argument is not a string literal cannot be resolved and is itself a violation.
 * Only our own modules are checked: a relative specifier that resolves inside `src/`.
 * Packages (`zod`, `node:fs`) are not "ours" and are not checked here.
 *
 * Layers: the folder under `src/` (`src/store/db.ts` → `store`); a file directly in `src/` is
 * its own layer named after the file (`src/errors.ts` → `errors`). The folder rules are the
 * DESIGN §2 table verbatim. The `src/` root files, "as its role needs", are decided here:
 *
 * - `server`  (composition root): may import everything. It is one file: the long-lived parts
 *   built in dependency order, with the wiring between them. In `src/` only `main` imports it.
 * - `main`    (process entry): may import everything but `agent` and `cli` (it starts the server).
 * - `config`  (settings, parsed once with zod): `protocol`, `domain`, `lib`, `errors`, `logger`.
 * - `logger`  (pino setup): `lib`.
 * - `errors`  (the error registry with HTTP statuses): `protocol`, `lib`.
 *
 * Every other module lives in its folder: the clock, the server version and ordered shutdown in
 * `lib`; the broker link in `mqtt`; the app events the services subscribe to in `services`.
 *
 * And which folders may import a root file (DESIGN §2: `errors` "used by `services` and `http`
 * only"; the agent and the CLI "never import server code"):
 *
 * - `errors`: `services`, `http` (and `server`, `main`).
 * - `config`: `mqtt`, `services`, `http` (the settings object and its types).
 * - `logger`: every server folder (`store` … `http`); not `protocol`, `lib`, `machines`,
 *   `domain`, `agent`, `cli`.
 * - `server`, `main`: nobody.
 *
 * The web console, `web/src/` (DESIGN §2 row `web/`), is checked as one more layer, `web`: its
 * files may import each other, `src/protocol` and `src/lib`, and nothing else of `src/`. A
 * specifier resolving outside both trees (a package) is not checked.
 *
 * A file or folder directly under `src/` that is in neither table fails the check ("not a layer
 * of DESIGN §2"): a new module is placed by adding its row here, deliberately.
 *
 * Violations that wait for a larger change are listed in {@link ALLOWED}, each with the change
 * it waits for; an entry that no longer matches an import fails the check too, so the
 * list only shrinks.
 *
 * **No import cycle.** Our modules (`src/` and `web/src/`, every file a node, every resolved
 * relative import an edge) must form no circle, inside a folder or across folders. Type-only
 * imports count. A type-only circle is erased at run time, so it cannot break module
 * initialisation, but it is the same tangle: modules that can be neither read nor moved apart,
 * and one edit (an `instanceof`, an enum, a default value) turns the type import into a value
 * import. Counting them, the tree this rule was written against had three tangles (30 files, 28
 * circles printed) where value imports alone showed one (6 files, 5 circles): the store's `db` →
 * worker → staging → repositories → `db` and `cli/service`'s index ↔ platform modules were
 * type-only, http `app` ↔ routes was both. There is no allow-list: a new circle fails.
 * Each circle is printed as the chain of files that closes it, ` → ` for an import and ` ⇢ `
 * for a type-only one:
 *
 *   import cycle: src/cli/service/index.ts → src/cli/service/systemd.ts ⇢ src/cli/service/index.ts
 *
 * One line per import that closes a circle in a depth-first walk (files and imports in sorted
 * order, so the output is stable): a tangle of many files shows as several circles.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";

/** The layers a layer may import (besides itself). DESIGN §2; root files as in the header. */
export const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  // DESIGN §2 table
  protocol: [],
  lib: [],
  machines: ["protocol", "domain"],
  domain: ["protocol", "lib"],
  store: ["domain", "protocol", "lib"],
  events: ["protocol", "lib"],
  actors: ["machines", "store", "protocol", "domain", "lib"],
  mqtt: ["protocol", "actors", "store", "domain", "lib"],
  services: ["protocol", "lib", "machines", "domain", "store", "events", "actors", "mqtt"],
  http: ["services", "events", "protocol", "lib"],
  agent: ["protocol", "lib"],
  cli: ["agent", "protocol", "lib"],
  // The console (`web/src/**`, every file one layer "web"): DESIGN §2 "`src/protocol` (schemas and types), `lib`".
  web: ["protocol", "lib"],
  // src/ root files (decided in the header)
  server: ["*"],
  main: ["protocol", "lib", "machines", "domain", "store", "events", "actors", "mqtt", "services", "http", "server", "config", "logger", "errors"],
  config: ["protocol", "domain", "lib", "errors", "logger"],
  logger: ["lib"],
  errors: ["protocol", "lib"],
};

/** Root files other layers may import, by importer (the table has no row for them). */
const ROOT_FILE_IMPORTERS: Readonly<Record<string, readonly string[]>> = {
  errors: ["services", "http"],
  config: ["mqtt", "services", "http"],
  logger: ["store", "events", "actors", "mqtt", "services", "http"],
  server: [],
  main: [],
};

/** A module that imports against the rules, waiting for the named change. Paths from the root. */
export interface AllowedImport {
  from: string;
  to: string;
  /** The change (or decision) the import waits for. */
  waitsFor: string;
}

/**
 * Known violations of this repository, each waiting for a larger change. Remove an
 * entry with the change that fixes it (a stale entry fails the check).
 */
export const ALLOWED: readonly AllowedImport[] = [
  // DESIGN §2: domain "throws its own error types, never HTTP ones". Needs a domain error type
  // that the error handler (src/http/app.ts) and the `instanceof AppError` checks of
  // src/services/snapshots.ts map to registry codes.
  { from: "src/domain/address-pool.ts", to: "src/errors.ts", waitsFor: "domain error types" },
  { from: "src/domain/keys.ts", to: "src/errors.ts", waitsFor: "domain error types" },
  { from: "src/domain/render.ts", to: "src/errors.ts", waitsFor: "domain error types" },
  { from: "src/domain/render-input.ts", to: "src/errors.ts", waitsFor: "domain error types" },
  // networkCidrSchema refuses reserved networks with a domain rule; the wire schema keeps the
  // syntax only once the schemas move to src/protocol and the service applies the rule.
  // The EMQX authz route calls the pure policy directly; it goes through a service the
  // composition root builds (the identity type through src/protocol).
  { from: "src/http/app.ts", to: "src/mqtt/authz.policy.ts", waitsFor: "AppContext (authz service)" },
  { from: "src/http/routes/internal-authz.routes.ts", to: "src/mqtt/authz.policy.ts", waitsFor: "AppContext (authz service)" },
  // The metrics scrape token is hashed and compared in the route; auth.service does it.
  { from: "src/http/routes/metrics.routes.ts", to: "src/domain/tokens.ts", waitsFor: "AppContext (scrape auth in services)" },
  // The client zip renders the agent's service files and default profile directory with the
  // agent's own code; those renderers move to a neutral module both sides import.
  { from: "src/services/client-bundle.ts", to: "src/agent/profile.ts", waitsFor: "neutral modules the agent may import" },
  { from: "src/services/client-bundle.ts", to: "src/cli/service/index.ts", waitsFor: "neutral modules the agent may import" },
];

/** One import that breaks the rules. */
export interface Violation {
  /** Importing file, `/`-separated, relative to the checked root (`src/agent/agent.ts`). */
  file: string;
  /** Imported module as resolved (`src/server.ts`), or the specifier when unresolvable. */
  imported: string;
  /** The specifier as written. */
  specifier: string;
  typeOnly: boolean;
  /** Human-readable rule broken. */
  rule: string;
}

/** One module specifier of a file. */
export interface ImportRef {
  specifier: string;
  /** No value binding: `import type`, `export type … from`, all-`type` named imports, `import("…")` types. */
  typeOnly: boolean;
  /** A dynamic `import()` whose argument is not a string literal (specifier is the argument's text). */
  unresolvable?: boolean;
}

function hasModifierType(node: ts.ImportSpecifier | ts.ExportSpecifier): boolean {
  return node.isTypeOnly;
}

/**
 * Every module specifier of `sourceText` (see the header for what counts), parsed with the
 * TypeScript compiler's parser.
 */
export function importsOf(fileName: string, sourceText: string): ImportRef[] {
  const sf = ts.createSourceFile(fileName, sourceText, ts.ScriptTarget.Latest, true, fileName.endsWith(".tsx") ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const out: ImportRef[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      let typeOnly = false;
      if (clause !== undefined) {
        if (clause.isTypeOnly) typeOnly = true;
        else if (clause.name === undefined && clause.namedBindings !== undefined && ts.isNamedImports(clause.namedBindings)) {
          const els = clause.namedBindings.elements;
          typeOnly = els.length > 0 && els.every(hasModifierType);
        }
      }
      out.push({ specifier: node.moduleSpecifier.text, typeOnly });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      let typeOnly = node.isTypeOnly;
      const clause = node.exportClause;
      if (!typeOnly && clause !== undefined && ts.isNamedExports(clause)) {
        typeOnly = clause.elements.length > 0 && clause.elements.every(hasModifierType);
      }
      out.push({ specifier: node.moduleSpecifier.text, typeOnly });
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const expr = node.moduleReference.expression;
      if (ts.isStringLiteral(expr)) out.push({ specifier: expr.text, typeOnly: node.isTypeOnly });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0];
      if (arg !== undefined && ts.isStringLiteralLike(arg)) out.push({ specifier: arg.text, typeOnly: false });
      else out.push({ specifier: arg?.getText(sf) ?? "", typeOnly: false, unresolvable: true });
    } else if (ts.isImportTypeNode(node)) {
      const arg = node.argument;
      if (ts.isLiteralTypeNode(arg) && ts.isStringLiteral(arg.literal)) out.push({ specifier: arg.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** `.ts` files under `dir`, recursively, sorted (no `.d.ts`). */
export function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|mts|cts|tsx)$/.test(name) && !name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/**
 * The file a relative specifier names, NodeNext style: `./x.js` is `./x.ts` in the source
 * tree; a directory means its `index`. Returns the path even when no file exists (a module that
 * does not exist is the typechecker's business, its layer is still known).
 */
function resolveRelative(fromFile: string, specifier: string): string {
  const base = resolve(dirname(fromFile), specifier);
  const candidates = [base, base.replace(/\.(m|c)?js$/, ".$1ts"), base.replace(/\.jsx?$/, ".tsx"), `${base}.ts`, `${base}.tsx`, join(base, "index.ts")];
  for (const c of candidates) if (existsSync(c) && statSync(c).isFile()) return c;
  return base.replace(/\.(m|c)?js$/, ".$1ts");
}

/** The layer of a path relative to `src/` (`store/db.ts` → `store`, `errors.ts` → `errors`). */
export function layerOf(pathInSrc: string): string {
  const parts = pathInSrc.split("/");
  if (parts.length === 1) return parts[0]!.replace(/\.[^.]+$/, "");
  return parts[0]!;
}

/** Why `from` may not import `to`, or undefined when it may. */
export function ruleBroken(from: string, to: string): string | undefined {
  if (from === to) return undefined;
  const allowed = MAY_IMPORT[from];
  if (allowed === undefined) return `${from} is not a layer of DESIGN §2 (add it to the table in scripts/check-imports.ts)`;
  if (allowed.includes("*")) return undefined;
  const rootImporters = ROOT_FILE_IMPORTERS[to];
  if (rootImporters !== undefined && rootImporters.includes(from)) return undefined;
  if (allowed.includes(to)) return undefined;
  if (MAY_IMPORT[to] === undefined) return `${to} is not a layer of DESIGN §2`;
  const list = [...allowed, ...Object.entries(ROOT_FILE_IMPORTERS).filter(([, who]) => who.includes(from)).map(([f]) => `${f}.ts`)];
  return `${from} may import ${list.length === 0 ? "nothing of ours" : list.join(", ")}`;
}

/** Forward slashes, for stable output on every platform. */
export const slash = (p: string) => p.split(sep).join("/");

/**
 * Checks every import of `<root>/src` against the rules.
 * @param root directory holding `src/`
 * @param allowed known violations to tolerate ({@link ALLOWED} for this repository)
 * @returns the violations, the allow-list entries that matched nothing (stale), the file count,
 *   the import graph of our modules and its circles
 */
export function checkImports(
  root: string,
  allowed: readonly AllowedImport[] = [],
): { violations: Violation[]; stale: AllowedImport[]; files: number; graph: ImportGraph; cycles: ImportEdge[][] } {
  const src = join(root, "src");
  const web = join(root, "web", "src");
  const files = [...sourceFiles(src), ...(existsSync(web) ? sourceFiles(web) : [])];
  const violations: Violation[] = [];
  const used = new Set<AllowedImport>();
  const graph = new ImportGraph(files.map((f) => slash(relative(root, f))));
  for (const file of files) {
    const fromRel = slash(relative(root, file));
    const inWeb = !slash(relative(web, file)).startsWith("../");
    const fromLayer = inWeb ? "web" : layerOf(slash(relative(src, file)));
    for (const ref of importsOf(file, readFileSync(file, "utf8"))) {
      if (ref.unresolvable) {
        violations.push({ file: fromRel, imported: ref.specifier, specifier: ref.specifier, typeOnly: false, rule: "dynamic import() of a computed specifier cannot be checked" });
        continue;
      }
      if (!ref.specifier.startsWith(".")) continue; // a package, not ours
      const target = resolveRelative(file, ref.specifier);
      graph.add(fromRel, slash(relative(root, target)), ref.typeOnly);
      const inSrc = slash(relative(src, target));
      if (inSrc.startsWith("../") || inSrc === "..") {
        // outside src/: the console's own files are its layer; anything else (package.json) is no layer
        const inWebTree = slash(relative(web, target));
        if (!inWeb || !inWebTree.startsWith("../")) continue;
        violations.push({ file: fromRel, imported: slash(relative(root, target)), specifier: ref.specifier, typeOnly: ref.typeOnly, rule: "web may import web/src, src/protocol and src/lib only" });
        continue;
      }
      const toLayer = layerOf(inSrc);
      const rule = ruleBroken(fromLayer, toLayer);
      if (rule === undefined) continue;
      const imported = `src/${inSrc}`;
      const allowance = allowed.find((a) => a.from === fromRel && a.to === imported);
      if (allowance !== undefined) {
        used.add(allowance);
        continue;
      }
      violations.push({ file: fromRel, imported, specifier: ref.specifier, typeOnly: ref.typeOnly, rule });
    }
  }
  return { violations, stale: allowed.filter((a) => !used.has(a)), files: files.length, graph, cycles: graph.cycles() };
}

/** One import between two of our modules. Paths `/`-separated from the checked root. */
export interface ImportEdge {
  from: string;
  to: string;
  /** Every reference from `from` to `to` is type-only (one value import makes the edge a value edge). */
  typeOnly: boolean;
}

/**
 * The imports among a fixed set of files, and the circles they close (see the header: type-only
 * imports count).
 */
export class ImportGraph {
  readonly #edges = new Map<string, Map<string, ImportEdge>>();

  /** @param files the modules of the graph; imports of anything else (a stylesheet, a missing file) are ignored */
  constructor(files: Iterable<string>) {
    for (const f of files) this.#edges.set(f, new Map());
  }

  /** Records that `from` imports `to`; a second reference to the same module can only make the edge a value edge. */
  add(from: string, to: string, typeOnly: boolean): void {
    const out = this.#edges.get(from);
    if (out === undefined || !this.#edges.has(to)) return;
    const known = out.get(to);
    if (known === undefined) out.set(to, { from, to, typeOnly });
    else if (!typeOnly) known.typeOnly = false;
  }

  /** The modules of the graph, sorted. */
  files(): string[] {
    return [...this.#edges.keys()].sort();
  }

  /** The imports of `file`, sorted by imported module. */
  importsOf(file: string): ImportEdge[] {
    return [...(this.#edges.get(file)?.values() ?? [])].sort((a, b) => (a.to < b.to ? -1 : a.to > b.to ? 1 : 0));
  }

  /**
   * The circles, each as the imports that walk it from its first file back to that file: one per
   * import that closes a circle in a depth-first walk over files and imports in sorted order.
   */
  cycles(): ImportEdge[][] {
    const out: ImportEdge[][] = [];
    const done = new Set<string>();
    const onPath = new Map<string, number>(); // file → its index in `path`
    const path: ImportEdge[] = [];
    const walk = (file: string): void => {
      onPath.set(file, path.length);
      for (const edge of this.importsOf(file)) {
        const at = onPath.get(edge.to);
        if (at !== undefined) out.push([...path.slice(at), edge]);
        else if (!done.has(edge.to)) {
          path.push(edge);
          walk(edge.to);
          path.pop();
        }
      }
      onPath.delete(file);
      done.add(file);
    };
    for (const file of this.files()) if (!done.has(file)) walk(file);
    return out;
  }
}

/** A circle as one line: `import cycle: a.ts → b.ts ⇢ a.ts` (`⇢` a type-only import). */
export function formatCycle(cycle: readonly ImportEdge[]): string {
  const first = cycle[0];
  if (first === undefined) return "import cycle: (empty)";
  return `import cycle: ${first.from}${cycle.map((e) => `${e.typeOnly ? " ⇢ " : " → "}${e.to}`).join("")}`;
}

/** One output line per violation. */
export function formatViolation(v: Violation): string {
  return `${v.file}: imports ${v.imported}${v.typeOnly ? " [type-only]" : ""} — ${v.rule}`;
}

/** The command: checks `argv[0]` (default this repository), writes one line per finding and a summary to `out`; the exit status (0 clean, 1 findings). */
export function main(argv: string[], out: (line: string) => void = console.log): number {
  const repoRoot = fileURLToPath(new URL("..", import.meta.url));
  const root = resolve(argv[0] ?? repoRoot);
  // The allow-list names this repository's files; a fixture tree is checked without it.
  const allowed = resolve(root) === resolve(repoRoot) ? ALLOWED : [];
  const { violations, stale, files, cycles } = checkImports(root, allowed);
  for (const v of violations) out(formatViolation(v));
  for (const a of stale) out(`${a.from}: allow-listed import of ${a.to} is gone — remove it from ALLOWED in scripts/check-imports.ts`);
  for (const c of cycles) out(formatCycle(c));
  const bad = violations.length + stale.length + cycles.length;
  if (bad > 0) {
    const circles = cycles.length === 0 ? "" : `, ${cycles.length} import cycle(s) (→ import, ⇢ type-only import)`;
    out(`check-imports: ${violations.length} import(s) against DESIGN §2, ${stale.length} stale allow-list entr${stale.length === 1 ? "y" : "ies"}${circles}`);
    return 1;
  }
  out(`check-imports: ${files} files keep to DESIGN §2, no import cycle (${allowed.length} allow-listed)`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
