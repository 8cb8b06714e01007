/**
 * What adding a node costs the tunnels already running, with the spec's push sequence (§3.8:
 * every bound online node stops, writes and starts its interface) and with hitless peer updates
 * (docs/decisions.md "Hitless peer updates"). A benchmark, not a test: it prints figures and
 * asserts nothing. Root only (network namespaces, wireguard-go).
 *
 *   npx tsx scripts/bench/hitless.ts                      # 8 nodes, restart then hitless
 *   npx tsx scripts/bench/hitless.ts --nodes 4 --modes hitless
 *
 * For each mode, on a fresh lab (scripts/bench/hitless-lab.ts): the service as `npm start` runs
 * it, one config in that mode, N dynamic nodes bound with the console's bind command, each with
 * a real `svcctl agent run` and a wg-quick + wireguard-go tunnel in its own namespace, started
 * and pinging every other continuously (`ping -i 0.2`: 5 a second for each ordered pair). Then
 * node N+1 is created (every existing node's config gains a peer and is pushed automatically),
 * bound and started. Reported:
 * - lost pings among the existing pairs over the whole window (from before the node is created
 *   until 3 s after the new node reached every existing one): total, pairs with a loss, the
 *   worst pair; and the requests sent;
 * - how the automatic pushes were applied (the ACK messages: in place or restarted);
 * - when the new node first got a reply from each existing node, counted from the end of its
 *   bind command (the node is bound), and from the start of the bind command.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { ApplyMode } from "../../src/protocol/enums.js";
import { bringUp, firstReply, orderedPairs, startMeshLab, startPings, type Member, type MeshLab, type PingLoss } from "./hitless-lab.js";

interface ModeResult {
  mode: ApplyMode;
  nodes: number;
  sent: number;
  lost: number;
  pairsWithLoss: number;
  worst: PingLoss | undefined;
  pushes: { inPlace: number; restarted: number; other: number };
  /** Seconds from the end of the bind command to the new node's first reply from each existing node: the largest. */
  reachAfterBindS: number;
  /** The same from the start of the bind command. */
  reachAfterBindStartS: number;
}

function argValue(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function measure(mode: ApplyMode, nodes: number): Promise<ModeResult> {
  let mesh: MeshLab | undefined;
  try {
    mesh = await startMeshLab({ namespaces: nodes + 1, prefix: "svhb", applyMode: mode });
    const existing: Member[] = [];
    for (let i = 0; i < nodes; i += 1) existing.push(await mesh.addMember(i));
    await bringUp(mesh, existing);
    const pings = startPings(orderedPairs(existing));
    await delay(2_000);
    const marks = await mesh.logMarks(existing);
    const added = await mesh.addMember(nodes);
    const pushed = await mesh.pushesAfter(marks);
    const bindStart = Date.now();
    const bound = await mesh.bind(added);
    mesh.runAgent(added);
    const reached = Promise.all(existing.map((m) => firstReply(mesh?.lab ?? assertLab(), added, m, 60_000)));
    await mesh.command(added, "start");
    const replies = await reached;
    await delay(3_000);
    const losses = await pings.stop();
    const messages = [...pushed.values()].map((log) => log.message ?? "");
    const worst = [...losses].sort((x, y) => y.lost - x.lost)[0];
    return {
      mode,
      nodes,
      sent: losses.reduce((n, l) => n + l.sent, 0),
      lost: losses.reduce((n, l) => n + l.lost, 0),
      pairsWithLoss: losses.filter((l) => l.lost > 0).length,
      worst,
      pushes: {
        inPlace: messages.filter((m) => m.includes("applied without restart (wg: ")).length,
        restarted: messages.filter((m) => m.includes("restarted with the wireguard toolchain")).length,
        other: messages.filter((m) => !m.includes("applied without restart") && !m.includes("restarted")).length,
      },
      reachAfterBindS: (Math.max(...replies) - bound) / 1000,
      reachAfterBindStartS: (Math.max(...replies) - bindStart) / 1000,
    };
  } catch (error) {
    console.error(mesh?.diagnostics() ?? "");
    throw error;
  } finally {
    await mesh?.close();
  }
}

function assertLab(): never {
  throw new Error("the lab is gone");
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("run as root: the benchmark builds network namespaces");
  // Each ping and agent process registers an exit hook that ends its group (test/helpers/agent.ts).
  process.setMaxListeners(200);
  const nodes = Number(argValue("--nodes") ?? "8");
  const modes = (argValue("--modes") ?? "restart,hitless").split(",") as ApplyMode[];
  const results: ModeResult[] = [];
  for (const mode of modes) {
    console.log(`measuring ${mode} with ${nodes} nodes …`);
    const r = await measure(mode, nodes);
    results.push(r);
    console.log(JSON.stringify(r));
  }
  console.log("\n| apply_mode | existing nodes | pings sent | lost | pairs with a loss | worst pair | pushes (in place / restarted) | new node reaches all, s after bind (after bind start) |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const worst = r.worst === undefined || r.worst.lost === 0 ? "—" : `${r.worst.from}→${r.worst.to} ${r.worst.lost}/${r.worst.sent}`;
    console.log(
      `| ${r.mode} | ${r.nodes} | ${r.sent} | ${r.lost} | ${r.pairsWithLoss} of ${r.nodes * (r.nodes - 1)} | ${worst} | ${r.pushes.inPlace} / ${r.pushes.restarted} | ${r.reachAfterBindS.toFixed(1)} (${r.reachAfterBindStartS.toFixed(1)}) |`,
    );
  }
}

await main();
