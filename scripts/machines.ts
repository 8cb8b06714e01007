/**
 * Machine visualisation export (DESIGN §2 `scripts/`): one Mermaid `stateDiagram-v2` per machine
 * exported from `src/machines/*.machine.ts`, generated from the machine definition itself (the
 * StateNode tree under `machine.root`), written to `docs/machines/{file}.md`.
 *
 *   npm run machines            write the documents
 *   npm run machines -- --check  write nothing; exit 1 and name every stale document
 *
 * How the definition maps to the diagram:
 * - a compound state is a composite state with `[*] -->` its initial child;
 * - a parallel state is a composite state whose regions are separated by `--`;
 * - an edge is labelled `event [guard] / namedAction, …`; delayed transitions read
 *   `after delayName`, eventless ones `always`; built-in actions (assign, raise, …) are left out;
 * - Mermaid cannot draw an edge between states of different composite states, so every edge is
 *   drawn between the two siblings, under the transition's lowest common ancestor, that contain
 *   its source and its target; a lifted source or target is named in the label (`in fresh`,
 *   `to fresh`). A transition declared on a composite state whose target lies inside it ("from
 *   any state of this region") is drawn from each child, except a child whose own unguarded
 *   transition for that event takes priority; a targetless one as a self-loop on each such child.
 *   A `reenter` transition is a self-loop on the state that is exited and entered again.
 * - named entry and exit actions are notes.
 * Order: states in document order; events sorted by name; the transitions of one event in their
 * priority order. The output depends on nothing but the definition.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { StateMachine, type AnyStateMachine, type AnyStateNode, type AnyTransitionDefinition } from "xstate";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MACHINES_DIR = join(ROOT, "src", "machines");
const DOCS_DIR = join(ROOT, "docs", "machines");

interface Edge {
  /** The block (state node id) the edge is written in: the lowest common ancestor. */
  block: string;
  from: AnyStateNode;
  to: AnyStateNode;
  label: string;
  /** Sort key: source document order, event name, priority. */
  order: [number, string, number];
}

/** Mermaid ids: the state's key where it is unique in the machine, else its path joined by `_`. */
function idTable(root: AnyStateNode): Map<AnyStateNode, string> {
  const all = allNodes(root);
  const keyCount = new Map<string, number>();
  for (const node of all) keyCount.set(node.key, (keyCount.get(node.key) ?? 0) + 1);
  const ids = new Map<AnyStateNode, string>();
  for (const node of all) {
    const raw = keyCount.get(node.key) === 1 && !RESERVED.has(node.key.toLowerCase()) ? node.key : [root.key, ...node.path].join("_");
    ids.set(node, raw.replace(/[^A-Za-z0-9_]/g, "_"));
  }
  return ids;
}

const RESERVED = new Set(["state", "note", "end", "direction", "classdef", "class", "style", "as"]);

function allNodes(node: AnyStateNode): AnyStateNode[] {
  return [node, ...children(node).flatMap(allNodes)];
}

function children(node: AnyStateNode): AnyStateNode[] {
  return Object.values(node.states as Record<string, AnyStateNode>).sort((a, b) => a.order - b.order);
}

function ancestors(node: AnyStateNode): AnyStateNode[] {
  const chain: AnyStateNode[] = [];
  for (let n: AnyStateNode | undefined = node; n; n = n.parent) chain.unshift(n);
  return chain;
}

/** `child` or its ancestor that is a direct child of `parent`. */
function childOfContaining(parent: AnyStateNode, node: AnyStateNode): AnyStateNode {
  const chain = ancestors(node);
  const index = chain.indexOf(parent);
  const child = chain[index + 1];
  if (index < 0 || !child) throw new Error(`${node.id} is not inside ${parent.id}`);
  return child;
}

function lowestCommonAncestor(a: AnyStateNode, b: AnyStateNode): AnyStateNode {
  const chainA = ancestors(a);
  const chainB = ancestors(b);
  let common = chainA[0];
  for (let i = 0; i < Math.min(chainA.length, chainB.length) && chainA[i] === chainB[i]; i += 1) common = chainA[i];
  if (!common) throw new Error(`${a.id} and ${b.id} share no ancestor`);
  return common;
}

/** A guard as written: a name, or the combinator and its guards (`and`, `or`, `not`, `stateIn`). */
function guardName(guard: unknown): string {
  if (typeof guard === "string") return guard;
  if (typeof guard === "object" && guard !== null && "type" in guard && typeof guard.type === "string") return guard.type;
  if (typeof guard === "function") {
    const higher = guard as { check?: { name?: string }; guards?: unknown[]; stateValue?: unknown };
    if (higher.stateValue !== undefined) return `stateIn(${stateValueName(higher.stateValue)})`;
    const combinator = higher.check?.name?.replace(/^check/, "").toLowerCase();
    if (combinator && Array.isArray(higher.guards)) return `${combinator}(${higher.guards.map(guardName).join(", ")})`;
    return guard.name && guard.name !== "guard" ? guard.name : "inline guard";
  }
  return "guard";
}

function stateValueName(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null) {
    return Object.entries(value as Record<string, unknown>)
      .map(([key, inner]) => `${key}.${stateValueName(inner)}`)
      .join(", ");
  }
  return String(value);
}

/** Named actions only; built-ins (`xstate.assign`, `xstate.raise`, …) and inline functions are left out. */
function actionNames(actions: readonly unknown[]): string[] {
  const names: string[] = [];
  for (const action of actions) {
    if (typeof action === "string") names.push(action);
    else if (typeof action === "object" && action !== null && "type" in action && typeof action.type === "string") {
      if (action.type.startsWith("xstate.")) continue;
      const params = "params" in action ? action.params : undefined;
      names.push(params && typeof params === "object" ? `${action.type}(${paramsText(params as Record<string, unknown>)})` : action.type);
    }
  }
  return names;
}

function paramsText(params: Record<string, unknown>): string {
  return Object.keys(params)
    .sort()
    .map((key) => `${key}=${typeof params[key] === "object" ? "…" : String(params[key])}`)
    .join(", ");
}

function eventLabel(transition: AnyTransitionDefinition): string {
  const delay = (transition as { delay?: unknown }).delay;
  if (delay !== undefined) return typeof delay === "number" ? `after ${delay}ms` : `after ${typeof delay === "string" ? delay : "delay"}`;
  return transition.eventType === "" ? "always" : String(transition.eventType);
}

function relativePath(from: AnyStateNode, to: AnyStateNode): string {
  return to.path.slice(from.path.length).join(".");
}

function collectEdges(node: AnyStateNode, ids: Map<AnyStateNode, string>, edges: Edge[]): void {
  const byEvent = [...node.transitions.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const groups: Array<[string, readonly AnyTransitionDefinition[]]> = [...byEvent];
  if (node.always?.length) groups.push(["", node.always]);
  for (const [eventType, transitions] of groups) {
    transitions.forEach((transition, priority) => {
      const parts = [eventLabel(transition)];
      if (transition.guard !== undefined) parts.push(`[${guardName(transition.guard)}]`);
      const actions = actionNames(transition.actions);
      const tail = actions.length ? ` / ${actions.join(", ")}` : "";
      const order: [number, string, number] = [node.order, eventType === "" ? "\uffff" : eventType, priority];
      const targets = transition.target ?? [];
      if (targets.length === 0) {
        // Targetless: the state does not change. On a composite state, that holds in each child.
        const sources = children(node).length ? children(node).filter((child) => !shadows(child, eventType)) : [node];
        for (const source of sources) {
          edges.push({ block: blockOf(source), from: source, to: source, label: parts.join(" ") + tail, order });
        }
        return;
      }
      for (const target of targets) {
        if (target === node || ancestors(target).includes(node)) {
          const to = target === node ? node : childOfContaining(node, target);
          if (transition.reenter || children(node).length === 0) {
            // reenter: the state itself is exited and entered again (its entry actions run).
            const notes = ["reenter", ...(to !== node ? [`to ${relativePath(node, target)}`] : [])];
            const label = parts.join(" ") + (transition.reenter ? ` (${notes.join(", ")})` : "") + tail;
            edges.push({ block: blockOf(node), from: node, to: node, label, order });
            continue;
          }
          // Declared on a composite state, targeting inside it: from each child that does not
          // shadow it with an unguarded transition of its own for the same event.
          for (const source of children(node)) {
            if (shadows(source, eventType)) continue;
            const lifted = to !== target ? ` (to ${relativePath(to, target)})` : "";
            edges.push({ block: node.id, from: source, to: to === node ? source : to, label: parts.join(" ") + lifted + tail, order });
          }
          continue;
        }
        const common = lowestCommonAncestor(node, target);
        const from = childOfContaining(common, node);
        const to = childOfContaining(common, target);
        const notes: string[] = [];
        if (from !== node) notes.push(`in ${relativePath(from, node)}`);
        if (to !== target) notes.push(`to ${relativePath(to, target)}`);
        if (transition.reenter) notes.unshift("reenter");
        const label = parts.join(" ") + (notes.length ? ` (${notes.join(", ")})` : "") + tail;
        edges.push({ block: common.id, from, to, label, order });
      }
    });
  }
  for (const child of children(node)) collectEdges(child, ids, edges);
}

/** A child's own unguarded transition for the event takes priority over its ancestor's. */
function shadows(child: AnyStateNode, eventType: string): boolean {
  if (eventType === "") return false;
  return (child.transitions.get(eventType) ?? []).some((transition: AnyTransitionDefinition) => transition.guard === undefined);
}

function blockOf(node: AnyStateNode): string {
  return node.parent ? node.parent.id : node.id;
}

function compareEdges(a: Edge, b: Edge): number {
  for (let i = 0; i < 3; i += 1) {
    const x = a.order[i] as number | string;
    const y = b.order[i] as number | string;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.from.order - b.from.order || a.to.order - b.to.order;
}

/** A Mermaid `stateDiagram-v2` of the machine, from its definition. Deterministic. */
export function machineToMermaid(machine: AnyStateMachine): string {
  const root = machine.root as AnyStateNode;
  const ids = idTable(root);
  const id = (node: AnyStateNode): string => ids.get(node) ?? node.key;
  const edges: Edge[] = [];
  collectEdges(root, ids, edges);
  const edgesByBlock = new Map<string, Edge[]>();
  for (const edge of edges) edgesByBlock.set(edge.block, [...(edgesByBlock.get(edge.block) ?? []), edge]);
  for (const list of edgesByBlock.values()) list.sort(compareEdges);

  const lines: string[] = ["stateDiagram-v2"];
  const notes: string[] = [];
  const edgeLines = (block: AnyStateNode, indent: string): string[] =>
    (edgesByBlock.get(block.id) ?? []).map((edge) => `${indent}${id(edge.from)} --> ${id(edge.to)} : ${edge.label}`);

  const declare = (node: AnyStateNode, indent: string): void => {
    const kids = children(node);
    const label = id(node) === node.key ? "" : `state "${node.key}" as ${id(node)}`;
    for (const [kind, actions] of [["entry", node.entry], ["exit", node.exit]] as const) {
      const names = actionNames(actions);
      if (names.length) notes.push(`  note right of ${id(node)} : ${kind} / ${names.join(", ")}`);
    }
    if (node.type === "final") {
      if (label) lines.push(indent + label);
      lines.push(`${indent}${id(node)} --> [*]`);
      return;
    }
    if (kids.length === 0) {
      lines.push(indent + (label || id(node)));
      return;
    }
    if (label) lines.push(indent + label);
    lines.push(`${indent}state ${id(node)} {`);
    const inner = `${indent}  `;
    if (node.type === "parallel") {
      kids.forEach((region, index) => {
        if (index > 0) lines.push(`${inner}--`);
        declare(region, inner);
      });
    } else {
      for (const target of node.initial.target) lines.push(`${inner}[*] --> ${id(childOfContaining(node, target))}`);
      for (const kid of kids) declare(kid, inner);
    }
    lines.push(...edgeLines(node, inner));
    lines.push(`${indent}}`);
  };

  lines.push(`  [*] --> ${id(root)}`);
  declare(root, "  ");
  lines.push(...notes);
  return `${lines.join("\n")}\n`;
}

/** The whole generated document for one machine file. */
export function machineDocument(sourceFile: string, machines: ReadonlyArray<[string, AnyStateMachine]>): string {
  const parts = [
    `<!-- Generated by \`npm run machines\` (scripts/machines.ts) from ${sourceFile}. Do not edit: CI fails when it is stale. -->`,
    "",
    `# ${sourceFile.split("/").at(-1)}`,
    "",
    `Generated by \`npm run machines\` from the definition in \`${sourceFile}\`; do not edit by hand.`,
    "Edges read `event [guard] / named actions`; `after` marks a delayed transition, `always` an eventless one.",
    "A transition declared on a region applies in each of its states and is drawn from each.",
  ];
  for (const [name, machine] of machines) {
    parts.push("", `## \`${name}\` (id \`${machine.id}\`)`, "", "```mermaid", machineToMermaid(machine).trimEnd(), "```");
  }
  return `${parts.join("\n")}\n`;
}

export interface GeneratedDocument {
  /** Repository-relative path, forward slashes. */
  path: string;
  content: string;
}

/** Every `src/machines/*.machine.ts`, with its exported machines, sorted by file then export name. */
export async function generateDocuments(): Promise<GeneratedDocument[]> {
  const files = readdirSync(MACHINES_DIR).filter((file) => file.endsWith(".machine.ts")).sort();
  const documents: GeneratedDocument[] = [];
  for (const file of files) {
    const loaded = (await import(pathToFileURL(join(MACHINES_DIR, file)).href)) as Record<string, unknown>;
    const machines = Object.keys(loaded)
      .sort()
      .flatMap((name): Array<[string, AnyStateMachine]> => {
        const value = loaded[name];
        return value instanceof StateMachine ? [[name, value as AnyStateMachine]] : [];
      });
    if (machines.length === 0) continue;
    const sourceFile = `src/machines/${file}`;
    documents.push({ path: `docs/machines/${file.replace(/\.ts$/, ".md")}`, content: machineDocument(sourceFile, machines) });
  }
  return documents;
}

async function main(argv: string[]): Promise<number> {
  const check = argv.includes("--check");
  const documents = await generateDocuments();
  const stale: string[] = [];
  for (const document of documents) {
    const file = join(ROOT, document.path);
    const current = existsSync(file) ? readFileSync(file, "utf8") : null;
    if (current === document.content) continue;
    if (check) {
      stale.push(`${document.path} is ${current === null ? "missing" : "stale"}`);
    } else {
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, document.content);
      process.stdout.write(`wrote ${document.path}\n`);
    }
  }
  if (check && existsSync(DOCS_DIR)) {
    const expected = new Set(documents.map((document) => document.path));
    for (const file of readdirSync(DOCS_DIR).filter((name) => name.endsWith(".machine.md")).sort()) {
      const path = relative(ROOT, join(DOCS_DIR, file)).split("\\").join("/");
      if (!expected.has(path)) stale.push(`${path} has no machine in src/machines`);
    }
  }
  if (stale.length) {
    process.stderr.write(`${stale.map((line) => `machines: ${line}`).join("\n")}\nrun \`npm run machines\` and commit the result\n`);
    return 1;
  }
  if (check) process.stdout.write(`machines: ${documents.length} document(s) up to date\n`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
