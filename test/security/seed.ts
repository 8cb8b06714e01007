/**
 * The seed of the generated security tests: `SVC_TEST_SEED` when set (to reproduce a
 * failure), else a fixed default, so CI runs are repeatable. Each test prints the seed it used.
 */
export function seedFromEnv(fallback = 15_2026): number {
  const raw = process.env.SVC_TEST_SEED;
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n)) throw new Error(`SVC_TEST_SEED must be an integer, not ${raw}`);
  return n;
}

/** A small seeded PRNG (mulberry32): uniform floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * One JSON POST over real HTTP from the loopback source address `localAddress` (any of
 * 127.0.0.0/8 on Linux), on a fresh connection: concurrent redemptions arrive as from many hosts,
 * each under the per-address guessing limit of the public routes.
 */
export async function postFrom(baseUrl: string, path: string, body: unknown, localAddress: string): Promise<{ status: number; json: any }> {
  const { request } = await import("node:http");
  const url = new URL(path, baseUrl);
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method: "POST", localAddress, agent: false, headers: { "content-type": "application/json", "content-length": data.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : undefined });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

/** The n-th distinct loopback source address: 127.1.0.1, 127.1.0.2, ... (n < 16,000,000). */
export function loopbackAddress(n: number): string {
  const v = n + 1;
  return `127.${1 + Math.floor(v / 65536)}.${Math.floor(v / 256) % 256}.${v % 256}`;
}
