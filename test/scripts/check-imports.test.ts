import assert from "node:assert/strict";
import { appendFileSync, cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { describe, test } from "node:test";
import { ALLOWED, checkImports, ImportGraph, importsOf, main } from "../../scripts/check-imports.js";
import { repoRoot } from "../helpers/service.js";
import { fixtureTree, runCheck, runMain } from "./harness.js";

// scripts/check-imports.ts: the DESIGN §2 "may import" table and the absence of import cycles, checked
// over a fixture tree so that each rule is seen to fail.

const tree = fixtureTree;
/** A fixture tree is checked in this process; this repository through the command itself, as `npm test` runs it. */
const run = (root?: string) => (root === undefined ? runCheck("check-imports.ts") : runMain(main, root));

/** A tree that keeps every rule: each folder imports only what DESIGN §2 lets it. */
const CLEAN: Record<string, string> = {
  "src/protocol/ids.ts": 'import { z } from "zod";\nexport const id = z.string();\n',
  "src/lib/atomic.ts": 'import { writeFileSync } from "node:fs";\nexport const w = writeFileSync;\n',
  "src/domain/render.ts": 'import { id } from "../protocol/ids.js";\nimport { w } from "../lib/atomic.js";\nexport const r = [id, w];\n',
  "src/agent/agent.ts": 'import { id } from "../protocol/ids.js";\nimport type { w } from "../lib/atomic.js";\nexport const a = id;\n',
  "src/cli/svcctl.ts": 'import { a } from "../agent/agent.js";\nexport const c = a;\n',
  "src/services/mesh.service.ts": 'import { r } from "../domain/render.js";\nimport { AppError } from "../errors.js";\nexport const m = [r, AppError];\n',
  "src/http/app.ts": 'import { m } from "../services/mesh.service.js";\nexport const h = m;\n',
  "src/errors.ts": "export class AppError extends Error {}\n",
  "src/server.ts": 'import { h } from "./http/app.js";\nimport { c } from "./cli/svcctl.js";\nexport const s = [h, c];\n',
};

describe("scripts/check-imports.ts (DESIGN §2 folder table)", () => {
  test("a tree that keeps the table passes with exit 0", (t) => {
    const res = run(tree(t, CLEAN));
    assert.equal(res.status, 0, res.lines.join("\n"));
    assert.match(res.lines.at(-1) ?? "", /^check-imports: 9 files keep to DESIGN §2/);
  });

  test("each forbidden import is one line (file, module, rule) and the exit is 1; type-only, export-from and import() count", (t) => {
    const root = tree(t, {
      ...CLEAN,
      // the agent never imports server code (DESIGN §2), not even a type
      "src/agent/agent.ts":
        'import { id } from "../protocol/ids.js";\nimport type { s } from "../server.js";\nexport const a = id;\nexport const later = () => import("../http/app.js");\n',
      // protocol imports nothing of ours; a re-export is an import
      "src/protocol/ids.ts": 'import { z } from "zod";\nexport const id = z.string();\nexport { r } from "../domain/render.js";\n',
      // http may not reach the store; errors.ts is for services and http only
      "src/http/app.ts": 'import { m } from "../services/mesh.service.js";\nimport { type Db } from "../store/db.js";\nexport const h = m;\n',
      "src/store/db.ts": 'import { AppError } from "../errors.js";\nexport type Db = typeof AppError;\n',
    });
    const res = run(root);
    assert.equal(res.status, 1);
    assert.deepEqual(res.lines.slice(0, -1).sort(), [
      // the forbidden imports close circles too (server imports the cli, which imports the agent)
      "import cycle: src/agent/agent.ts ⇢ src/server.ts → src/cli/svcctl.ts → src/agent/agent.ts",
      "import cycle: src/domain/render.ts → src/protocol/ids.ts → src/domain/render.ts",
      "src/agent/agent.ts: imports src/http/app.ts — agent may import protocol, lib",
      "src/agent/agent.ts: imports src/server.ts [type-only] — agent may import protocol, lib",
      "src/http/app.ts: imports src/store/db.ts [type-only] — http may import services, events, protocol, lib, errors.ts, config.ts, logger.ts",
      "src/protocol/ids.ts: imports src/domain/render.ts — protocol may import nothing of ours",
      "src/store/db.ts: imports src/errors.ts — store may import domain, protocol, lib, logger.ts",
    ]);
    assert.match(res.lines.at(-1) ?? "", /^check-imports: 5 import\(s\) against DESIGN §2/);
  });

  test("the cli may import the agent but not services; a computed import() cannot be checked and fails", (t) => {
    const res = run(
      tree(t, {
        ...CLEAN,
        "src/cli/svcctl.ts": 'import { a } from "../agent/agent.js";\nimport "../services/mesh.service.js";\nexport const c = (p: string) => import(p);\nexport const d = a;\n',
      }),
    );
    assert.equal(res.status, 1);
    assert.deepEqual(res.lines.slice(0, -1), [
      "src/cli/svcctl.ts: imports src/services/mesh.service.ts — cli may import agent, protocol, lib",
      "src/cli/svcctl.ts: imports p — dynamic import() of a computed specifier cannot be checked",
    ]);
  });

  test("machines may not import the clock of lib (DESIGN §2 \"no clocks\"), lib may; a src/ root module other than main, server, config, logger and errors fails until placed", (t) => {
    const root = tree(t, {
      ...CLEAN,
      "src/lib/clock.ts": "export const now = () => 0;\n",
      "src/lib/atomic.ts": 'import { now } from "./clock.js";\nexport const w = now;\n',
      "src/machines/node.machine.ts": 'import { now } from "../lib/clock.js";\nexport const m = now;\n',
      "src/context.ts": 'import { s } from "./server.js";\nexport const c = s;\n',
    });
    const res = run(root);
    assert.equal(res.status, 1);
    assert.deepEqual(res.lines.slice(0, -1), [
      "src/context.ts: imports src/server.ts — context is not a layer of DESIGN §2 (add it to the table in scripts/check-imports.ts)",
      "src/machines/node.machine.ts: imports src/lib/clock.ts — machines may import protocol, domain",
    ]);
  });

  test("an allow-list entry silences its import; one that matches nothing is reported stale", (t) => {
    const root = tree(t, { ...CLEAN, "src/lib/atomic.ts": 'import { id } from "../protocol/ids.js";\nexport const w = id;\n' });
    const allowed = { from: "src/lib/atomic.ts", to: "src/protocol/ids.ts", waitsFor: "test" };
    const stale = { from: "src/lib/atomic.ts", to: "src/server.ts", waitsFor: "test" };
    assert.equal(checkImports(root).violations.length, 1, "lib imports nothing of ours");
    const res = checkImports(root, [allowed, stale]);
    assert.deepEqual(res.violations, []);
    assert.deepEqual(res.stale, [stale]);
  });

  test("imports are read by the TypeScript parser: comments and strings are not imports", () => {
    const refs = importsOf(
      "x.ts",
      [
        '// import { a } from "../server.js";',
        'const s = "import { b } from \'../server.js\'";',
        'import x = require("../lib/a.js");',
        'export type { T } from "../protocol/t.js";',
        'import { type U, type V } from "../protocol/u.js";',
        'type W = typeof import("../store/db.js");',
      ].join("\n"),
    );
    assert.deepEqual(refs, [
      { specifier: "../lib/a.js", typeOnly: false },
      { specifier: "../protocol/t.js", typeOnly: true },
      { specifier: "../protocol/u.js", typeOnly: true },
      { specifier: "../store/db.js", typeOnly: true },
    ]);
  });

  test("this repository's src/ and web/src pass: the table (allow-listed debts included), and no import cycle", () => {
    const res = run();
    assert.equal(res.status, 0, res.lines.join("\n"));
  });
});

describe("scripts/check-imports.ts: the web console (DESIGN §2 row `web/`)", () => {
  test("web/src may import its own files (.ts and .tsx), src/protocol and src/lib, type-only or not", (t) => {
    const root = tree(t, {
      ...CLEAN,
      "web/src/api/types.ts": 'import type { id } from "../../../src/protocol/ids.js";\nexport type Id = typeof id;\n',
      "web/src/pages/home.tsx": 'import type { Id } from "../api/types.js";\nimport { w } from "../../../src/lib/atomic.js";\nexport const Home = () => <p>{String(w)}</p>;\nexport type X = Id;\n',
      "web/src/main.tsx": 'import { Home } from "./pages/home.js";\nimport "./styles.css";\nexport const m = <Home />;\n',
    });
    const res = run(root);
    assert.equal(res.status, 0, res.lines.join("\n"));
    assert.match(res.lines.at(-1) ?? "", /^check-imports: 12 files keep to DESIGN §2/);
  });

  test("web/src importing server code (even a type) or a file outside web/src and src/ is a violation", (t) => {
    const root = tree(t, {
      ...CLEAN,
      "web/src/a.ts": 'import type { AppError } from "../../src/errors.js";\nexport type A = AppError;\n',
      "web/src/b.tsx": 'import { m } from "../../src/services/mesh.service.js";\nexport const B = () => <p>{String(m)}</p>;\n',
      "web/src/c.ts": 'import { x } from "../../scripts/tool.js";\nexport const c = x;\n',
      "scripts/tool.ts": "export const x = 1;\n",
    });
    const res = run(root);
    assert.equal(res.status, 1);
    assert.deepEqual(res.lines.slice(0, -1).sort(), [
      "web/src/a.ts: imports src/errors.ts [type-only] — web may import protocol, lib",
      "web/src/b.tsx: imports src/services/mesh.service.ts — web may import protocol, lib",
      "web/src/c.ts: imports scripts/tool.ts — web may import web/src, src/protocol and src/lib only",
    ]);
  });
});

describe("scripts/check-imports.ts: no import cycle (type-only imports count)", () => {
  /** CLEAN plus a chain inside the store, db → nodes → views; `close` is what views.ts adds to it. */
  const chain = (close: string): Record<string, string> => ({
    ...CLEAN,
    "src/store/db.ts": 'import { n } from "./nodes.repository.js";\nexport const db = n;\n',
    "src/store/nodes.repository.ts": 'import { v } from "./views.js";\nexport const n = v;\n',
    "src/store/views.ts": `${close}export const v = 1;\n`,
  });

  test("a chain of imports without a circle passes", (t) => {
    const res = run(tree(t, chain("")));
    assert.equal(res.status, 0, res.lines.join("\n"));
    assert.match(res.lines.at(-1) ?? "", /^check-imports: 12 files keep to DESIGN §2, no import cycle/);
  });

  test("a type-only import that closes the chain into a circle fails, printed as the chain of files", (t) => {
    const res = run(tree(t, chain('import type { db } from "./db.js";\nexport type Db = typeof db;\n')));
    assert.equal(res.status, 1);
    assert.deepEqual(res.lines, [
      "import cycle: src/store/db.ts → src/store/nodes.repository.ts → src/store/views.ts ⇢ src/store/db.ts",
      "check-imports: 0 import(s) against DESIGN §2, 0 stale allow-list entries, 1 import cycle(s) (→ import, ⇢ type-only import)",
    ]);
  });

  test("circles across folders and in the console are found too; each closing import is one line", (t) => {
    const res = run(
      tree(t, {
        ...CLEAN,
        // services → domain is allowed, domain → services is not: the layer rule and the cycle rule both speak
        "src/domain/render.ts": 'import { id } from "../protocol/ids.js";\nimport { m } from "../services/mesh.service.js";\nexport const r = [id, m];\n',
        "web/src/a.tsx": 'import { b } from "./b.js";\nexport const a = () => <p>{b}</p>;\n',
        "web/src/b.ts": 'export { a } from "./a.js";\nexport const b = "b";\n',
      }),
    );
    assert.equal(res.status, 1);
    assert.deepEqual(res.lines.slice(0, -1), [
      "src/domain/render.ts: imports src/services/mesh.service.ts — domain may import protocol, lib",
      "import cycle: src/domain/render.ts → src/services/mesh.service.ts → src/domain/render.ts",
      "import cycle: web/src/a.tsx → web/src/b.ts → web/src/a.tsx",
    ]);
  });

  test("one value reference makes an edge a value import; imports of files outside the graph are ignored", () => {
    const g = new ImportGraph(["a.ts", "b.ts"]);
    g.add("a.ts", "b.ts", true);
    g.add("a.ts", "b.ts", false);
    g.add("b.ts", "a.ts", true);
    g.add("b.ts", "b.css", false);
    assert.deepEqual(g.cycles(), [
      [
        { from: "a.ts", to: "b.ts", typeOnly: false },
        { from: "b.ts", to: "a.ts", typeOnly: true },
      ],
    ]);
  });

  test("this repository with one temporary import that closes a circle fails the check, naming that import", (t) => {
    const copy = mkdtempSync(join(tmpdir(), "svc-cycle-"));
    t.after(() => rmSync(copy, { recursive: true, force: true }));
    cpSync(join(repoRoot, "src"), join(copy, "src"), { recursive: true });
    cpSync(join(repoRoot, "web", "src"), join(copy, "web", "src"), { recursive: true });
    const before = checkImports(copy, ALLOWED);
    // the first import between two files of one folder, turned back on itself (no layer rule is broken)
    const inCycles = new Set(before.cycles.flat().map((e) => e.from));
    const edge = before.graph.files().flatMap((f) => before.graph.importsOf(f)).find((e) => dirname(e.from) === dirname(e.to) && !inCycles.has(e.from));
    assert.ok(edge !== undefined, "some import inside a folder outside every known cycle");
    const back = `./${relative(dirname(edge.to), edge.from).replace(/\.tsx?$/, ".js")}`;
    appendFileSync(join(copy, edge.to), `\nimport type {} from "${back}";\n`);
    const after = checkImports(copy, ALLOWED);
    assert.deepEqual(after.violations, []);
    const closing = after.cycles.filter((c) => c.some((e) => e.from === edge.to && e.to === edge.from && e.typeOnly));
    assert.ok(closing.length > 0, `a circle through ${edge.to} ⇢ ${edge.from}`);
    assert.ok(after.cycles.length > before.cycles.length);
  });
});

