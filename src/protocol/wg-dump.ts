import type { WgPeerReport } from "./wg-peers.schema.js";

/**
 * Parser of the machine-readable dump of `wg show IFACE dump` (wireguard-tools `show.c`
 * `dump_print`) and `awg show IFACE dump` (amneziawg-tools, same function): tab-separated, one
 * interface line, then one line per peer. It lives beside the report's schema because the agent
 * runs it and may import only `protocol` and `lib`; it is pure (no I/O).
 *
 * - Interface line: private key, public key, listen port, [AmneziaWG only: jc, jmin, jmax, s1…s4,
 *   h1…h4, i1…i5, header protection key and the timer fields, as many as the version prints],
 *   fwmark. Only the public key (field 2) and the listen port (field 3) are read, so both
 *   toolchains and every AmneziaWG version parse alike; the private key (field 1) is never kept.
 * - Peer line, eight fields in both toolchains: public key, preshared key or "(none)", endpoint
 *   or "(none)", allowed IPs comma-separated or "(none)", latest handshake in unix seconds (0 =
 *   never), rx bytes, tx bytes, persistent keepalive seconds or "off". The preshared key is
 *   never kept.
 */
export interface WgDump {
  public_key: string | null;
  listen_port: number | null;
  peers: WgPeerReport[];
}

/** A dump line that is not what `dump_print` writes; `line` is 1-based, the text is never included (it may hold keys). */
export class WgDumpParseError extends Error {
  constructor(
    readonly line: number,
    reason: string,
  ) {
    super(`wg dump line ${line}: ${reason}`);
    this.name = "WgDumpParseError";
  }
}

const PEER_FIELDS = 8;
const KEY = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

function nonNegativeInt(text: string, line: number, what: string): number {
  if (!/^\d{1,20}$/.test(text)) throw new WgDumpParseError(line, `${what} is not a non-negative integer`);
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new WgDumpParseError(line, `${what} is out of range`);
  return n;
}

function peerOf(fields: string[], line: number): WgPeerReport {
  if (fields.length !== PEER_FIELDS) throw new WgDumpParseError(line, `a peer line has ${PEER_FIELDS} fields, this one ${fields.length}`);
  const [publicKey, , endpoint, allowed, handshake, rx, tx, keepalive] = fields as [string, string, string, string, string, string, string, string];
  if (!KEY.test(publicKey)) throw new WgDumpParseError(line, "the peer's public key is not a WireGuard key");
  const latest = nonNegativeInt(handshake, line, "latest handshake");
  const keepaliveS = keepalive === "off" ? null : nonNegativeInt(keepalive, line, "persistent keepalive");
  return {
    public_key: publicKey,
    endpoint: endpoint === "(none)" ? null : endpoint,
    allowed_ips: allowed === "(none)" ? [] : allowed.split(","),
    latest_handshake: latest === 0 ? null : latest,
    rx_bytes: nonNegativeInt(rx, line, "rx bytes"),
    tx_bytes: nonNegativeInt(tx, line, "tx bytes"),
    persistent_keepalive_s: keepaliveS === 0 ? null : keepaliveS,
  };
}

/**
 * Parses one interface's dump (`wg show IFACE dump`, without `all`).
 * @returns the interface's public key and listen port and its peers in the dump's order
 * @throws WgDumpParseError on an empty dump or a line `dump_print` would not write
 */
export function parseWgDump(text: string): WgDump {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const head = lines[0];
  if (head === undefined || head === "") throw new WgDumpParseError(1, "no interface line");
  const iface = head.split("\t");
  if (iface.length < 4) throw new WgDumpParseError(1, `an interface line has at least 4 fields, this one ${iface.length}`);
  const publicKey = iface[1] ?? "(none)";
  if (publicKey !== "(none)" && !KEY.test(publicKey)) throw new WgDumpParseError(1, "the interface's public key is not a WireGuard key");
  const port = nonNegativeInt(iface[2] ?? "", 1, "listen port");
  return {
    public_key: publicKey === "(none)" ? null : publicKey,
    listen_port: port === 0 ? null : port,
    peers: lines.slice(1).map((l, i) => peerOf(l.split("\t"), i + 2)),
  };
}
