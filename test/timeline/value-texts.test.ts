import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { StateValueTexts } from "../../src/actors/recorder.js";
import { nodeMachine } from "../../src/machines/node.machine.js";
import { createActor } from "xstate";

/**
 * The recorder's interned state-value texts (docs/history/decisions-2026.md "recorder
 * cost, compact rows"): whatever values arrive, in whatever order, the text is the value's JSON.
 * A trie whose paths could collide would answer an earlier value's text for a later one.
 */

/** State-value-like trees: leaf names, nested compound and parallel regions, some keys shared. */
// Few names, so that values sharing keys and leaves (where a trie's paths could meet) are common.
const names = fc.constantFrom("a", "b", "c", "1");
const stateValue = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: "small" }, names, fc.dictionary(names, tie("value"), { maxKeys: 4 })),
})).value;

test("the interned text of every state value equals its JSON.stringify, across any sequence of values (fast-check)", () => {
  fc.assert(
    fc.property(fc.array(fc.oneof(stateValue, fc.constantFrom(1, true, null, 0)), { minLength: 1, maxLength: 40 }), (values) => {
      const texts = new StateValueTexts();
      for (const v of values) assert.equal(texts.text(v), JSON.stringify(v));
      // Asked again (a structurally equal copy), each still answers its own JSON.
      for (const v of values) assert.equal(texts.text(structuredClone(v)), JSON.stringify(v));
    }),
    { numRuns: 2000, seed: 1313 },
  );
});

test("values whose keys and leaves read the same in order get their own texts (object ends, object starts, scalars)", () => {
  const pairs: Array<[unknown, unknown]> = [
    [{ a: { b: "x" }, c: "y" }, { a: { b: "x", c: "y" } }],
    [{ a: { b: "c" } }, { a: "b", c: {} }],
    ["1", 1],
    [{}, "x"],
    [{ a: {} }, { a: "b" }],
  ];
  for (const [x, y] of pairs) {
    for (const order of [[x, y], [y, x]]) {
      const texts = new StateValueTexts();
      for (const v of order) assert.equal(texts.text(v), JSON.stringify(v));
    }
  }
});

test("the node machine's own state values intern to their JSON (a live actor's values)", () => {
  const texts = new StateValueTexts();
  const actor = createActor(nodeMachine, { input: { configId: "c", nodeId: "n", mode: "dynamic", onlineTtlMs: 1000, detectTimeoutMs: 1000 } });
  actor.start();
  const value = actor.getSnapshot().value;
  assert.equal(texts.text(value), JSON.stringify(value));
  assert.equal(texts.text(JSON.parse(JSON.stringify(value))), JSON.stringify(value));
  actor.stop();
});
