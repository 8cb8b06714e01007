/**
 * An AmneziaVPN QR decoder written from amnezia-client's layout, independent of the project's
 * encoder (src/protocol/amneziavpn-qr.ts): importController.cpp `parseQrCodeChunk` reassembles
 * chunks that exportController.cpp `generateQrCodeImageSeries` cut — each base64url without
 * padding of a big-endian QDataStream: qint16 magic 1984 (`core/defs.h` `qrMagicCode`), quint8
 * chunk count, quint8 chunk index, QByteArray (quint32 length, then the bytes, at most 850).
 */
import assert from "node:assert/strict";

/**
 * The compressed bytes a series of chunks carries (any order), asserting the layout on the way.
 * @throws AssertionError on a chunk that breaks the layout, a missing or repeated index
 */
export function reassembleAmneziaVpnChunks(chunks: readonly string[]): Buffer {
  const parts = new Map<number, Buffer>();
  let total = -1;
  for (const chunk of chunks) {
    assert.match(chunk, /^[A-Za-z0-9_-]+$/, "base64url without padding");
    const bytes = Buffer.from(chunk, "base64url");
    assert.equal(bytes.readInt16BE(0), 1984, "qrMagicCode");
    const count = bytes.readUInt8(2);
    assert.ok(total === -1 || total === count, "every chunk names the same count");
    total = count;
    const length = bytes.readUInt32BE(4);
    assert.equal(bytes.length, 8 + length, "QByteArray: quint32 length, then exactly that many bytes");
    assert.ok(length <= 850);
    parts.set(bytes.readUInt8(3), bytes.subarray(8));
  }
  assert.equal(parts.size, total, "every chunk once");
  return Buffer.concat(Array.from({ length: total }, (_, i) => parts.get(i) ?? assert.fail(`chunk ${i} missing`)));
}
