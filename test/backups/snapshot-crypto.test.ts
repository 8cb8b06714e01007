/**
 * The encrypted snapshot file (src/services/backups/snapshot-crypto.ts; docs/backups.md
 * "Encrypted snapshots"): AES-256-GCM under a key from scrypt, the parameters in a versioned,
 * authenticated header. Real files in a temp directory; scrypt at its smallest accepted cost so
 * that properties can run many cases.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";
import fc from "fast-check";
import { isAppError } from "../../src/errors.js";
import {
  DEFAULT_SCRYPT,
  MAX_HEADER_BYTES,
  SEALED_MAGIC,
  isSealedSnapshot,
  openSealedSnapshotFile,
  parseSealedPrefix,
  sealSnapshotFile,
  type ScryptParams,
} from "../../src/services/backups/snapshot-crypto.js";
import { tempDir } from "../helpers/temp-dir.js";

/** The smallest cost a header may carry: 16 MiB, tens of milliseconds. */
const FAST: ScryptParams = { n: 2 ** 14, r: 8, p: 1 };
const MAX = 64 * 1024 * 1024;

let counter = 0;
/** Seals `plain` with `passphrase`; answers the encrypted file's path and bytes. */
async function seal(dir: string, plain: Buffer, passphrase: string, params = FAST): Promise<{ file: string; bytes: Buffer }> {
  const n = counter++;
  const input = join(dir, `plain-${n}`);
  const file = join(dir, `sealed-${n}`);
  writeFileSync(input, plain);
  await sealSnapshotFile(input, file, passphrase, params);
  return { file, bytes: readFileSync(file) };
}

/** Opens an encrypted file; answers the plain bytes, or the error and whether any output was left. */
async function unseal(dir: string, file: string, passphrase: string): Promise<{ plain?: Buffer; err?: unknown; left: boolean }> {
  const out = join(dir, `out-${counter++}`);
  try {
    await openSealedSnapshotFile(file, out, passphrase, MAX);
    return { plain: readFileSync(out), left: true };
  } catch (err) {
    return { err, left: existsSync(out) };
  }
}

function write(dir: string, bytes: Buffer): string {
  const file = join(dir, `given-${counter++}`);
  writeFileSync(file, bytes);
  return file;
}

test("spec §2.4 snapshot export: any content under any passphrase opens to exactly its bytes, and the file starts with the magic", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  await fc.assert(
    fc.asyncProperty(fc.uint8Array({ maxLength: 4096 }), fc.string({ minLength: 1, maxLength: 64, unit: "grapheme" }), async (content, passphrase) => {
      const plain = Buffer.from(content);
      const { file, bytes } = await seal(dir, plain, passphrase);
      assert.ok(bytes.subarray(0, 8).equals(SEALED_MAGIC));
      assert.ok(await isSealedSnapshot(file));
      // The plain bytes are not in the file (a non-trivial content only: tiny ones may occur by chance).
      if (plain.length >= 16) assert.equal(bytes.indexOf(plain), -1);
      const opened = await unseal(dir, file, passphrase);
      assert.ok(opened.plain, String(opened.err));
      assert.ok(opened.plain.equals(plain));
    }),
    { numRuns: 15 },
  );
});

test("the passphrase is NFC-normalized: a composed and a decomposed é open the same file", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  const { file } = await seal(dir, Buffer.from("zip bytes"), "caf\u00e9 au lait");
  const opened = await unseal(dir, file, "cafe\u0301 au lait");
  assert.equal(opened.plain?.toString(), "zip bytes");
});

test("two encryptions of the same content under the same passphrase differ (fresh salt and IV)", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  const a = await seal(dir, Buffer.from("same"), "same passphrase");
  const b = await seal(dir, Buffer.from("same"), "same passphrase");
  assert.notDeepEqual(a.bytes, b.bytes);
  const ha = parseSealedPrefix(a.bytes).header;
  const hb = parseSealedPrefix(b.bytes).header;
  assert.notEqual(ha.kdf.salt, hb.kdf.salt);
  assert.notEqual(ha.cipher.iv, hb.cipher.iv);
});

test("any other passphrase is refused with SNAPSHOT_PASSPHRASE_WRONG and leaves no output", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  const { file } = await seal(dir, Buffer.from("the snapshot zip"), "right passphrase");
  await fc.assert(
    fc.asyncProperty(fc.string({ minLength: 1, maxLength: 40 }).filter((s) => s.normalize("NFC") !== "right passphrase"), async (other) => {
      const opened = await unseal(dir, file, other);
      assert.ok(isAppError(opened.err, "SNAPSHOT_PASSPHRASE_WRONG"), String(opened.err));
      assert.equal(opened.left, false, "nothing decrypted is left behind");
    }),
    { numRuns: 15 },
  );
});

test("a change of any single byte (magic, length, header, ciphertext or tag) is refused and leaves no output", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  const { bytes } = await seal(dir, Buffer.from("a snapshot zip of some length, enough to have a body"), "passphrase");
  await fc.assert(
    fc.asyncProperty(fc.nat({ max: bytes.length - 1 }), fc.integer({ min: 1, max: 255 }), async (at, flip) => {
      const altered = Buffer.from(bytes);
      altered[at] = (altered[at] ?? 0) ^ flip;
      const opened = await unseal(dir, write(dir, altered), "passphrase");
      assert.ok(opened.err !== undefined, `byte ${at} changed and the file still opened`);
      assert.ok(isAppError(opened.err, "SNAPSHOT_PASSPHRASE_WRONG") || isAppError(opened.err, "VALIDATION_FAILED"), String(opened.err));
      assert.equal(opened.left, false);
    }),
    { numRuns: 40 },
  );
});

test("every truncation of the file is refused: a cut header as VALIDATION_FAILED, a cut body or tag as not opening", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  const { bytes } = await seal(dir, Buffer.from("a body that is long enough to cut in several places"), "passphrase");
  const prefix = parseSealedPrefix(bytes).prefixBytes.length;
  await fc.assert(
    fc.asyncProperty(fc.nat({ max: bytes.length - 1 }), async (keep) => {
      const opened = await unseal(dir, write(dir, bytes.subarray(0, keep)), "passphrase");
      assert.ok(opened.err !== undefined, `cut at ${keep} and the file still opened`);
      if (keep < prefix) {
        assert.ok(isAppError(opened.err, "VALIDATION_FAILED"), String(opened.err));
        assert.match((opened.err as Error).message, /not an encrypted snapshot|truncated/);
      } else {
        assert.ok(isAppError(opened.err, "SNAPSHOT_PASSPHRASE_WRONG") || isAppError(opened.err, "VALIDATION_FAILED"), String(opened.err));
      }
      assert.equal(opened.left, false);
    }),
    { numRuns: 40 },
  );
});

test("a header that asks for too much scrypt work, another version or another cipher is refused before any key is derived", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  const { bytes } = await seal(dir, Buffer.from("x"), "passphrase");
  const { header, prefixBytes } = parseSealedPrefix(bytes);
  const body = bytes.subarray(prefixBytes.length);
  const withHeader = (h: unknown) => {
    const json = Buffer.from(JSON.stringify(h));
    const len = Buffer.alloc(2);
    len.writeUInt16BE(json.length);
    return Buffer.concat([SEALED_MAGIC, len, json, body]);
  };
  const cases: Array<[string, unknown, RegExp]> = [
    ["N = 2^21", { ...header, kdf: { ...header.kdf, n: 2 ** 21 } }, /kdf\.n/],
    ["N not a power of two", { ...header, kdf: { ...header.kdf, n: 2 ** 14 + 1 } }, /power of two/],
    ["128·N·r past the memory bound", { ...header, kdf: { ...header.kdf, n: 2 ** 20, r: 8 } }, /at most/],
    ["format 2", { ...header, format: 2 }, /format/],
    ["another cipher", { ...header, cipher: { ...header.cipher, name: "aes-128-gcm" } }, /cipher\.name/],
    ["a short IV", { ...header, cipher: { ...header.cipher, iv: Buffer.alloc(8).toString("base64") } }, /cipher\.iv/],
    ["an extra field", { ...header, note: "x" }, /note|Unrecognized/],
  ];
  for (const [name, h, why] of cases) {
    const started = Date.now();
    const opened = await unseal(dir, write(dir, withHeader(h)), "passphrase");
    assert.ok(isAppError(opened.err, "VALIDATION_FAILED"), `${name}: ${String(opened.err)}`);
    assert.match((opened.err as Error).message, why, name);
    assert.ok(Date.now() - started < 5_000, `${name}: refused without deriving a key`);
  }
  const notJson = Buffer.concat([SEALED_MAGIC, Buffer.from([0, 3]), Buffer.from("{x}"), body]);
  assert.match(String((await unseal(dir, write(dir, notJson), "passphrase")).err), /not JSON/);
  const tooLong = Buffer.concat([SEALED_MAGIC, Buffer.from([(MAX_HEADER_BYTES + 1) >> 8, (MAX_HEADER_BYTES + 1) & 0xff]), body]);
  assert.match(String((await unseal(dir, write(dir, tooLong), "passphrase")).err), /header length/);
});

test("a plain zip is not an encrypted snapshot, and opening it as one is a clear refusal", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  const zip = write(dir, Buffer.from("PK\x03\x04 a zip"));
  assert.equal(await isSealedSnapshot(zip), false);
  assert.equal(await isSealedSnapshot(write(dir, Buffer.alloc(0))), false);
  const opened = await unseal(dir, zip, "passphrase");
  assert.ok(isAppError(opened.err, "VALIDATION_FAILED"));
  assert.match((opened.err as Error).message, /not an encrypted snapshot/);
});

test("new files use the default cost N = 2^17, r = 8, p = 1 and open with it", async (t) => {
  const dir = tempDir(t, "svc-seal-");
  const { file, bytes } = await seal(dir, Buffer.from("default cost"), "passphrase", DEFAULT_SCRYPT);
  const { header } = parseSealedPrefix(bytes);
  assert.deepEqual({ n: header.kdf.n, r: header.kdf.r, p: header.kdf.p }, { n: 2 ** 17, r: 8, p: 1 });
  assert.equal((await unseal(dir, file, "passphrase")).plain?.toString(), "default cost");
});
