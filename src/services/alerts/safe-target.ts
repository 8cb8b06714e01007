import { lookup as dnsLookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";

/**
 * Where an alert may be sent (docs/alerts.md "Safe targets"). An alert channel's URL or SMTP host
 * is typed by an admin, but the service sends to it from inside the network it runs in: without a
 * check, a channel is a way to make the service POST to its own loopback listeners, the LAN, or
 * a cloud's instance-metadata endpoint. So the target's host is resolved at send time, every
 * address it resolves to is checked, and the connection goes to the checked address itself (a
 * DNS answer that changes between the check and the connect cannot move it).
 *
 * Always refused: unspecified, broadcast, multicast and the cloud metadata addresses. Refused
 * unless `SVC_ALERTS_ALLOW_PRIVATE_TARGETS=true` (an appliance alerting a receiver on its LAN):
 * loopback, RFC 1918 private, carrier-grade NAT, link-local, IPv6 unique-local and site-local,
 * and the reserved ranges; an IPv4-mapped or NAT64 IPv6 address is judged by the IPv4 address in it.
 */

/** A hostname's addresses, as `dns.promises.lookup(host, {all: true})` answers. Tests pass their own. */
export type AddressLookup = (host: string) => Promise<Array<{ address: string; family: number }>>;

export const systemLookup: AddressLookup = (host) => dnsLookup(host, { all: true, verbatim: true });

/** Addresses of cloud instance-metadata services (AWS, GCP, Azure, OpenStack; AWS's IPv6 one). */
const METADATA_ADDRESSES = new Set(["169.254.169.254", "fd00:ec2::254", "169.254.170.2"]);

const ALWAYS_REFUSED = new Set(["unspecified", "broadcast", "multicast"]);
const INTERNAL = new Set(["loopback", "private", "carrierGradeNat", "linkLocal", "uniqueLocal", "deprecatedSiteLocal", "reserved"]);

/** Words for ipaddr.js's range names, for the delivery log. */
const RANGE_WORDS: Record<string, string> = {
  unspecified: "an unspecified address",
  broadcast: "a broadcast address",
  multicast: "a multicast address",
  loopback: "a loopback address",
  private: "a private (RFC 1918) address",
  carrierGradeNat: "a carrier-grade NAT address",
  linkLocal: "a link-local address",
  uniqueLocal: "a unique-local (ULA) address",
  deprecatedSiteLocal: "a site-local address",
  reserved: "a reserved address",
};

/** A target the policy refuses; the message says which address and why. */
export class TargetRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TargetRefusedError";
  }
}

/**
 * Why `address` (an IP literal) may not be a target, or undefined when it may.
 * @param allowPrivate `SVC_ALERTS_ALLOW_PRIVATE_TARGETS`
 */
export function refusalReason(address: string, allowPrivate: boolean): string | undefined {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  let ip = ipaddr.parse(address);
  if (ip.kind() === "ipv6") {
    const v6 = ip as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) ip = v6.toIPv4Address();
    else if (v6.range() === "rfc6052") {
      const [hi = 0, lo = 0] = v6.parts.slice(6);
      ip = new ipaddr.IPv4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
    }
  }
  const normal = ip.kind() === "ipv6" ? (ip as ipaddr.IPv6).toNormalizedString() : ip.toString();
  if (METADATA_ADDRESSES.has(normal) || METADATA_ADDRESSES.has(ip.toString())) return `${address} is a cloud metadata address`;
  const range = ip.range();
  if (ALWAYS_REFUSED.has(range)) return `${address} is ${RANGE_WORDS[range] ?? range}`;
  if (!allowPrivate && INTERNAL.has(range)) return `${address} is ${RANGE_WORDS[range] ?? range} (set SVC_ALERTS_ALLOW_PRIVATE_TARGETS=true to allow internal targets)`;
  return undefined;
}

/** The one address a send connects to, checked. */
export interface ResolvedTarget {
  address: string;
  family: 4 | 6;
}

/**
 * Resolves `host` and checks every address it resolves to (one refused address refuses the host:
 * a name that answers both a public and an internal address is not trusted with either).
 * @returns the first address, which the caller must connect to (never the name again)
 * @throws TargetRefusedError when an address is refused, or the name resolves to nothing
 */
export async function resolveTarget(host: string, opts: { allowPrivate: boolean; lookup: AddressLookup }): Promise<ResolvedTarget> {
  const bare = host.replace(/^\[(.*)\]$/, "$1");
  let addresses: Array<{ address: string; family: number }>;
  if (ipaddr.isValid(bare)) addresses = [{ address: bare, family: bare.includes(":") ? 6 : 4 }];
  else {
    try {
      addresses = await opts.lookup(bare);
    } catch (err) {
      throw new TargetRefusedError(`${bare} does not resolve: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  const first = addresses[0];
  if (first === undefined) throw new TargetRefusedError(`${bare} resolves to no address`);
  for (const a of addresses) {
    const reason = refusalReason(a.address, opts.allowPrivate);
    if (reason !== undefined) throw new TargetRefusedError(bare === a.address ? `refused target: ${reason}` : `refused target: ${bare} resolves to ${reason}`);
  }
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}
