/**
 * Memory of the SSE hub under 1,000 stuck subscribers.
 *
 *   npx tsx scripts/bench/stuck-subscribers.ts [subscribers=1000] [burstMiB=8] [runs=1]
 *
 * The service runs in a child process (its RSS is the figure), the clients in this one: each of
 * `subscribers` raw sockets opens `GET /api/v1/events/stream` and then never reads (a console
 * whose tab hangs). One more client reads everything (a healthy console). Then the service
 * publishes a burst of `burstMiB` MiB (16 KiB frames) to every stream, yielding between frames so
 * sockets flush; RSS is sampled after every frame. Printed per variant: RSS idle (streams open),
 * peak RSS during the burst, RSS after the burst and after a GC, streams dropped, streams left,
 * and whether the healthy client got every frame.
 *
 * Variants (`SVC_BENCH_VARIANT`) differ only in hub options; they run interleaved when `runs` > 1.
 * Asserts nothing (a bench): it prints a table.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const SELF = fileURLToPath(import.meta.url);
const PASSWORD = "correct horse battery staple";
const FRAME_BYTES = 16 * 1024;

interface Variant {
  name: string;
  hub: Record<string, number>;
}

const VARIANTS: Variant[] = [
  { name: "default hub limits (4 MiB queue per subscriber)", hub: {} },
  // For comparison: what the queue limit saves (nobody is dropped within the burst).
  { name: "no drop within the burst (1 GiB queue per subscriber)", hub: { maxQueuedBytesPerSubscriber: 1024 * 1024 * 1024 } },
];

type Msg =
  | { kind: "ready"; port: number; token: string; healthyToken: string }
  | { kind: "stats"; rss: number; subscribers: number; dropped: number }
  | { kind: "burst"; peakRss: number; afterRss: number; gcRss: number; subscribers: number; dropped: number; published: number };

// ---- child: the service ----------------------------------------------------------------------

async function child(): Promise<void> {
  const { createServer } = await import("../../src/server.js");
  const { testSettings } = await import("../../src/config.js");
  const { createLogger } = await import("../../src/logger.js");
  const dataDir = mkdtempSync(join(tmpdir(), "svc-stuck-"));
  const hub = JSON.parse(process.env.SVC_BENCH_HUB ?? "{}") as Record<string, number>;
  const settings = testSettings({ dataDir, adminPassword: PASSWORD, sseMaxStreamsPerSession: 1000, authRateLimitMax: 1000, mqttEnabled: false });
  const server = await createServer(settings, createLogger("silent"), { hub });
  const address = await server.app.listen({ host: "127.0.0.1", port: 0 });
  // Two sessions: the stuck streams fill one session's cap (1000), the healthy console has its own.
  const login = async () => (JSON.parse((await server.app.inject({ method: "POST", url: "/api/v1/auth/login", payload: { password: PASSWORD } })).body) as { access_token: string }).access_token;
  const token = await login();
  const healthyToken = await login();
  const send = (m: Msg) => process.send?.(m);
  send({ kind: "ready", port: Number(new URL(address).port), token, healthyToken });
  const gc = (globalThis as { gc?: () => void }).gc;
  process.on("message", (m: { cmd: string; bytes?: number }) => {
    if (m.cmd === "stats") {
      send({ kind: "stats", rss: process.memoryUsage.rss(), subscribers: server.hub.subscriberCount(), dropped: server.hub.metrics().dropped });
    } else if (m.cmd === "burst") {
      void burst(server.hub, m.bytes ?? 0).then((peakRss) => {
        const afterRss = process.memoryUsage.rss();
        gc?.();
        send({ kind: "burst", peakRss, afterRss, gcRss: process.memoryUsage.rss(), subscribers: server.hub.subscriberCount(), dropped: server.hub.metrics().dropped, published: server.hub.metrics().published });
      });
    } else if (m.cmd === "exit") {
      void server.close().then(() => {
        rmSync(dataDir, { recursive: true, force: true });
        process.exit(0);
      });
    }
  });
}

/** Publishes `bytes` in 16 KiB frames, one per macrotask; returns the peak RSS seen. */
async function burst(hub: import("../../src/events/hub.js").EventHub, bytes: number): Promise<number> {
  const blob = "x".repeat(FRAME_BYTES - 200);
  let peak = process.memoryUsage.rss();
  for (let i = 0; i * FRAME_BYTES < bytes; i++) {
    (hub.publish as (type: string, payload: unknown) => void).call(hub, "node.workspace.updated", { config_id: "cfg-bench", node_id: "node-bench", workspace: { i, blob } });
    await new Promise<void>((resolve) => setImmediate(resolve));
    peak = Math.max(peak, process.memoryUsage.rss());
    if (i % 64 === 0) console.error(`  frame ${i}: rss ${(process.memoryUsage.rss() / 1048576).toFixed(0)} MiB, ${hub.subscriberCount()} streams`);
  }
  return peak;
}

// ---- parent: the clients ---------------------------------------------------------------------

function request(child: ChildProcess, cmd: Record<string, unknown>, kind: Msg["kind"]): Promise<Msg> {
  return new Promise((resolve) => {
    const on = (m: Msg) => {
      if (m.kind !== kind) return;
      child.off("message", on);
      resolve(m);
    };
    child.on("message", on);
    child.send(cmd);
  });
}

function openStream(port: number, token: string, read: boolean): Promise<{ socket: Socket; received: () => number }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    let bytes = 0;
    socket.on("error", () => {}); // the service resets a dropped stream
    socket.once("connect", () => {
      socket.write(`GET /api/v1/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`);
      if (read) socket.on("data", (c: Buffer) => (bytes += c.length));
      else {
        // Take the response head, then stop reading for good.
        socket.once("data", () => socket.pause());
      }
      resolve({ socket, received: () => bytes });
    });
    socket.once("error", reject);
  });
}

async function waitFor<T>(probe: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const mib = (n: number) => (n / 1024 / 1024).toFixed(0);

async function runOnce(v: Variant, subscribers: number, burstBytes: number): Promise<string> {
  const c = fork(SELF, ["--child"], { execArgv: ["--import", "tsx", "--expose-gc"], env: { ...process.env, SVC_BENCH_HUB: JSON.stringify(v.hub) } });
  const ready = (await new Promise<Msg>((resolve) => c.once("message", resolve))) as Extract<Msg, { kind: "ready" }>;
  const before = (await request(c, { cmd: "stats" }, "stats")) as Extract<Msg, { kind: "stats" }>;
  const sockets: Socket[] = [];
  for (let i = 0; i < subscribers; i += 50) {
    const batch = await Promise.all(Array.from({ length: Math.min(50, subscribers - i) }, () => openStream(ready.port, ready.token, false)));
    sockets.push(...batch.map((b) => b.socket));
  }
  const healthy = await openStream(ready.port, ready.healthyToken, true);
  console.error(`${v.name}: ${subscribers} streams opened`);
  const idle = (await waitFor(() => request(c, { cmd: "stats" }, "stats"), (m) => (m as Extract<Msg, { kind: "stats" }>).subscribers === subscribers + 1)) as Extract<Msg, { kind: "stats" }>;
  console.error(`${v.name}: all attached, burst of ${mib(burstBytes)} MiB`);
  const b = (await request(c, { cmd: "burst", bytes: burstBytes }, "burst")) as Extract<Msg, { kind: "burst" }>;
  console.error(`${v.name}: burst done, ${b.dropped} dropped`);
  // The healthy client reads the whole burst (frames plus the two opening events).
  await waitFor(async () => healthy.received(), (n) => n >= burstBytes * 0.98);
  for (const s of sockets) s.destroy();
  healthy.socket.destroy();
  const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()));
  c.send({ cmd: "exit" });
  await exited;
  return `| ${v.name} | ${subscribers} | ${mib(burstBytes)} | ${mib(before.rss)} | ${mib(idle.rss)} | ${mib(b.peakRss)} | ${mib(b.afterRss)} | ${mib(b.gcRss)} | ${b.dropped} | ${b.subscribers} | ${healthy.received() >= burstBytes * 0.98 ? "yes" : "no"} |`;
}

async function main(): Promise<void> {
  const subscribers = Number(process.argv[2] ?? 1000);
  const burstBytes = Number(process.argv[3] ?? 8) * 1024 * 1024;
  const runs = Number(process.argv[4] ?? 1);
  const rows: string[] = [];
  for (let r = 0; r < runs; r++) for (const v of VARIANTS) rows.push(await runOnce(v, subscribers, burstBytes));
  console.log(
    [
      "| variant | stuck subscribers | burst per stream (MiB) | RSS before (MiB) | RSS idle, streams open | peak RSS in burst | RSS after burst | RSS after GC | dropped | streams left (incl. 1 healthy) | healthy got all |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
      ...rows,
    ].join("\n"),
  );
}

if (process.argv.includes("--child")) void child();
else void main().then(() => process.exit(0));
