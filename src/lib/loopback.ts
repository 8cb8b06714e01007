import { BlockList, isIP } from "node:net";

/** Addresses that reach only the machine they are used on (IPv4 and IPv6 loopback, "any"). */
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("0.0.0.0", "ipv4");
LOOPBACK.addAddress("::1", "ipv6");
LOOPBACK.addAddress("::", "ipv6");
LOOPBACK.addSubnet("::ffff:127.0.0.0", 104, "ipv6");

/**
 * Whether a host name or IP address, as a URL's `hostname` gives it (IPv6 in brackets or not),
 * names this machine only: `localhost`, `*.localhost` (RFC 6761 §6.3), 127.0.0.0/8, `::1`,
 * `0.0.0.0`, `::`. Another host told this address reaches itself, not the service.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
  if (h === "localhost" || h.endsWith(".localhost")) return true;
  const family = isIP(h);
  if (family === 4) return LOOPBACK.check(h, "ipv4");
  if (family === 6) return LOOPBACK.check(h, "ipv6");
  return false;
}

/** {@link isLoopbackHost} of an absolute URL's host; false for a string that is not a URL. */
export function isLoopbackUrl(url: string): boolean {
  try {
    return isLoopbackHost(new URL(url).hostname);
  } catch {
    return false;
  }
}
