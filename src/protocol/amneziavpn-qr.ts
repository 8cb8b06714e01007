/**
 * The AmneziaVPN app's own QR layout of a shared config (amnezia-client
 * `ui/controllers/exportController.cpp` `generateQrCodeImageSeries`, read back by
 * `importController.cpp` `parseQrCodeChunk`): the qCompress'd bytes of the config (the bytes the
 * `vpn://` link base64url-encodes) cut into 850-byte chunks, each the big-endian `QDataStream` of
 * qint16 magic 1984 (`core/defs.h` `qrMagicCode`), quint8 chunk count, quint8 chunk index and a
 * QByteArray (quint32 length, then the bytes), base64url without padding, one QR code each.
 *
 * Plain byte work with no Node or browser API beyond `btoa`/`atob`, so the console can cut a
 * downloaded `vpn://` link into its QR codes itself.
 */

/** Size of one chunk in compressed bytes (exportController.cpp `k = 850`). */
export const AMNEZIAVPN_QR_CHUNK_BYTES = 850;
/** Magic number opening every chunk (amnezia-client `core/defs.h` `qrMagicCode`). */
export const AMNEZIAVPN_QR_MAGIC = 1984;
/** Most chunks one series can have: the count is a quint8. */
export const AMNEZIAVPN_QR_MAX_CHUNKS = 255;

/**
 * The QR chunks of a payload, in index order.
 * @param payload the qCompress'd config bytes (4-byte big-endian length, then the zlib stream)
 * @returns one base64url string (no padding) per chunk; empty for an empty payload
 * @throws RangeError when the payload needs more than {@link AMNEZIAVPN_QR_MAX_CHUNKS} chunks
 */
export function amneziaVpnQrChunks(payload: Uint8Array): string[] {
  const count = Math.ceil(payload.length / AMNEZIAVPN_QR_CHUNK_BYTES);
  if (count > AMNEZIAVPN_QR_MAX_CHUNKS) throw new RangeError(`the payload needs ${count} QR chunks; the AmneziaVPN layout holds ${AMNEZIAVPN_QR_MAX_CHUNKS}`);
  const chunks: string[] = [];
  for (let index = 0; index < count; index++) {
    const bytes = payload.subarray(index * AMNEZIAVPN_QR_CHUNK_BYTES, (index + 1) * AMNEZIAVPN_QR_CHUNK_BYTES);
    const chunk = new Uint8Array(8 + bytes.length);
    const view = new DataView(chunk.buffer);
    view.setInt16(0, AMNEZIAVPN_QR_MAGIC);
    view.setUint8(2, count);
    view.setUint8(3, index);
    view.setUint32(4, bytes.length);
    chunk.set(bytes, 8);
    chunks.push(toBase64Url(chunk));
  }
  return chunks;
}

/**
 * The QR chunks of a `vpn://` link: its base64url body decoded to the qCompress'd bytes, then
 * {@link amneziaVpnQrChunks}.
 * @throws RangeError when `link` is not `vpn://` + base64url, or needs too many chunks
 */
export function amneziaVpnQrChunksOfLink(link: string): string[] {
  const body = link.startsWith("vpn://") ? link.slice("vpn://".length) : "";
  if (!/^[A-Za-z0-9_-]+$/.test(body)) throw new RangeError("not a vpn:// link");
  return amneziaVpnQrChunks(fromBase64Url(body));
}

function toBase64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text: string): Uint8Array {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}
