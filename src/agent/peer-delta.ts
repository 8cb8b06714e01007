/**
 * Which peers of a running interface a new config changes (docs/decisions.md "Hitless peer
 * updates"). Only those are handed to the tool: `wg addconf` for peers added or changed, `wg set
 * … peer <key> remove` for peers gone; every other peer, and the interface itself, is left as it
 * runs. (`wg syncconf` would re-send the interface's key and port — wireguard-go reopens its UDP
 * socket for a port even when unchanged, dropping what arrives meanwhile — and every peer's
 * allowed IPs, each replaced in a window where that peer has none.)
 */

/** How many peers a hitless apply added, changed and removed. */
export interface PeerChanges {
  added: number;
  changed: number;
  removed: number;
}

/** What to apply: the `wg addconf` text (null when no peer is added or changed) and the keys to remove. */
export interface PeerDelta extends PeerChanges {
  addconf: string | null;
  remove: string[];
}

const PEER_HEADER = /^\[peer\]$/i;
const PUBLIC_KEY = /^publickey\s*=\s*(\S+)$/i;
const KEEPALIVE = /^persistentkeepalive\s*=/i;
/** A WireGuard key in base64 (32 bytes): the only text passed on as a `wg set` argument. */
const WG_KEY = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

/**
 * The `[Peer]` sections of a config text by public key, each as its lines without comments
 * (`#` to the end of the line, as wg(8) reads it), blank lines or surrounding spaces.
 * @throws Error for a `[Peer]` without a PublicKey (wg(8) refuses it too)
 */
export function peerSections(text: string): Map<string, string[]> {
  const sections = new Map<string, string[]>();
  let current: string[] | null = null;
  const close = () => {
    if (current === null) return;
    const key = current.map((line) => PUBLIC_KEY.exec(line)?.[1]).find((k) => k !== undefined);
    if (key === undefined) throw new Error("a [Peer] section has no PublicKey");
    sections.set(key, current);
  };
  for (const raw of text.split(/\r?\n/)) {
    const line = (raw.split("#")[0] ?? "").trim();
    if (line.startsWith("[")) {
      close();
      current = PEER_HEADER.test(line) ? [] : null;
    } else if (current !== null && line !== "") {
      current.push(line);
    }
  }
  close();
  return sections;
}

/**
 * The change from the running interface to the new config.
 * @param previous the config file the interface runs from (its text before the push)
 * @param next the new config as `wg-quick strip` prints it
 * @param running the public keys of the interface's peers now (`wg show <iface> peers`)
 * @throws Error for a `[Peer]` without a PublicKey
 */
export function peerDelta(previous: string, next: string, running: readonly string[]): PeerDelta {
  const before = peerSections(previous);
  const after = peerSections(next);
  const live = new Set(running);
  const blocks: string[] = [];
  let added = 0;
  let changed = 0;
  for (const [key, lines] of after) {
    const old = before.get(key);
    const same = old !== undefined && old.length === lines.length && old.every((line, i) => line === lines[i]);
    if (live.has(key) && same) continue;
    if (live.has(key)) changed += 1;
    else added += 1;
    // addconf keeps a keepalive the new text no longer names: turn it off explicitly.
    const keepaliveGone = old?.some((line) => KEEPALIVE.test(line)) === true && !lines.some((line) => KEEPALIVE.test(line));
    blocks.push(["[Peer]", ...lines, ...(keepaliveGone ? ["PersistentKeepalive = 0"] : [])].join("\n"));
  }
  const remove = running.filter((key) => !after.has(key) && WG_KEY.test(key));
  const addconf = blocks.length === 0 ? null : `[Interface]\n\n${blocks.join("\n\n")}\n`;
  return { addconf, remove, added, changed, removed: remove.length };
}
