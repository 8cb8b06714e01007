// @ts-check
/**
 * The line ranges of named functions and methods, for Stryker's `mutate` list
 * (stryker.config.mjs; docs/mutation.md "Scope"). Stryker selects code by file and line range
 * only; ranges written by hand drifted as the files grew (at one point every one of
 * them framed other code). This finds each function by name with TypeScript's own parser
 * (`typescript`, already a dev dependency) at the time the config is read.
 *
 * Usage: `...functionRanges("src/store/x.ts", ["a", "b"])` → `["src/store/x.ts:12-30", …]`.
 */
import { readFileSync } from "node:fs";
import ts from "typescript";

/**
 * One `file:start-end` range (1-based lines, from the declaration's first token, its doc comment
 * left out, to its closing brace) per name: top-level `function` declarations and class methods.
 * @param {string} file path relative to the working directory (the repository root)
 * @param {readonly string[]} names function or method names; each must occur exactly once
 * @returns {string[]} the ranges, in the order of `names`
 * @throws {Error} when a name is not found in `file` or found more than once
 */
export function functionRanges(file, names) {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  /** @type {Map<string, ts.Node[]>} */
  const found = new Map();
  /** @param {ts.Node} node */
  const visit = (node) => {
    if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.name !== undefined && node.body !== undefined) {
      const name = node.name.getText(source);
      found.set(name, [...(found.get(name) ?? []), node]);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return names.map((name) => {
    const nodes = found.get(name) ?? [];
    if (nodes.length !== 1) throw new Error(`mutation scope: ${file} has ${nodes.length} functions named ${name} (expected exactly one)`);
    const node = /** @type {ts.Node} */ (nodes[0]);
    const line = (/** @type {number} */ pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
    return `${file}:${line(node.getStart(source))}-${line(node.getEnd())}`;
  });
}
