/**
 * Tunnel address pool of a config's `network_cidr` (IPv4 only for now).
 *
 * Addresses are dotted-quad strings (`"10.0.0.7"`), networks are CIDR strings (`"10.0.0.0/24"`).
 * Only strict four-part decimal addresses are accepted: no leading zeros, no hex or short forms
 * (ipaddr.js would otherwise read `"010.0.0.1"` as octal and `"10.1"` as `10.0.0.1`).
 *
 * Pure functions; errors are {@link AppError}s.
 */
import ipaddr from "ipaddr.js";
import { AppError } from "../errors.js";

/** Smallest accepted prefix length: a /8 already holds 16 million addresses. */
const MIN_PREFIX_LENGTH = 8;
/** Largest accepted prefix length: a /30 is the smallest network with two host addresses. */
const MAX_PREFIX_LENGTH = 30;

/** A normalized IPv4 network. */
export interface NetworkCidr {
  /** Normalized CIDR, host bits cleared: `"10.0.0.0/24"`. */
  cidr: string;
  /** Network address: `"10.0.0.0"`. */
  network: string;
  /** Prefix length in bits, 8..30. */
  prefixLength: number;
}

/** Numeric form of a network: first (network) and last (broadcast) address as uint32. */
interface NetworkRange {
  cidr: string;
  prefixLength: number;
  first: number;
  last: number;
}

/**
 * Parses and normalizes an IPv4 network in CIDR notation.
 *
 * @param cidr e.g. `"10.0.0.7/24"`.
 * @returns e.g. `{ cidr: "10.0.0.0/24", network: "10.0.0.0", prefixLength: 24 }`.
 * @throws AppError `VALIDATION_FAILED` for anything but `a.b.c.d/n` with a strict dotted-quad
 *   IPv4 address and 8 <= n <= 30 (IPv6, garbage, /31, /32, /7 ...).
 */
export function parseNetworkCidr(cidr: string): NetworkCidr {
  const { cidr: normalized, prefixLength, first } = parseRange(cidr);
  return { cidr: normalized, network: numberToIpv4(first), prefixLength };
}

/**
 * Address blocks no tunnel network may overlap (RFC 6890 special-purpose IPv4 blocks that are
 * not forwardable unicast): a config there would hand a node `127.0.0.1`, a multicast or a
 * broadcast address. Private (RFC 1918), shared (100.64.0.0/10) and public unicast stay allowed.
 */
export const RESERVED_NETWORKS: ReadonlyArray<{ cidr: string; name: string }> = [
  { cidr: "0.0.0.0/8", name: "\"this network\" (RFC 791)" },
  { cidr: "127.0.0.0/8", name: "loopback (RFC 1122)" },
  { cidr: "169.254.0.0/16", name: "link-local (RFC 3927)" },
  { cidr: "224.0.0.0/4", name: "multicast (RFC 5771)" },
  { cidr: "240.0.0.0/4", name: "reserved and limited broadcast (RFC 1112, RFC 919)" },
];

/**
 * The reserved block a network overlaps, if any (a config refuses them; docs/history/decisions-2026.md "Input rules").
 * @param cidr a network in CIDR notation
 * @returns the block, e.g. `{ cidr: "127.0.0.0/8", name: "loopback (RFC 1122)" }`, or undefined
 * @throws AppError `VALIDATION_FAILED` when `cidr` is invalid (see {@link parseNetworkCidr})
 */
export function reservedOverlap(cidr: string): { cidr: string; name: string } | undefined {
  const range = parseRange(cidr);
  return RESERVED_NETWORKS.find((r) => {
    const block = parseReserved(r.cidr);
    return range.first <= block.last && block.first <= range.last;
  });
}

/**
 * Parses a config's network and refuses reserved blocks: the rule of every network a config
 * may hold (REST create/update, snapshot rows).
 * @returns as {@link parseNetworkCidr}
 * @throws AppError `VALIDATION_FAILED` (details `{ network_cidr }`) for an invalid network or one
 *   overlapping a {@link RESERVED_NETWORKS} block
 */
export function parseConfigNetwork(cidr: string): NetworkCidr {
  const parsed = parseNetworkCidr(cidr);
  const reserved = reservedOverlap(cidr);
  if (reserved) {
    throw new AppError(
      "VALIDATION_FAILED",
      `network_cidr ${JSON.stringify(cidr)} is invalid: it overlaps ${reserved.cidr}, ${reserved.name}`,
      { network_cidr: cidr },
    );
  }
  return parsed;
}

/** Bounds of a reserved block (prefixes /4../8, outside the config range check). */
function parseReserved(cidr: string): { first: number; last: number } {
  const [address, prefix] = cidr.split("/") as [string, string];
  const size = 2 ** (32 - Number(prefix));
  const first = ipv4ToNumber(address);
  if (first === undefined) throw new Error(`reserved block ${cidr} is not an IPv4 network`);
  return { first, last: first + size - 1 };
}

/**
 * Picks the lowest free host address of a network.
 *
 * The network and broadcast addresses are never handed out. Runs in O(|used| + pool size) with a
 * Set of numeric addresses, so a /16 with 60k used entries takes milliseconds.
 *
 * @param cidr The config's `network_cidr` (normalized or not).
 * @param used Addresses already taken (dotted quads); entries outside the network are ignored.
 * @returns The lowest host address not in `used`, as a dotted quad.
 * @throws AppError `VALIDATION_FAILED` when `cidr` is invalid (see {@link parseNetworkCidr}) or an
 *   entry of `used` is not a dotted-quad IPv4 address (refusing beats handing out a duplicate).
 * @throws AppError `ADDRESS_POOL_EXHAUSTED` with details `{ network_cidr }` (normalized) when every
 *   host address is used.
 */
export function allocateAddress(cidr: string, used: readonly string[]): string {
  const range = parseRange(cidr);
  const taken = new Set<number>();
  for (const address of used) {
    const n = ipv4ToNumber(address);
    if (n === undefined) {
      throw new AppError("VALIDATION_FAILED", `used address ${JSON.stringify(address)} is not an IPv4 address`);
    }
    taken.add(n);
  }
  for (let n = range.first + 1; n < range.last; n++) {
    if (!taken.has(n)) return numberToIpv4(n);
  }
  throw new AppError("ADDRESS_POOL_EXHAUSTED", `network ${range.cidr} has no free tunnel address left`, {
    network_cidr: range.cidr,
  });
}

/**
 * True when `address` lies inside the network, network and broadcast addresses included.
 *
 * @param address Dotted quad; anything else (IPv6, garbage, CIDR notation) gives false.
 * @param cidr Network in CIDR notation.
 * @throws AppError `VALIDATION_FAILED` when `cidr` is invalid (see {@link parseNetworkCidr}).
 */
export function isAddressInNetwork(address: string, cidr: string): boolean {
  const range = parseRange(cidr);
  const n = ipv4ToNumber(address);
  return n !== undefined && n >= range.first && n <= range.last;
}

/**
 * True when `address` is a usable host address of the network: inside it, and neither its
 * network nor its broadcast address.
 *
 * @param address Dotted quad; anything else gives false.
 * @param cidr Network in CIDR notation.
 * @throws AppError `VALIDATION_FAILED` when `cidr` is invalid (see {@link parseNetworkCidr}).
 */
export function isHostAddress(address: string, cidr: string): boolean {
  const range = parseRange(cidr);
  const n = ipv4ToNumber(address);
  return n !== undefined && n > range.first && n < range.last;
}

/**
 * Parses a strict dotted-quad IPv4 address into its uint32 value.
 * @returns undefined when `address` is not a strict dotted quad.
 */
export function ipv4ToNumber(address: string): number | undefined {
  // A strict dotted quad (no leading zeros, each octet 0..255); same acceptance as
  // ipaddr.IPv4.isValidFourPartDecimal, 5x cheaper, which matters when a full mesh of N nodes
  // validates N² peer addresses per write.
  const m = DOTTED_QUAD.exec(address);
  if (m === null) return undefined;
  return ((Number(m[1]) << 24) >>> 0) + (Number(m[2]) << 16) + (Number(m[3]) << 8) + Number(m[4]);
}

const OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const DOTTED_QUAD = new RegExp(`^${OCTET}\\.${OCTET}\\.${OCTET}\\.${OCTET}$`);

/** Formats a uint32 as a dotted quad. */
function numberToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

/**
 * The numeric bounds of a network: `first` is the network address, `last` the broadcast address
 * (uint32). Host addresses are strictly between them. For hot loops that test many addresses
 * against one network.
 * @throws AppError `VALIDATION_FAILED` as {@link parseNetworkCidr}
 */
export function networkRange(cidr: string): { first: number; last: number } {
  const { first, last } = parseRange(cidr);
  return { first, last };
}

function parseRange(cidr: string): NetworkRange {
  const invalid = (why: string): AppError =>
    new AppError("VALIDATION_FAILED", `network_cidr ${JSON.stringify(cidr)} is invalid: ${why}`, {
      network_cidr: cidr,
    });
  const slash = cidr.indexOf("/");
  if (slash < 0) throw invalid("expected an IPv4 network such as 10.0.0.0/24");
  const addressPart = cidr.slice(0, slash);
  const prefixPart = cidr.slice(slash + 1);
  const address = ipv4ToNumber(addressPart);
  if (address === undefined) {
    throw invalid(
      ipaddr.IPv6.isValid(addressPart)
        ? "only IPv4 networks are supported"
        : "the address is not a dotted-quad IPv4 address",
    );
  }
  if (!/^(0|[1-9][0-9]?)$/.test(prefixPart)) throw invalid("the prefix length is not a number");
  const prefixLength = Number(prefixPart);
  if (prefixLength < MIN_PREFIX_LENGTH || prefixLength > MAX_PREFIX_LENGTH) {
    throw invalid(
      `the prefix length must be ${MIN_PREFIX_LENGTH}..${MAX_PREFIX_LENGTH} ` +
        "(a /31 or /32 has no host address to hand out)",
    );
  }
  const size = 2 ** (32 - prefixLength);
  const first = address - (address % size);
  const last = first + size - 1;
  return { cidr: `${numberToIpv4(first)}/${prefixLength}`, prefixLength, first, last };
}
