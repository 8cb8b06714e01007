/**
 * AmneziaWG 2.0 obfuscation parameters for `tunnel_protocol = "awg_2"` (spec §6.3; DESIGN §3
 * "awg_2"): generated once per config and rendered into every node's `[Interface]`, because peers
 * must agree on S1-S4 and H1-H4.
 *
 * Sources checked (the `search` tool's code corpus), and what each says:
 *
 * - amnezia-vpn/amneziawg-go `device/uapi.go`: `jc`, `jmin`, `jmax` parse as uint32; `s1`..`s4`
 *   as uint16; `h1`..`h4` as a range; `mergeWithDevice` rejects overlapping H ranges
 *   ("headers must not overlap").
 * - amnezia-vpn/amneziawg-go `device/magic-header.go` (and `device/awg/awg.go`): an H value is
 *   `"N"` or `"A-B"`, both unsigned 32-bit decimals, rejected when B < A ("wrong range
 *   specified").
 * - mkeks/amneziawg-go `device/device.go` `handlePostConfig` (the AmneziaWG 2.0 line of
 *   amneziawg-go, with `awg/magic_header.go`): Jc >= 0; Jmax < MaxSegmentSize and Jmax >= Jmin
 *   (Jmax == Jmin is bumped by one); an H whose minimum is <= 4 silently falls back to plain
 *   WireGuard's type, so H minimums must be >= 5; sorted H ranges must not overlap; the padded
 *   message sizes 148+S1 (initiation), 92+S2 (response), 64+S3 (cookie reply) and 32+S4 (empty
 *   transport) must all differ ("new sizes should differ"), which is where the classic
 *   `S1 + 56 != S2` comes from. Sizes from `device/noise-protocol.go` of the same repository.
 * - amnezia-vpn/amneziawg-linux-kernel-module `README.md` "Configuration": 1 <= Jc <= 128
 *   (recommended 3..10), Jmin < Jmax <= 1280, S1 < 1280, S2 < 1280, S1 + 56 != S2 (recommended
 *   15..150), H1..H4 unique (recommended 5..2147483647); its `src/device.c` post-config check also
 *   rejects overlapping H ranges.
 *
 * The schema enforces the documented hard limits (what the tools accept); the generator picks
 * from narrower ranges chosen for a mesh (each commented below).
 */
import { randomInt } from "node:crypto";
import { z } from "zod";

/** Largest unsigned 32-bit value: H values are uint32 in amneziawg-go. */
const UINT32_MAX = 0xffff_ffff;

/** Message sizes of plain WireGuard (amneziawg-go `device/noise-protocol.go`), in bytes. */
export const WIREGUARD_MESSAGE_SIZES = {
  /** Handshake initiation: padded by S1. */
  initiation: 148,
  /** Handshake response: padded by S2. */
  response: 92,
  /** Cookie reply: padded by S3. */
  cookieReply: 64,
  /** Empty transport message (keepalive): padded by S4. */
  transport: 32,
} as const;

/**
 * AmneziaWG 2.0 obfuscation parameters of one config.
 *
 * - `jc`, `jmin`, `jmax`: count and size range (bytes) of junk packets sent before a handshake.
 * - `s1`..`s4`: padding (bytes) prepended to initiation, response, cookie reply and transport
 *   messages.
 * - `h1`..`h4`: message-type header values of the same four messages, each a single unsigned
 *   32-bit decimal `"N"` or a range `"A-B"` with A <= B.
 */
export type AwgParams = {
  jc: number;
  jmin: number;
  jmax: number;
  s1: number;
  s2: number;
  s3: number;
  s4: number;
  h1: string;
  h2: string;
  h3: string;
  h4: string;
};

/** An inclusive uint32 range parsed from an H value. */
export interface HeaderRange {
  min: number;
  max: number;
}

/** Canonical decimal (no sign, no leading zeros), optionally `A-B`. */
const HEADER_PATTERN = /^(0|[1-9][0-9]{0,9})(?:-(0|[1-9][0-9]{0,9}))?$/;

/**
 * Parses an H value (`"N"` or `"A-B"`).
 * @returns The inclusive range, or undefined when the text is not canonical decimal, a value
 *   exceeds 2^32-1, or B < A.
 */
export function parseHeaderRange(value: string): HeaderRange | undefined {
  const match = HEADER_PATTERN.exec(value);
  if (match === null || match[1] === undefined) return undefined;
  const min = Number(match[1]);
  const max = match[2] === undefined ? min : Number(match[2]);
  if (min > UINT32_MAX || max > UINT32_MAX || max < min) return undefined;
  return { min, max };
}

/** Formats a range as an H value: `"N"` when min == max, else `"A-B"`. */
export function formatHeaderRange(range: HeaderRange): string {
  return range.min === range.max ? String(range.min) : `${range.min}-${range.max}`;
}

const headerValue = z
  .string()
  .refine((v) => parseHeaderRange(v) !== undefined, {
    message: 'must be an unsigned 32-bit decimal "N" or a range "A-B" with A <= B',
  })
  .refine((v) => (parseHeaderRange(v)?.min ?? 0) >= 5, {
    // amneziawg-go falls back to plain WireGuard's type when the minimum is <= 4.
    message: "must not contain 0..4 (plain WireGuard's message types)",
  });

/** The padding fields with the message each pads, for the distinct-size rule. */
const PADDED_MESSAGES = [
  { key: "s1", message: "initiation", base: WIREGUARD_MESSAGE_SIZES.initiation },
  { key: "s2", message: "response", base: WIREGUARD_MESSAGE_SIZES.response },
  { key: "s3", message: "cookie reply", base: WIREGUARD_MESSAGE_SIZES.cookieReply },
  { key: "s4", message: "transport", base: WIREGUARD_MESSAGE_SIZES.transport },
] as const;

/** The four padded message sizes (bytes) of a parameter set. */
function paddedSizes(p: Pick<AwgParams, "s1" | "s2" | "s3" | "s4">) {
  return PADDED_MESSAGES.map((entry) => ({ ...entry, size: entry.base + p[entry.key] }));
}

/** Padding: the kernel module README's hard limit S < 1280; 0 means no padding. */
const padding = z.number().int().min(0).max(1279);

/**
 * Zod schema of {@link AwgParams}. Unknown keys are rejected.
 *
 * Field ranges: jc 1..128; jmin 1..1280; jmax 1..1280; s1..s4 0..1279; h1..h4 as
 * {@link parseHeaderRange} with minimum >= 5.
 * Cross-field rules: jmin <= jmax; the padded sizes 148+s1, 92+s2, 64+s3, 32+s4 pairwise distinct
 * (includes s1 + 56 != s2); the four H ranges pairwise disjoint.
 */
export const awgParamsSchema = z
  .strictObject({
    jc: z.number().int().min(1).max(128),
    jmin: z.number().int().min(1).max(1280),
    jmax: z.number().int().min(1).max(1280),
    s1: padding,
    s2: padding,
    s3: padding,
    s4: padding,
    h1: headerValue,
    h2: headerValue,
    h3: headerValue,
    h4: headerValue,
  })
  .superRefine((p, ctx) => {
    if (p.jmin > p.jmax) {
      ctx.addIssue({ code: "custom", path: ["jmax"], message: `jmax (${p.jmax}) must be >= jmin (${p.jmin})` });
    }

    const sizes = paddedSizes(p);
    for (let i = 0; i < sizes.length; i++) {
      for (let j = i + 1; j < sizes.length; j++) {
        const a = sizes[i];
        const b = sizes[j];
        if (a !== undefined && b !== undefined && a.size === b.size) {
          ctx.addIssue({
            code: "custom",
            path: [b.key],
            message:
              `padded ${a.message} size (${a.base}+${a.key}=${a.size}) equals padded ${b.message} size ` +
              `(${b.base}+${b.key}); receivers tell messages apart by size`,
          });
        }
      }
    }

    const keys = ["h1", "h2", "h3", "h4"] as const;
    for (let i = 0; i < keys.length; i++) {
      for (let j = i + 1; j < keys.length; j++) {
        const ki = keys[i];
        const kj = keys[j];
        if (ki === undefined || kj === undefined) continue;
        const a = parseHeaderRange(p[ki]);
        const b = parseHeaderRange(p[kj]);
        if (a !== undefined && b !== undefined && a.min <= b.max && b.min <= a.max) {
          ctx.addIssue({ code: "custom", path: [kj], message: `${kj} (${p[kj]}) overlaps ${ki} (${p[ki]})` });
        }
      }
    }
  });

// Compile-time guard: the schema's output is exactly AwgParams.
type AssertTrue<T extends true> = T;
type _AwgSchemaMatchesType = AssertTrue<
  [AwgParams, z.infer<typeof awgParamsSchema>] extends [z.infer<typeof awgParamsSchema>, AwgParams] ? true : false
>;

/**
 * Generates fresh parameters with `crypto.randomInt` (never Math.random). The result always
 * passes {@link awgParamsSchema}.
 *
 * Chosen ranges (all inclusive):
 * - jc 4..12: the reference's common range; the README recommends 3..10 and allows 1..128. Junk
 *   is sender-local, so this only costs each handshake a few extra datagrams.
 * - jmin 40..89 and jmax jmin+1..min(jmin+1000, 1280): the README recommends Jmin 50, Jmax 1000,
 *   Jmax <= 1280; jmax > jmin strictly, so the tools' "Jmax == Jmin gets bumped" path never runs.
 *   1280 keeps every junk datagram within the IPv6 minimum MTU.
 * - s1, s2, s3 15..150: the README's recommended S1/S2 range; S3 (cookie replies, only sent
 *   under load) uses the same.
 * - s4 8..20: S4 pads every transport packet. With awg-quick's default MTU of 1420 a full packet
 *   is 1420+32 (WireGuard) +8 (UDP) +20 (IPv4) = 1480 bytes, so S4 <= 20 still fits a 1500-byte
 *   IPv4 path; >= 8 matches amneziawg-go's minimum padding for its header protection.
 *   (32+s4 <= 52 < 64+s3, so S4 never collides with the other padded sizes.)
 * - s1, s2, s3 are redrawn until 148+s1, 92+s2, 64+s3 are distinct (rejection sampling, so the
 *   valid combinations stay uniformly likely).
 * - h1..h4: four disjoint ranges in 5..2147483647 (the README's recommended H range; it avoids
 *   1..4 and stays in 31 bits for tools that read H as a signed 32-bit value): eight distinct
 *   random values are sorted into four [A, B] pairs, and the pairs are shuffled over H1..H4 so
 *   the message types are not in ascending order.
 */
export function generateAwgParams(): AwgParams {
  const jc = randomInt(4, 12 + 1);
  const jmin = randomInt(40, 89 + 1);
  const jmax = randomInt(jmin + 1, Math.min(jmin + 1000, 1280) + 1);

  let s1: number;
  let s2: number;
  let s3: number;
  do {
    s1 = randomInt(15, 150 + 1);
    s2 = randomInt(15, 150 + 1);
    s3 = randomInt(15, 150 + 1);
  } while (new Set([148 + s1, 92 + s2, 64 + s3]).size !== 3);
  const s4 = randomInt(8, 20 + 1);

  const [h1, h2, h3, h4] = shuffle(randomDisjointRanges(4, 5, 2_147_483_647)).map(formatHeaderRange);
  if (h1 === undefined || h2 === undefined || h3 === undefined || h4 === undefined) {
    throw new Error("expected four header ranges"); // unreachable: randomDisjointRanges(4, ...)
  }
  return { jc, jmin, jmax, s1, s2, s3, s4, h1, h2, h3, h4 };
}

/** `count` disjoint ranges [A, B] with A < B inside [lo, hi], in ascending order. */
function randomDisjointRanges(count: number, lo: number, hi: number): HeaderRange[] {
  const points = new Set<number>();
  while (points.size < count * 2) points.add(randomInt(lo, hi + 1));
  const sorted = [...points].sort((a, b) => a - b);
  const ranges: HeaderRange[] = [];
  for (let i = 0; i < sorted.length; i += 2) {
    const min = sorted[i];
    const max = sorted[i + 1];
    if (min !== undefined && max !== undefined) ranges.push({ min, max });
  }
  return ranges;
}

/** Fisher-Yates shuffle with crypto randomness; returns a new array. */
function shuffle<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = randomInt(0, i + 1);
    const a = out[i] as T;
    out[i] = out[j] as T;
    out[j] = a;
  }
  return out;
}
