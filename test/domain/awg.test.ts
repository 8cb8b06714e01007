import assert from "node:assert/strict";
import { test } from "node:test";
import {
  awgParamsSchema,
  formatHeaderRange,
  generateAwgParams,
  parseHeaderRange,
  type AwgParams,
} from "../../src/domain/awg.js";

// DESIGN §3 awg_2: obfuscation parameters generated once per config within valid ranges
// (ranges checked against amneziawg-go, see the header of src/domain/awg.ts).

const VALID: AwgParams = {
  jc: 5,
  jmin: 50,
  jmax: 1000,
  s1: 40,
  s2: 70,
  s3: 30,
  s4: 12,
  h1: "100000-200000",
  h2: "300000",
  h3: "400000-400001",
  h4: "5-99",
};

function issues(params: unknown): string[] {
  const result = awgParamsSchema.safeParse(params);
  return result.success ? [] : result.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

test("DESIGN §3 awg_2: 1000 generated parameter sets all pass the schema and the chosen ranges", () => {
  for (let i = 0; i < 1000; i++) {
    const p = generateAwgParams();
    assert.deepEqual(issues(p), [], JSON.stringify(p));
    assert.ok(p.jc >= 4 && p.jc <= 12);
    assert.ok(p.jmin >= 40 && p.jmin <= 89);
    assert.ok(p.jmax > p.jmin && p.jmax <= Math.min(p.jmin + 1000, 1280));
    for (const s of [p.s1, p.s2, p.s3]) assert.ok(s >= 15 && s <= 150);
    assert.ok(p.s4 >= 8 && p.s4 <= 20);
    assert.notEqual(p.s1 + 56, p.s2);
    for (const h of [p.h1, p.h2, p.h3, p.h4]) {
      const range = parseHeaderRange(h);
      assert.ok(range !== undefined && range.min >= 5 && range.max <= 2_147_483_647, h);
    }
  }
});

test("generated parameters differ between configs (H values are random)", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 20; i++) seen.add(generateAwgParams().h1);
  assert.ok(seen.size > 1);
});

test("the schema accepts a hand-written valid set, single H values and zero padding", () => {
  assert.deepEqual(issues(VALID), []);
  assert.deepEqual(issues({ ...VALID, h1: "7", h2: "8", h3: "9", h4: "10" }), []);
  assert.deepEqual(issues({ ...VALID, s1: 0, s2: 0, s3: 0, s4: 0 }), [], "sizes 148, 92, 64, 32 differ");
  assert.deepEqual(issues({ ...VALID, jmin: 60, jmax: 60 }), [], "jmin == jmax is allowed (amneziawg-go bumps jmax)");
  assert.deepEqual(issues({ ...VALID, h4: "4294967290-4294967295" }), [], "uint32 max");
});

test("the schema rejects out-of-range and non-integer fields", () => {
  const cases: Array<[Partial<Record<keyof AwgParams, unknown>>, string]> = [
    [{ jc: 0 }, "jc"],
    [{ jc: 129 }, "jc"],
    [{ jc: 4.5 }, "jc"],
    [{ jmin: 0 }, "jmin"],
    [{ jmax: 1281 }, "jmax"],
    [{ s1: -1 }, "s1"],
    [{ s2: 1280 }, "s2"],
    [{ s3: 1.5 }, "s3"],
    [{ s4: "12" }, "s4"],
    [{ h1: 5 }, "h1"],
  ];
  for (const [patch, path] of cases) {
    const found = issues({ ...VALID, ...patch });
    assert.ok(found.some((m) => m.startsWith(`${path}:`)), `${JSON.stringify(patch)} -> ${found.join(" | ")}`);
  }
});

test("the schema rejects unknown keys and missing keys", () => {
  assert.notDeepEqual(issues({ ...VALID, i1: "<b 0x01>" }), []);
  const { h4: _dropped, ...missing } = VALID;
  assert.notDeepEqual(issues(missing), []);
});

test("the schema rejects jmin > jmax", () => {
  assert.ok(issues({ ...VALID, jmin: 500, jmax: 499 }).some((m) => m.startsWith("jmax:")));
});

test("the schema rejects s1 + 56 == s2 (initiation and response padded to the same size)", () => {
  const found = issues({ ...VALID, s1: 20, s2: 76 });
  assert.ok(found.some((m) => m.includes("initiation") && m.includes("response")), found.join(" | "));
});

test("the schema rejects every other padded-size collision (148+S1, 92+S2, 64+S3, 32+S4)", () => {
  const collisions: Array<Partial<AwgParams>> = [
    { s1: 10, s3: 94 }, // 158 == 158
    { s1: 10, s4: 126 }, // 158 == 158
    { s2: 10, s3: 38 }, // 102 == 102
    { s2: 10, s4: 70 }, // 102 == 102
    { s3: 10, s4: 42 }, // 74 == 74
  ];
  for (const patch of collisions) {
    assert.notDeepEqual(issues({ ...VALID, ...patch }), [], JSON.stringify(patch));
  }
});

test("the schema rejects H values or ranges containing 0..4 (plain WireGuard's message types)", () => {
  for (const h of ["1", "4", "0", "2-10", "0-100000"]) {
    assert.ok(issues({ ...VALID, h2: h }).some((m) => m.startsWith("h2:")), h);
  }
});

test("the schema rejects malformed H values", () => {
  for (const h of ["", "abc", "10-5", "5-", "-5", "5-6-7", "007", "4294967296", "5 - 9", "+5", "1e6", " 5"]) {
    assert.ok(issues({ ...VALID, h3: h }).some((m) => m.startsWith("h3:")), JSON.stringify(h));
  }
});

test("the schema rejects overlapping or equal H values/ranges", () => {
  const overlaps: Array<Partial<AwgParams>> = [
    { h1: "300000" }, // equals h2
    { h1: "250000-300000" }, // range touches h2's single value
    { h3: "150000-160000" }, // inside h1
    { h4: "5-100000" }, // shares the bound 100000 with h1
    { h4: "1000-500000" }, // covers h1, h2 and h3
  ];
  for (const patch of overlaps) {
    assert.ok(
      issues({ ...VALID, ...patch }).some((m) => m.includes("overlaps")),
      `${JSON.stringify(patch)} -> ${issues({ ...VALID, ...patch }).join(" | ")}`,
    );
  }
});

test("parseHeaderRange / formatHeaderRange round-trip", () => {
  assert.deepEqual(parseHeaderRange("5"), { min: 5, max: 5 });
  assert.deepEqual(parseHeaderRange("5-9"), { min: 5, max: 9 });
  assert.equal(parseHeaderRange("9-5"), undefined);
  assert.equal(formatHeaderRange({ min: 5, max: 5 }), "5");
  assert.equal(formatHeaderRange({ min: 5, max: 9 }), "5-9");
});
