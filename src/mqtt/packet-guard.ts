import type { Socket } from "node:net";

/**
 * The packet-size cap of the embedded broker, enforced at the socket: aedes's parser has no cap
 * of its own, so the MQTT fixed header of each packet is read as the bytes arrive and a packet
 * declared larger than the cap ends the connection before its body is buffered.
 */

/**
 * Watches the bytes aedes reads from `socket` and calls `onOversize` as soon as a packet's fixed
 * header declares more than `maxBytes` (or a malformed length): aedes's parser has no cap and
 * would otherwise buffer up to 256 MB per packet.
 *
 * aedes reads with `readable` + `read()`; a `data` listener added next to it sees each chunk
 * `read()` returns, synchronously, without switching the socket to flowing mode.
 */
export function guardPacketSize(socket: Socket, maxBytes: number, onOversize: (declared: number) => void): void {
  const framer = new PacketFramer(maxBytes);
  const onData = (chunk: Buffer): void => {
    const declared = framer.feed(chunk);
    if (declared !== null) {
      socket.off("data", onData);
      onOversize(declared);
    }
  };
  socket.on("data", onData);
}

/**
 * Follows MQTT packet boundaries (fixed header: 1 type byte, 1-4 bytes of remaining length)
 * across chunks without buffering payloads.
 */
export class PacketFramer {
  private state: "type" | "length" | "body" = "type";
  private length = 0;
  private multiplier = 1;
  private lengthBytes = 0;
  private remaining = 0;

  constructor(private readonly maxBytes: number) {}

  /**
   * @returns null while every packet fits; else the declared size of the first packet that does
   *   not (Infinity for a malformed remaining length)
   */
  feed(chunk: Buffer): number | null {
    let i = 0;
    while (i < chunk.length) {
      if (this.state === "type") {
        i += 1;
        this.state = "length";
        this.length = 0;
        this.multiplier = 1;
        this.lengthBytes = 0;
      } else if (this.state === "length") {
        const b = chunk.readUInt8(i);
        i += 1;
        this.length += (b & 0x7f) * this.multiplier;
        this.multiplier *= 128;
        this.lengthBytes += 1;
        if ((b & 0x80) !== 0) {
          if (this.lengthBytes >= 4) return Number.POSITIVE_INFINITY;
          continue;
        }
        const total = 1 + this.lengthBytes + this.length;
        if (total > this.maxBytes) return total;
        this.remaining = this.length;
        this.state = this.remaining === 0 ? "type" : "body";
      } else {
        const n = Math.min(this.remaining, chunk.length - i);
        i += n;
        this.remaining -= n;
        if (this.remaining === 0) this.state = "type";
      }
    }
    return null;
  }
}
