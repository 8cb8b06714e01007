import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from "node:crypto";

/**
 * Secrets handed to callers: admin bearer tokens, download tokens, bind tokens.
 * A token is 32 random bytes (base64url, 43 characters); only its SHA-256 is stored, and stored
 * hashes are compared in constant time.
 */
export interface MintedToken {
  /** The secret, given once to the caller. */
  token: string;
  /** SHA-256 hex of the token: what is stored. */
  hash: string;
}

/** Mints a new random token and its stored hash. */
export function mintToken(): MintedToken {
  const token = randomBytes(32).toString("base64url");
  return { token, hash: hashToken(token) };
}

/** SHA-256 hex of a presented token; the lookup key for stored hashes. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Constant-time equality of two hex digests (false when lengths differ). */
export function digestsEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, "utf8");
  const bb = Buffer.from(b, "utf8");
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/** True when a presented token looks like one we mint (bounded length, base64url); cheap pre-check. */
export function isTokenShaped(token: string): boolean {
  return /^[A-Za-z0-9_-]{20,128}$/.test(token);
}

/**
 * scrypt's cost for new password hashes: OWASP's Password Storage Cheat Sheet asks N = 2^17,
 * r = 8, p = 1 (128 MiB and roughly a third of a second per hash on a server core).
 */
export const PASSWORD_SCRYPT_N = 2 ** 17;
const SCRYPT = { r: 8, p: 1, keylen: 32 } as const;
/** The largest N a stored hash may name, with r ≤ 32 and p ≤ 16 (a tampered row must not ask for gigabytes). */
const MAX_SCRYPT_N = 2 ** 20;

function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

/**
 * Hashes a password with scrypt. Result: `scrypt$N$r$p$saltB64$hashB64`.
 * @param n the cost, a power of two ({@link PASSWORD_SCRYPT_N} unless a test asks for less)
 */
export async function hashPassword(password: string, n: number = PASSWORD_SCRYPT_N): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, SCRYPT.keylen, { N: n, r: SCRYPT.r, p: SCRYPT.p, maxmem: 256 * n * SCRYPT.r });
  return `scrypt$${n}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString("base64")}$${key.toString("base64")}`;
}

/** The N a {@link hashPassword} result was made with, or undefined for a malformed one. */
export function passwordHashCost(stored: string): number | undefined {
  const parts = stored.split("$");
  const n = Number(parts[1]);
  return parts.length === 6 && parts[0] === "scrypt" && Number.isInteger(n) ? n : undefined;
}

/** Checks a password against a {@link hashPassword} result in constant time; false on a malformed hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return false;
  const [, n, r, p, saltB64, keyB64] = parts as [string, string, string, string, string, string];
  const cost = { N: Number(n), r: Number(r), p: Number(p) };
  if (!(cost.N >= 2 && cost.N <= MAX_SCRYPT_N && cost.r >= 1 && cost.r <= 32 && cost.p >= 1 && cost.p <= 16)) return false;
  const expected = Buffer.from(keyB64, "base64");
  // N not a power of two (a tampered row): scrypt refuses, and so does the check.
  const key = await scrypt(password, Buffer.from(saltB64, "base64"), expected.length, { ...cost, maxmem: 256 * cost.N * cost.r }).catch(() => undefined);
  return key !== undefined && key.length === expected.length && timingSafeEqual(key, expected);
}
