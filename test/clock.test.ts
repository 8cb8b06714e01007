import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { isoTime } from "../src/lib/clock.js";

// isoTime writes most times without a Date (the workspace read's hot path); its text must
// stay exactly Date's (spec §6.5: times are ISO 8601 UTC strings), or every answer's bytes change.

const YEAR_10000_MS = Date.UTC(10000, 0, 1);

test("isoTime equals Date#toISOString for every integer time from 1970 to 9999", () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: YEAR_10000_MS - 1 }), (ms) => {
      assert.equal(isoTime(ms), new Date(ms).toISOString());
    }),
    { numRuns: 20_000 },
  );
});

test("isoTime equals Date#toISOString at the edges: days, leap days, centuries, the fast path's ends, and outside it", () => {
  const edges = [0, 1, 999, 1000, 59_999, 86_399_999, 86_400_000, YEAR_10000_MS - 1, YEAR_10000_MS, -1, -86_400_001, 8.64e15, -8.64e15, 1.5, -0.5, 1_700_000_000_000.25];
  for (const y of [1970, 1972, 2000, 2024, 2026, 2100, 2400, 9999]) {
    for (const [m, d] of [[0, 1], [1, 28], [1, 29], [2, 1], [11, 31]] as const) {
      const at = Date.UTC(y, m, d);
      edges.push(at - 1, at, at + 1, at + 86_399_999);
    }
  }
  for (const ms of edges) assert.equal(isoTime(ms), new Date(ms).toISOString(), `ms = ${ms}`);
});

test("isoTime throws Date's RangeError for times Date cannot write", () => {
  for (const ms of [NaN, Infinity, -Infinity, 8.64e15 + 1]) assert.throws(() => isoTime(ms), RangeError);
});
