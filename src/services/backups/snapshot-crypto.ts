/**
 * Passphrase encryption of snapshot files (docs/backups.md "Encrypted snapshots").
 *
 * An encrypted snapshot file is, byte for byte:
 *
 * | bytes | what |
 * |---|---|
 * | 8 | magic `SVCSNAPE` |
 * | 2 | header length `h`, unsigned big-endian, at most {@link MAX_HEADER_BYTES} |
 * | h | header: JSON (UTF-8) of {@link sealedHeaderSchema}: format version, scrypt parameters and salt, cipher and IV |
 * | n | the snapshot zip, encrypted with AES-256-GCM |
 * | 16 | the GCM authentication tag |
 *
 * The key is `scrypt(passphrase, salt, N, r, p)` (32 bytes; the passphrase NFC-normalized, then
 * UTF-8), the salt 16 random bytes and the IV 12 random bytes, fresh for every file. The magic,
 * the length and the header are the GCM additional data: a changed parameter fails the tag check
 * exactly as a changed byte of the ciphertext does. A wrong passphrase and an altered file are
 * therefore the same refusal, and nothing decrypted is used before the tag checked.
 *
 * Work is file to file in chunks (a snapshot may be large); scrypt and AES run through
 * `node:crypto`, scrypt on libuv's thread pool.
 */
import { createCipheriv, createDecipheriv, randomBytes, scrypt as scryptCb, type ScryptOptions } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, rm, stat, type FileHandle } from "node:fs/promises";
import { z } from "zod";
import { AppError } from "../../errors.js";

/** The first bytes of every encrypted snapshot file. */
export const SEALED_MAGIC = Buffer.from("SVCSNAPE", "ascii");
/** Version of the header and layout; a reader refuses any other. */
export const SEALED_FORMAT = 1;
/** A header is about 200 bytes; more is not ours. */
export const MAX_HEADER_BYTES = 1024;
const TAG_BYTES = 16;
const IV_BYTES = 12;
const SALT_BYTES = 16;
const KEY_BYTES = 32;
/** The most memory a header may ask scrypt for (128 · N · r bytes): a hostile header costs at most this. */
export const MAX_SCRYPT_MEMORY = 256 * 1024 * 1024;

/** scrypt's cost parameters. */
export interface ScryptParams {
  /** CPU/memory cost, a power of two. */
  n: number;
  r: number;
  p: number;
}

/** What new files use: OWASP's scrypt setting (N = 2^17, r = 8, p = 1; 128 MiB, a fraction of a second). */
export const DEFAULT_SCRYPT: ScryptParams = { n: 2 ** 17, r: 8, p: 1 };

const base64Of = (bytes: number) =>
  z
    .string()
    .regex(/^[A-Za-z0-9+/]+={0,2}$/, "must be base64")
    .refine((s) => Buffer.from(s, "base64").length === bytes, `must be base64 of ${bytes} bytes`);

/** The header of an encrypted snapshot file (the JSON between the length and the ciphertext). */
export const sealedHeaderSchema = z
  .strictObject({
    format: z.literal(SEALED_FORMAT),
    kdf: z.strictObject({
      name: z.literal("scrypt"),
      n: z
        .number()
        .int()
        .min(2 ** 14)
        .max(2 ** 20)
        .refine((n) => (n & (n - 1)) === 0, "must be a power of two"),
      r: z.number().int().min(1).max(32),
      p: z.number().int().min(1).max(4),
      salt: base64Of(SALT_BYTES),
    }),
    cipher: z.strictObject({ name: z.literal("aes-256-gcm"), iv: base64Of(IV_BYTES) }),
  })
  .refine((h) => 128 * h.kdf.n * h.kdf.r <= MAX_SCRYPT_MEMORY, `scrypt may use at most ${MAX_SCRYPT_MEMORY} bytes (128 · N · r)`);
export type SealedHeader = z.infer<typeof sealedHeaderSchema>;

/** The refusal of a file that is not a well-formed encrypted snapshot: 400 VALIDATION_FAILED. */
function malformed(reason: string): AppError {
  return new AppError("VALIDATION_FAILED", `the snapshot is not acceptable: ${reason}`);
}

/** The refusal of a wrong passphrase or an altered file (the tag cannot tell them apart). */
export function passphraseWrong(): AppError {
  return new AppError(
    "SNAPSHOT_PASSPHRASE_WRONG",
    "the passphrase does not open this encrypted snapshot (a wrong passphrase, or the file was altered); nothing was changed",
  );
}

/** The refusal of an encrypted snapshot given without its passphrase. */
export function passphraseRequired(): AppError {
  return new AppError("SNAPSHOT_PASSPHRASE_REQUIRED", "this snapshot is encrypted: give the passphrase it was created with; nothing was changed");
}

/** The 32-byte AES key of `passphrase` (NFC-normalized, UTF-8) under the header's scrypt parameters. */
function deriveKey(passphrase: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const options: ScryptOptions = { N: params.n, r: params.r, p: params.p, maxmem: MAX_SCRYPT_MEMORY + 1024 * 1024 };
  return new Promise((resolve, reject) => {
    scryptCb(Buffer.from(passphrase.normalize("NFC"), "utf8"), salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

/** True when the file starts with {@link SEALED_MAGIC} (an encrypted snapshot, well-formed or not). */
export async function isSealedSnapshot(file: string): Promise<boolean> {
  const fh = await open(file, "r");
  try {
    const buf = Buffer.alloc(SEALED_MAGIC.length);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return bytesRead === buf.length && buf.equals(SEALED_MAGIC);
  } finally {
    await fh.close();
  }
}

/**
 * Encrypts the snapshot zip `input` with `passphrase` into the new file `output` (mode 0600),
 * in the layout above. A failure removes `output`.
 * @param params scrypt cost; {@link DEFAULT_SCRYPT} unless a test asks for less
 */
export async function sealSnapshotFile(input: string, output: string, passphrase: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<void> {
  const salt = randomBytes(SALT_BYTES);
  const iv = randomBytes(IV_BYTES);
  const header: SealedHeader = {
    format: SEALED_FORMAT,
    kdf: { name: "scrypt", n: params.n, r: params.r, p: params.p, salt: salt.toString("base64") },
    cipher: { name: "aes-256-gcm", iv: iv.toString("base64") },
  };
  const checked = sealedHeaderSchema.parse(header);
  const json = Buffer.from(JSON.stringify(checked), "utf8");
  const length = Buffer.alloc(2);
  length.writeUInt16BE(json.length);
  const prefix = Buffer.concat([SEALED_MAGIC, length, json]);
  const key = await deriveKey(passphrase, salt, params);
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(prefix);
  const out = await open(output, "wx", 0o600);
  try {
    await writeAll(out, prefix);
    for await (const chunk of createReadStream(input)) await writeAll(out, cipher.update(chunk as Buffer));
    await writeAll(out, cipher.final());
    await writeAll(out, cipher.getAuthTag());
    await out.sync();
  } catch (err) {
    await out.close();
    await rm(output, { force: true });
    throw err;
  }
  await out.close();
}

/**
 * Decrypts the encrypted snapshot `input` into the new file `output` (mode 0600): the header is
 * read and checked, the key derived, the ciphertext decrypted chunk by chunk and the tag checked
 * last; on any refusal `output` is removed, so a caller uses it only after this resolved.
 * @param maxPlainBytes largest accepted snapshot zip
 * @throws AppError VALIDATION_FAILED (not an encrypted snapshot, truncated or malformed header,
 *   too large), SNAPSHOT_PASSPHRASE_WRONG (wrong passphrase or altered file)
 */
export async function openSealedSnapshotFile(input: string, output: string, passphrase: string, maxPlainBytes: number): Promise<void> {
  const { size } = await stat(input);
  const fh = await open(input, "r");
  let out: FileHandle | undefined;
  try {
    const { header, prefixBytes } = await readSealedHeader(fh, size);
    const plainBytes = size - prefixBytes.length - TAG_BYTES;
    if (plainBytes < 0) throw malformed("the encrypted file ends before its authentication tag");
    if (plainBytes > maxPlainBytes) throw malformed(`the encrypted snapshot holds ${plainBytes} bytes, more than the ${maxPlainBytes} allowed`);
    const tag = Buffer.alloc(TAG_BYTES);
    await fh.read(tag, 0, TAG_BYTES, size - TAG_BYTES);
    const key = await deriveKey(passphrase, Buffer.from(header.kdf.salt, "base64"), header.kdf);
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(header.cipher.iv, "base64"), { authTagLength: TAG_BYTES });
    decipher.setAAD(prefixBytes);
    decipher.setAuthTag(tag);
    out = await open(output, "wx", 0o600);
    if (plainBytes > 0) {
      const body = fh.createReadStream({ start: prefixBytes.length, end: size - TAG_BYTES - 1, autoClose: false });
      for await (const chunk of body) await writeAll(out, decipher.update(chunk as Buffer));
    }
    let last: Buffer;
    try {
      last = decipher.final();
    } catch {
      throw passphraseWrong();
    }
    await writeAll(out, last);
    await out.close();
    out = undefined;
  } catch (err) {
    if (out !== undefined) {
      await out.close();
      await rm(output, { force: true });
    }
    throw err;
  } finally {
    await fh.close();
  }
}

/**
 * Reads and checks the magic, length and header of an opened encrypted file of `size` bytes.
 * @returns the parsed header and the prefix bytes (magic, length, header: the GCM additional data)
 * @throws AppError VALIDATION_FAILED naming what is wrong
 */
async function readSealedHeader(fh: FileHandle, size: number): Promise<{ header: SealedHeader; prefixBytes: Buffer }> {
  const fixed = SEALED_MAGIC.length + 2;
  const head = Buffer.alloc(Math.min(size, fixed + MAX_HEADER_BYTES));
  await fh.read(head, 0, head.length, 0);
  return parseSealedPrefix(head);
}

/**
 * Parses the start of an encrypted snapshot file (at least its whole prefix, or the whole file
 * when shorter). Exported for tests of truncated and malformed headers.
 * @throws AppError VALIDATION_FAILED naming what is wrong
 */
export function parseSealedPrefix(head: Buffer): { header: SealedHeader; prefixBytes: Buffer } {
  const fixed = SEALED_MAGIC.length + 2;
  if (head.length < SEALED_MAGIC.length || !head.subarray(0, SEALED_MAGIC.length).equals(SEALED_MAGIC)) {
    throw malformed("not an encrypted snapshot file (no SVCSNAPE magic)");
  }
  if (head.length < fixed) throw malformed("the encrypted snapshot's header is truncated");
  const length = head.readUInt16BE(SEALED_MAGIC.length);
  if (length === 0 || length > MAX_HEADER_BYTES) throw malformed(`the encrypted snapshot's header length ${length} is not in 1..${MAX_HEADER_BYTES}`);
  if (head.length < fixed + length) throw malformed("the encrypted snapshot's header is truncated");
  const json = head.subarray(fixed, fixed + length);
  let value: unknown;
  try {
    value = JSON.parse(json.toString("utf8"));
  } catch {
    throw malformed("the encrypted snapshot's header is not JSON");
  }
  const parsed = sealedHeaderSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw malformed(`the encrypted snapshot's header: ${issue ? `${issue.path.join(".") || "(root)"}: ${issue.message}` : "invalid"}`);
  }
  return { header: parsed.data, prefixBytes: Buffer.from(head.subarray(0, fixed + length)) };
}

async function writeAll(fh: FileHandle, buf: Buffer): Promise<void> {
  let off = 0;
  while (off < buf.length) {
    const { bytesWritten } = await fh.write(buf, off, buf.length - off);
    off += bytesWritten;
  }
}
