import assert from "node:assert/strict";
import { createHash, randomBytes, scryptSync } from "node:crypto";
import { describe, test } from "node:test";
import fc from "fast-check";
import { digestsEqual, hashPassword, hashToken, isTokenShaped, mintToken, PASSWORD_SCRYPT_N, verifyPassword } from "../../src/domain/tokens.js";

// The token helpers behind spec §5 (bind token, file tokens, admin bearer tokens) and DESIGN
// "Admin auth": tokens are random 32 bytes, stored as their SHA-256, compared in constant time;
// the admin password is stored as scrypt.

const BASE64URL = /^[A-Za-z0-9_-]+$/;

describe("mintToken / hashToken (DESIGN Admin auth: random 32 bytes, stored hashed)", () => {
  test("a minted token is 32 random bytes in base64url (43 characters); its hash is the SHA-256 hex of the token", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const { token, hash } = mintToken();
      assert.equal(token.length, 43);
      assert.match(token, BASE64URL);
      assert.equal(Buffer.from(token, "base64url").length, 32);
      assert.equal(hash, createHash("sha256").update(token).digest("hex"));
      assert.equal(hash, hashToken(token));
      assert.ok(isTokenShaped(token), "what we mint passes our own pre-check");
      seen.add(token);
    }
    assert.equal(seen.size, 50, "no two minted tokens are equal");
  });

  test("hashToken is SHA-256 over the UTF-8 bytes, so a non-ASCII token hashes like its UTF-8 encoding", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), (s) => {
        assert.equal(hashToken(s), createHash("sha256").update(Buffer.from(s, "utf8")).digest("hex"));
      }),
    );
  });
});

describe("digestsEqual (DESIGN Admin auth: compared in constant time)", () => {
  test("equal iff the two strings are equal, for all inputs, and never throws on different lengths", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        assert.equal(digestsEqual(a, b), a === b);
        assert.equal(digestsEqual(a, a), true);
      }),
    );
  });

  test("a stored hash against a presented hash of another length (truncated, extended) is false, not an error", () => {
    const h = hashToken("secret");
    assert.equal(digestsEqual(h, h.slice(0, 63)), false);
    assert.equal(digestsEqual(h, `${h}0`), false);
    assert.equal(digestsEqual(h, ""), false);
  });
});

describe("isTokenShaped (cheap pre-check before any lookup)", () => {
  test("true exactly for 20..128 characters of the base64url alphabet, for all strings", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 140 }), (s) => {
        const expected = s.length >= 20 && s.length <= 128 && BASE64URL.test(s);
        assert.equal(isTokenShaped(s), expected, JSON.stringify(s));
      }),
    );
  });

  test("a token with anything before or after the alphabet run is not token-shaped (the pattern is anchored)", () => {
    const t = mintToken().token;
    for (const s of [`${t}!`, `!${t}`, `${t}\n`, ` ${t}`, `${t}/x`, `x.${t}`, `${t}=`]) assert.equal(isTokenShaped(s), false, JSON.stringify(s));
    assert.equal(isTokenShaped("a".repeat(19)), false);
    assert.equal(isTokenShaped("a".repeat(20)), true);
    assert.equal(isTokenShaped("a".repeat(128)), true);
    assert.equal(isTokenShaped("a".repeat(129)), false);
  });
});

describe("hashPassword / verifyPassword (DESIGN Admin auth: scrypt)", () => {
  test("round trip: the right password verifies, any other does not; the stored form is scrypt$N$r$p$salt$hash with OWASP's N = 2^17, r = 8, p = 1", async () => {
    const stored = await hashPassword("correct horse");
    const parts = stored.split("$");
    assert.equal(parts.length, 6);
    assert.deepEqual(parts.slice(0, 4), ["scrypt", "131072", "8", "1"]);
    assert.equal(PASSWORD_SCRYPT_N, 2 ** 17);
    assert.equal(Buffer.from(parts[4]!, "base64").length, 16, "16 random salt bytes");
    assert.equal(Buffer.from(parts[5]!, "base64").length, 32, "32-byte key");
    assert.equal(await verifyPassword("correct horse", stored), true);
    assert.equal(await verifyPassword("correct horsf", stored), false);
    assert.equal(await verifyPassword("", stored), false);
    assert.notEqual(await hashPassword("correct horse"), stored, "a fresh salt every time");
  });

  test("the cost parameters are read from the stored hash, so a hash made with other N/r/p still verifies", async () => {
    // A hash stored under other parameters (e.g. by a future cost change) must keep working.
    const salt = randomBytes(16);
    const key = scryptSync("pw", salt, 32, { N: 1024, r: 4, p: 2 });
    const stored = `scrypt$1024$4$2$${salt.toString("base64")}$${key.toString("base64")}`;
    assert.equal(await verifyPassword("pw", stored), true);
    assert.equal(await verifyPassword("pw2", stored), false);
    // A stored cost beyond the bounds (a tampered row asking for gigabytes) or not a power of two is refused, not computed.
    assert.equal(await verifyPassword("pw", `scrypt$${2 ** 21}$8$1$${salt.toString("base64")}$${key.toString("base64")}`), false);
    assert.equal(await verifyPassword("pw", `scrypt$1000$8$1$${salt.toString("base64")}$${key.toString("base64")}`), false);
    // Same key, but the stored parameters lie: the recomputed key differs.
    assert.equal(await verifyPassword("pw", `scrypt$16384$8$1$${salt.toString("base64")}$${key.toString("base64")}`), false);
  });

  test("a malformed stored hash verifies nothing and does not throw", async () => {
    const good = await hashPassword("pw");
    const [, n, r, p, salt, key] = good.split("$") as [string, string, string, string, string, string];
    const malformed = [
      "",
      "pw",
      `bcrypt$${n}$${r}$${p}$${salt}$${key}`, // wrong scheme, 6 parts
      `scrypt$${n}$${r}$${p}$${salt}`, // 5 parts
      `scrypt$${n}$${r}$${p}$${salt}$${key}$x`, // 7 parts
      `$${n}$${r}$${p}$${salt}$${key}`, // empty scheme
    ];
    for (const stored of malformed) assert.equal(await verifyPassword("pw", stored), false, stored);
    assert.equal(await verifyPassword("pw", good), true, "the well-formed one still verifies");
  });
});
