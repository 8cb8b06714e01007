import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { Logger } from "../logger.js";

/**
 * Sealed broker passwords (docs/history/decisions-2026.md "Broker passwords (the sealed copy) and the threat model").
 *
 * The store keeps only a SHA-256 of each node's MQTT password, which is all the embedded broker
 * needs. EMQX and Mosquitto hold their own accounts, and the backend must be able to (re)create
 * one later: a bind made while the broker was down, or a broker that lost its data. So the plain
 * password is also kept sealed with AES-256-GCM under a key that lives in a file of the data
 * directory ({@link KEY_FILE_NAME}, mode 0600), not in the database: a copy of the database (or a
 * snapshot, which carries no sealed password at all) does not reveal a broker password.
 *
 * Sealed text: `v1.{iv}.{tag}.{ciphertext}`, each part base64url; 12-byte IV, 16-byte tag. The
 * username is authenticated data, so a sealed password copied onto another user's row fails to
 * open.
 */

/** The key file inside the data directory. */
export const KEY_FILE_NAME = "broker-passwords.key";

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = "v1";

/** The key file's content: 32 bytes, base64url, one line. */
const keyFileSchema = z
  .string()
  .trim()
  .regex(/^[A-Za-z0-9_-]{43}$/, "must hold one base64url line of 32 bytes");

const sealedSchema = z.string().regex(/^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]+$/);

function aad(username: string): Buffer {
  return Buffer.from(`svc-broker-password:${VERSION}:${username}`, "utf8");
}

export class BrokerPasswordVault {
  readonly #file: string;
  readonly #dir: string;
  readonly #log: Logger;
  #key: Buffer | undefined;

  /**
   * @param dataDir the service's data directory; the key file is created there on the first
   *   {@link seal} (a service that never binds writes nothing)
   */
  constructor(dataDir: string, log: Logger) {
    this.#dir = dataDir;
    this.#file = join(dataDir, KEY_FILE_NAME);
    this.#log = log;
  }

  /** Path of the key file. */
  get keyFile(): string {
    return this.#file;
  }

  /**
   * Seals a password for `username`. Creates the key file (mode 0600, exclusive create) when it
   * does not exist yet. Synchronous: it runs inside the bind transaction.
   * @throws Error when the key file exists but is unreadable or malformed
   */
  seal(username: string, password: string): string {
    const key = this.#loadKey(true) as Buffer;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(username));
    const ct = Buffer.concat([cipher.update(password, "utf8"), cipher.final()]);
    return [VERSION, iv.toString("base64url"), cipher.getAuthTag().toString("base64url"), ct.toString("base64url")].join(".");
  }

  /**
   * Opens a sealed password of `username`.
   * @returns the plain password, or undefined when it cannot be opened (no key file, another key,
   *   tampered text, another user's row); the reason is logged without any secret
   */
  open(username: string, sealed: string): string | undefined {
    let key: Buffer | undefined;
    try {
      key = this.#loadKey(false);
    } catch (err) {
      this.#log.error({ err: (err as Error).message, file: this.#file }, "broker password key unreadable");
      return undefined;
    }
    if (key === undefined) {
      this.#log.warn({ username, file: this.#file }, "broker password cannot be opened: the key file is missing");
      return undefined;
    }
    if (!sealedSchema.safeParse(sealed).success) {
      this.#log.warn({ username }, "broker password cannot be opened: malformed sealed text");
      return undefined;
    }
    const [, ivText, tagText, ctText] = sealed.split(".") as [string, string, string, string];
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(ivText, "base64url"), { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(username));
      decipher.setAuthTag(Buffer.from(tagText, "base64url"));
      return Buffer.concat([decipher.update(Buffer.from(ctText, "base64url")), decipher.final()]).toString("utf8");
    } catch {
      this.#log.warn({ username }, "broker password cannot be opened: sealed under another key or altered");
      return undefined;
    }
  }

  #loadKey(create: boolean): Buffer | undefined {
    if (this.#key !== undefined) return this.#key;
    let text: string;
    try {
      text = readFileSync(this.#file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      if (!create) return undefined;
      mkdirSync(this.#dir, { recursive: true });
      const fresh = randomBytes(KEY_BYTES);
      try {
        // `wx`: never overwrite a key another process wrote meanwhile.
        writeFileSync(this.#file, `${fresh.toString("base64url")}\n`, { flag: "wx", mode: 0o600 });
        chmodSync(this.#file, 0o600); // the umask may have narrowed it further, never widened; be exact
        this.#log.info({ file: this.#file }, "broker password key created");
        this.#key = fresh;
        return fresh;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        text = readFileSync(this.#file, "utf8");
      }
    }
    const parsed = keyFileSchema.safeParse(text);
    if (!parsed.success) throw new Error(`broker password key file ${this.#file} ${parsed.error.issues[0]?.message ?? "is malformed"}`);
    const mode = statSync(this.#file).mode & 0o777;
    if ((mode & 0o077) !== 0) this.#log.warn({ file: this.#file, mode: mode.toString(8) }, "broker password key file is readable by others: chmod 600");
    this.#key = Buffer.from(parsed.data, "base64url");
    return this.#key;
  }
}

/**
 * The bind's sealer: seals a node's broker password with `vault`; null, logged on `log`, when
 * the vault cannot (the bind still succeeds; an external broker then cannot re-create this
 * account later).
 */
export function sealWithVault(vault: BrokerPasswordVault, log: Logger): (username: string, password: string) => string | null {
  return (username, password) => {
    try {
      return vault.seal(username, password);
    } catch (err) {
      log.error({ err: (err as Error).message, username }, "broker password not sealed: an external broker cannot re-create this account later");
      return null;
    }
  };
}
