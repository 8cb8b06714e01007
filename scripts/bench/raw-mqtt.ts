/**
 * The MQTT 3.1.1 wire pieces the benchmarks' raw stand-in agents write and read
 * (scripts/bench/ingest-agents.ts, fleet-agents.ts, switch-agents.ts): one socket and a few
 * prebuilt packets per agent cost far less memory than an MQTT.js client, which is what lets a
 * bench hold tens of thousands of connections. Only the subset the stand-ins send is encoded.
 */

/** The "remaining length" varint of a fixed header (1–4 bytes). */
export function remainingLength(n: number): Buffer {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return Buffer.from(out);
}

/** A length-prefixed UTF-8 string (or bytes), as CONNECT and PUBLISH carry them. */
export function str(s: string | Buffer): Buffer {
  const b = typeof s === "string" ? Buffer.from(s, "utf8") : s;
  const len = Buffer.alloc(2);
  len.writeUInt16BE(b.length);
  return Buffer.concat([len, b]);
}

/** A big-endian 16-bit integer (packet identifiers). */
export function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

/** A whole packet: its first byte (type and flags), the remaining length, the body. */
export function packet(first: number, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from([first]), remainingLength(body.length), body]);
}

/**
 * Splits a socket's byte stream into packets: `onPacket(first byte, body)` once per whole packet.
 * @throws Error "bad remaining length" when a length runs past its 4 bytes
 */
export function framer(onPacket: (first: number, body: Buffer) => void): (chunk: Buffer) => void {
  let buf: Buffer = Buffer.alloc(0);
  return (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    for (;;) {
      if (buf.length < 2) return;
      let len = 0;
      let mult = 1;
      let i = 1;
      for (;;) {
        if (i >= buf.length) return;
        const b = buf[i] as number;
        len += (b & 0x7f) * mult;
        mult *= 128;
        i++;
        if ((b & 0x80) === 0) break;
        if (i > 4) throw new Error("bad remaining length");
      }
      if (buf.length < i + len) return;
      onPacket(buf[0] as number, buf.subarray(i, i + len));
      buf = buf.subarray(i + len);
    }
  };
}
