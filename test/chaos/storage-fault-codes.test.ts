import assert from "node:assert/strict";
import { test } from "node:test";
import { ERROR_CODES, storageFaultError, storageFaultReason } from "../../src/errors.js";

/** docs/history/decisions-2026.md "chaos and resource faults": which errors are storage faults (503). */

const coded = (code: string, cause?: unknown) => Object.assign(new Error(code, cause === undefined ? {} : { cause }), { code });

test("storage faults: SQLite and errno codes map to full / read_only / busy / io_error; anything else is not one", () => {
  const cases: Array<[string, string | undefined]> = [
    ["SQLITE_FULL", "full"],
    ["ENOSPC", "full"],
    ["EDQUOT", "full"],
    ["SQLITE_READONLY", "read_only"],
    ["SQLITE_READONLY_DBMOVED", "read_only"],
    ["EROFS", "read_only"],
    ["SQLITE_BUSY", "busy"],
    ["SQLITE_BUSY_SNAPSHOT", "busy"],
    ["SQLITE_LOCKED", "busy"],
    ["SQLITE_IOERR_WRITE", "io_error"],
    ["SQLITE_CANTOPEN", "io_error"],
    ["EIO", "io_error"],
    ["SQLITE_CONSTRAINT_UNIQUE", undefined],
    ["SQLITE_ERROR", undefined],
    ["ENOENT", undefined],
    ["EACCES", undefined],
  ];
  for (const [code, reason] of cases) assert.equal(storageFaultReason(coded(code)), reason, code);
  assert.equal(storageFaultReason(new Error("no code")), undefined);
  assert.equal(storageFaultReason("SQLITE_FULL"), undefined, "only errors carry codes");
  assert.equal(storageFaultReason(new Error("wrapped", { cause: coded("ENOSPC") })), "full", "a wrapped cause counts");
});

test("storage faults answer 503 STORAGE_UNAVAILABLE with details.reason and a message saying what to do", () => {
  const err = storageFaultError(coded("SQLITE_FULL"));
  assert.ok(err);
  assert.equal(err.status, 503);
  assert.equal(ERROR_CODES.STORAGE_UNAVAILABLE.status, 503);
  assert.deepEqual(err.toBody().error.details, { reason: "full" });
  assert.match(err.message, /free space/);
  assert.equal(storageFaultError(coded("SQLITE_CONSTRAINT_UNIQUE")), undefined);
});
