/**
 * A node's config in the formats of the two Amnezia apps, derived from the rendered wg-quick /
 * awg-quick text (render.ts; spec §6.3 `config_text`). Pure: no I/O, no clocks.
 *
 * - {@link toAmneziaWgText}: the text the AmneziaWG apps import (file or QR).
 * - {@link toAmneziaVpnLink}: the `vpn://` link the AmneziaVPN app imports.
 * - {@link amneziaVpnQrChunks}: the AmneziaVPN app's own multi-QR layout of the same link.
 *
 * What the apps accept, from their sources (amneziawg-android at 5c16489e, amnezia-client at
 * 82d96a96 and its current `dev` import code):
 * - amneziawg-android `config/Interface.java` and `config/Peer.java`, amneziawg-apple
 *   `TunnelConfiguration+WgQuickConfig.swift`: the text goes straight to a wg-quick parser that
 *   knows only WireGuard's keys plus `Jc, Jmin, Jmax, S1–S4, H1–H4, I1–I5` (H kept as a string,
 *   so `A-B` ranges pass); an unknown key (a
 *   `PostUp`, say) or an empty value (`PublicKey =`) is a syntax error, so the export carries only
 *   the keys in {@link AMNEZIAWG_INTERFACE_KEYS} and {@link AMNEZIAWG_PEER_KEYS}, as `Key = Value`.
 * - amnezia-client `ui/controllers/importController.cpp` (`extractWireGuardConfig`): the plain
 *   text is split into lines and each on the literal `" = "`; an `Endpoint` is required; the
 *   imported document is `{containers: [{container: "amnezia-awg" | "amnezia-wireguard",
 *   awg | wireguard: {last_config, isThirdPartyConfig, port, transport_proto, protocol_version}}],
 *   defaultContainer, description, dns1, dns2, hostName}`, with `protocol_version = "2"` when S3
 *   and S4 are set. `last_config` is a JSON string of `{config, hostName, port, client_priv_key,
 *   client_ip, psk_key, server_pub_key, mtu, persistent_keep_alive, allowed_ips, Jc … H4, S3, S4,
 *   I1 … I5}` (the key names of `protocols/protocols_defs.h` `config_key`).
 * - amnezia-client `ui/controllers/exportController.cpp`: the link is `"vpn://"` + base64url
 *   without padding of `qCompress(json, 8)` (a 4-byte big-endian uncompressed length, then a
 *   zlib stream); `generateQrCodeImageSeries` cuts the compressed bytes into 850-byte chunks, each
 *   a `QDataStream` of qint16 magic 1984 (`core/defs.h` `qrMagicCode`), quint8 chunk count,
 *   quint8 chunk index and a QByteArray (quint32 big-endian length, then the bytes), base64url
 *   without padding, one QR code each.
 */
import { deflateSync } from "node:zlib";
import { AMNEZIAVPN_QR_CHUNK_BYTES, AMNEZIAVPN_QR_MAX_CHUNKS, amneziaVpnQrChunks as qrChunks } from "../protocol/amneziavpn-qr.js";
import type { ClientFormatRefusalReason } from "../protocol/config-formats.js";
import { publicKeyFromPrivate } from "./keys.js";

/** `[Interface]` keys the AmneziaWG apps accept that this project renders, in output order. */
export const AMNEZIAWG_INTERFACE_KEYS = ["PrivateKey", "Address", "ListenPort", "DNS", "MTU", "Jc", "Jmin", "Jmax", "S1", "S2", "S3", "S4", "H1", "H2", "H3", "H4", "I1", "I2", "I3", "I4", "I5"] as const;
/** `[Peer]` keys the AmneziaWG apps accept, in output order. */
export const AMNEZIAWG_PEER_KEYS = ["PublicKey", "PresharedKey", "AllowedIPs", "Endpoint", "PersistentKeepalive"] as const;

/** Keys of wg-quick that only a Linux host runs (hub forwarding, port forwards): no app can. */
const HOST_ONLY_KEYS = new Set(["PostUp", "PostDown", "PreUp", "PreDown", "Table", "SaveConfig", "FwMark"]);


/** A config that cannot be had in the asked format; `reason` says why, `message` in the operator's terms. */
export class ClientFormatRefusal extends Error {
  constructor(
    readonly format: "amneziawg" | "amneziavpn",
    readonly reason: ClientFormatRefusalReason,
    message: string,
  ) {
    super(message);
    this.name = "ClientFormatRefusal";
  }
}

/** One section of a parsed config: its name and its `[key, value]` pairs in file order. */
export interface ConfigSection {
  name: "Interface" | "Peer";
  entries: Array<[key: string, value: string]>;
}

/**
 * Parses wg-quick text as rendered by render.ts: `[Interface]` / `[Peer]` headers, `Key = Value`
 * lines; comments (`#`) and blank lines skipped, values trimmed.
 * @throws Error on a line that is none of these, or a key before the first section (the input
 *   is this project's own rendering, so either is a programming fault)
 */
export function parseConfigSections(text: string): ConfigSection[] {
  const sections: ConfigSection[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line === "[Interface]" || line === "[Peer]") {
      sections.push({ name: line === "[Peer]" ? "Peer" : "Interface", entries: [] });
      continue;
    }
    const eq = line.indexOf("=");
    const current = sections.at(-1);
    if (eq <= 0 || current === undefined) throw new Error(`parseConfigSections: unexpected line ${JSON.stringify(line)}`);
    current.entries.push([line.slice(0, eq).trim(), line.slice(eq + 1).trim()]);
  }
  return sections;
}

/**
 * The AmneziaWG apps' text of a node's config: `[Interface]` then each `[Peer]`, each with only
 * the keys of {@link AMNEZIAWG_INTERFACE_KEYS} / {@link AMNEZIAWG_PEER_KEYS} that have a value,
 * in that order, as `Key = Value`; no comments; LF line endings and a trailing newline.
 * @param configText the node's rendered config text (spec §6.3 `config_text`)
 * @throws ClientFormatRefusal (`host_only_commands`) when the config has
 *   `PostUp`/`PostDown` lines: a hub's forwarding or a port forward, which no app can run and whose
 *   silent loss would break the mesh or the forward
 */
export function toAmneziaWgText(configText: string): string {
  const sections = parseConfigSections(configText);
  const blocks = sections.map((section) => {
    const allowed: readonly string[] = section.name === "Interface" ? AMNEZIAWG_INTERFACE_KEYS : AMNEZIAWG_PEER_KEYS;
    for (const [key] of section.entries) {
      if (HOST_ONLY_KEYS.has(key)) refuseHostOnly("amneziawg");
      if (!allowed.includes(key)) throw new Error(`toAmneziaWgText: ${key} is not a key the AmneziaWG apps accept`);
    }
    const lines = allowed.flatMap((key) => section.entries.filter(([k, v]) => k === key && v !== "").map(([k, v]) => `${k} = ${v}`));
    return [`[${section.name}]`, ...lines].join("\n");
  });
  return `${blocks.join("\n\n")}\n`;
}

function refuseHostOnly(format: "amneziawg" | "amneziavpn"): never {
  throw new ClientFormatRefusal(format, "host_only_commands", "this node's config runs PostUp/PostDown commands (a hub's forwarding or a port forward), which the Amnezia apps cannot run; download it as wireguard for a Linux host");
}

/** What the AmneziaVPN link names besides the config: the server entry's label. */
export interface AmneziaVpnLinkOptions {
  /** Shown as the server's name in the AmneziaVPN app (`description`). */
  description: string;
}

/**
 * The AmneziaVPN app's import document of a node's config (see the module comment for its
 * shape): one container, `amnezia-awg` (protocol_version "2") for an awg_2 config (one with
 * `Jc`), `amnezia-wireguard` otherwise. `last_config.config` is the {@link toAmneziaWgText} text.
 * The app models one server, so the config must have exactly one `[Peer]`, with an Endpoint.
 * @throws ClientFormatRefusal for `PostUp`/`PostDown`
 *   lines (`host_only_commands`), or a peer count other than one or a peer without an Endpoint
 *   (`needs_one_server`)
 */
export function amneziaVpnDocument(configText: string, options: AmneziaVpnLinkOptions): Record<string, unknown> {
  if (parseConfigSections(configText).some((s) => s.entries.some(([k]) => HOST_ONLY_KEYS.has(k)))) refuseHostOnly("amneziavpn");
  const text = toAmneziaWgText(configText);
  const sections = parseConfigSections(text);
  const iface = new Map(sections.find((s) => s.name === "Interface")?.entries ?? []);
  const peers = sections.filter((s) => s.name === "Peer").map((s) => new Map(s.entries));
  const peer = peers[0];
  const endpoint = peer?.get("Endpoint");
  if (peers.length !== 1 || peer === undefined || endpoint === undefined) {
    throw new ClientFormatRefusal("amneziavpn", "needs_one_server", `the AmneziaVPN app connects to one server: this node needs exactly one peer with a public endpoint (it has ${peers.length} peer(s))`);
  }
  const { host, port } = splitEndpoint(endpoint);
  const awg = iface.has("Jc");
  const privateKey = iface.get("PrivateKey") ?? "";
  const lastConfig: Record<string, unknown> = {
    config: text,
    hostName: host,
    port,
    client_priv_key: privateKey,
    client_pub_key: publicKeyFromPrivate(privateKey),
    client_ip: iface.get("Address") ?? "",
    server_pub_key: peer.get("PublicKey") ?? "",
    // The value amnezia-client's mobile builds default to (protocols_defs.h `defaultMtu`):
    // safe on every path, where the importer would otherwise pick a per-platform default.
    mtu: iface.get("MTU") ?? "1280",
    allowed_ips: (peer.get("AllowedIPs") ?? "").split(", "),
  };
  const psk = peer.get("PresharedKey");
  if (psk !== undefined) lastConfig.psk_key = psk;
  const keepalive = peer.get("PersistentKeepalive");
  if (keepalive !== undefined) lastConfig.persistent_keep_alive = keepalive;
  for (const key of AMNEZIAWG_INTERFACE_KEYS.slice(AMNEZIAWG_INTERFACE_KEYS.indexOf("Jc"))) {
    const value = iface.get(key);
    if (value !== undefined) lastConfig[key] = value;
  }
  const protocol = awg ? "awg" : "wireguard";
  const container: Record<string, unknown> = { last_config: JSON.stringify(lastConfig), isThirdPartyConfig: true, port: String(port), transport_proto: "udp" };
  if (awg && iface.has("S3") && iface.has("S4")) container.protocol_version = "2";
  const document: Record<string, unknown> = {
    containers: [{ container: `amnezia-${protocol}`, [protocol]: container }],
    defaultContainer: `amnezia-${protocol}`,
    description: options.description,
    hostName: host,
  };
  const dns = (iface.get("DNS") ?? "").split(",").map((d) => d.trim()).filter((d) => d !== "");
  if (dns[0] !== undefined) document.dns1 = dns[0];
  if (dns[1] !== undefined) document.dns2 = dns[1];
  return document;
}

/** `host` (brackets of an IPv6 literal removed) and `port` of an `Endpoint` value. */
function splitEndpoint(endpoint: string): { host: string; port: number } {
  const colon = endpoint.lastIndexOf(":");
  const host = endpoint.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  return { host, port: Number(endpoint.slice(colon + 1)) };
}

/**
 * Qt's `qCompress(data, 8)`: a 4-byte big-endian length of `data`, then its zlib stream.
 * @returns the compressed bytes, the payload of the link and of the QR chunks
 */
export function qCompress(data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  return Buffer.concat([length, deflateSync(data, { level: 8 })]);
}

/** The compressed bytes of the AmneziaVPN document (what the link and the QR chunks carry). */
export function amneziaVpnPayload(configText: string, options: AmneziaVpnLinkOptions): Buffer {
  return qCompress(Buffer.from(JSON.stringify(amneziaVpnDocument(configText, options)), "utf8"));
}

/**
 * The `vpn://` link of a node's config for the AmneziaVPN app: `"vpn://"` + base64url (no
 * padding) of {@link amneziaVpnPayload}.
 * @throws ClientFormatRefusal in the cases of {@link amneziaVpnDocument}
 */
export function toAmneziaVpnLink(configText: string, options: AmneziaVpnLinkOptions): string {
  return `vpn://${amneziaVpnPayload(configText, options).toString("base64url")}`;
}

/**
 * The AmneziaVPN app's own QR layout of a payload (src/protocol/amneziavpn-qr.ts, where the
 * console can import it too): one base64url string per 850-byte chunk.
 * @param payload {@link amneziaVpnPayload}'s bytes
 * @throws ClientFormatRefusal (`too_large`) when the payload needs more than 255 chunks
 */
export function amneziaVpnQrChunks(payload: Uint8Array): string[] {
  if (Math.ceil(payload.length / AMNEZIAVPN_QR_CHUNK_BYTES) > AMNEZIAVPN_QR_MAX_CHUNKS) {
    throw new ClientFormatRefusal("amneziavpn", "too_large", "the config is too large for the AmneziaVPN app's QR codes");
  }
  return qrChunks(payload);
}
