import { execFileSync, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { test } from "node:test";
import { isAppError } from "../../src/errors.js";
import { generateKeyPair, isWireGuardKey, publicKeyFromPrivate } from "../../src/domain/keys.js";
import { requireBinary } from "./system.js";

// DESIGN §3 Keys: Curve25519 via node:crypto, raw 32 bytes in base64; `wg pubkey` must agree.

/** A `wg` call that has not answered in this long is stuck: fail rather than hang the run. */
const WG_TIMEOUT_MS = 10_000;
const KEYS_MODULE = fileURLToPath(new URL("../../src/domain/keys.ts", import.meta.url));

test("DESIGN §3 Keys: generated keys are 44-char base64 of 32 bytes, private key clamped like wg genkey", () => {
  for (let i = 0; i < 50; i++) {
    const { privateKey, publicKey } = generateKeyPair();
    assert.equal(privateKey.length, 44);
    assert.equal(publicKey.length, 44);
    assert.ok(isWireGuardKey(privateKey));
    assert.ok(isWireGuardKey(publicKey));
    const raw = Buffer.from(privateKey, "base64");
    assert.equal((raw[0] ?? 0) & 7, 0, "low 3 bits of the first byte are cleared");
    assert.equal((raw[31] ?? 0) & 0xc0, 0x40, "top bit cleared, second-highest set");
  }
});

test("DESIGN §3 Keys: publicKeyFromPrivate matches generateKeyPair", () => {
  for (let i = 0; i < 100; i++) {
    const pair = generateKeyPair();
    assert.equal(publicKeyFromPrivate(pair.privateKey), pair.publicKey);
  }
});

test("DESIGN §3 Keys: our public key equals `wg pubkey` for 100 random keys", (t) => {
  if (!requireBinary(t, "wg")) return;
  for (let i = 0; i < 100; i++) {
    const { privateKey, publicKey } = generateKeyPair();
    const fromWg = execFileSync("wg", ["pubkey"], { input: `${privateKey}\n`, encoding: "utf8", timeout: WG_TIMEOUT_MS }).trim();
    assert.equal(publicKey, fromWg, `private key ${i}`);
    assert.equal(publicKeyFromPrivate(privateKey), fromWg);
  }
});

test("DESIGN §3 Keys: keys printed by `wg genkey` derive to `wg pubkey`'s public key", (t) => {
  if (!requireBinary(t, "wg")) return;
  for (let i = 0; i < 10; i++) {
    const privateKey = execFileSync("wg", ["genkey"], { encoding: "utf8", timeout: WG_TIMEOUT_MS }).trim();
    const fromWg = execFileSync("wg", ["pubkey"], { input: `${privateKey}\n`, encoding: "utf8", timeout: WG_TIMEOUT_MS }).trim();
    assert.ok(isWireGuardKey(privateKey));
    assert.equal(publicKeyFromPrivate(privateKey), fromWg);
  }
});

test("publicKeyFromPrivate derives from an unclamped key exactly as wg pubkey does", (t) => {
  if (!requireBinary(t, "wg")) return;
  const unclamped = Buffer.alloc(32, 0xff).toString("base64"); // "/////...8=" — every bit set
  assert.ok(isWireGuardKey(unclamped));
  const fromWg = execFileSync("wg", ["pubkey"], { input: `${unclamped}\n`, encoding: "utf8", timeout: WG_TIMEOUT_MS }).trim();
  assert.equal(publicKeyFromPrivate(unclamped), fromWg);
});

test("isWireGuardKey rejects everything but canonical 44-char base64 of 32 bytes", () => {
  const good = generateKeyPair().privateKey;
  assert.ok(isWireGuardKey(good));
  for (const bad of [
    "",
    good.slice(0, 43), // missing padding
    `${good.slice(0, 43)}==`, // 45 chars
    good.replace("=", "A"), // no padding
    `${good.slice(0, 42)}B=`, // trailing bits set: not canonical (wg rejects it too)
    `${good.slice(0, 41)}-_=`.padEnd(44, "="), // base64url alphabet
    ` ${good.slice(1)}`, // whitespace
    `${good.slice(0, 43)}\n`,
    Buffer.alloc(31).toString("base64"), // 31 bytes
    Buffer.alloc(33).toString("base64"), // 33 bytes
  ]) {
    assert.equal(isWireGuardKey(bad), false, JSON.stringify(bad));
  }
});

test("publicKeyFromPrivate throws VALIDATION_FAILED on a malformed key", () => {
  for (const bad of ["", "not-a-key", Buffer.alloc(31).toString("base64"), "A".repeat(44)]) {
    assert.throws(
      () => publicKeyFromPrivate(bad),
      (err) => isAppError(err, "VALIDATION_FAILED"),
      JSON.stringify(bad),
    );
  }
});

test("DESIGN §3 Keys: generating 5,000 key pairs in a row never deadlocks (Node 20's JWK export of a generated key did: a garbage collection inside the export deadlocked the process in a futex)", () => {
  // In a child process, so that a deadlock is a timed-out child here, not a hung test file; with a
  // 1 MiB young generation, so that collections fall inside exports often (the JWK export hung
  // 5 runs of 5 so, within 5,000 keys).
  const script = `import { generateKeyPair } from ${JSON.stringify(KEYS_MODULE)};\nlet n = 0;\nfor (let i = 0; i < 5000; i++) n += generateKeyPair().publicKey.length;\nconsole.log(n);`;
  const res = spawnSync(process.execPath, ["--max-semi-space-size=1", "--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 30_000 });
  assert.equal(res.error, undefined, `the child finished (${res.error?.message ?? ""})`);
  assert.equal(res.status, 0, res.stderr);
  assert.equal(res.stdout.trim(), String(5000 * 44));
});
