import { z } from "zod";

/**
 * Id syntax shared by every boundary: path parameters, MQTT topic levels and envelopes
 * (DESIGN §3). An id can never hold `/`, `+`, `#`, NUL, upper case or be empty, so it is always
 * a safe single MQTT topic level and URL path segment.
 */
export const ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

const idSchema = <B extends string>(brand: B) =>
  z
    .string()
    .regex(ID_PATTERN, "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
    .brand<B>();

/** A config id, created only by this parser or {@link newId}. */
export const configIdSchema = idSchema("ConfigId");
export type ConfigId = z.infer<typeof configIdSchema>;
/** A node id. */
export const nodeIdSchema = idSchema("NodeId");
export type NodeId = z.infer<typeof nodeIdSchema>;
/** A mesh pair id. */
export const pairIdSchema = idSchema("PairId");
export type PairId = z.infer<typeof pairIdSchema>;
/** A user id (`usr-…`; the first owner is `usr-admin`). */
export const userIdSchema = idSchema("UserId");
export type UserId = z.infer<typeof userIdSchema>;
/** A port forward id. */
export const forwardIdSchema = idSchema("ForwardId");
export type ForwardId = z.infer<typeof forwardIdSchema>;

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/**
 * A new server-generated id: `{prefix}-` and 16 characters of base32 (80 random bits), from the
 * Web Crypto CSPRNG (`globalThis.crypto`, Node ≥ 19 and browsers), so this wire-contract module
 * imports nothing platform-specific (the web console typechecks it without Node's types).
 * @param prefix lower-case letters, e.g. `cfg`, `node`
 */
export function newId<B extends string>(prefix: string): string & z.core.$brand<B> {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16));
  let out = `${prefix}-`;
  for (const b of bytes) out += BASE32[b & 31];
  return out as string & z.core.$brand<B>;
}
