// Hitless peer updates on real WireGuard (docs/decisions.md "Hitless peer updates"): three
// dynamic nodes of a `hitless` config, each with a real `svcctl agent run` and a wg-quick +
// wireguard-go tunnel in its own network namespace, ping each other continuously (5 a second a
// pair) while a fourth node is added, bound and started. The existing nodes take the new peer
// without a restart (their pushes' ACKs say so, one peer added): not one ping among them is lost, and
// the new node reaches each of them. Then a change of one node's [Interface] (its listen port)
// falls back to the spec's stop-write-start on that node only. The 8-node measurement, restart
// against hitless, is scripts/bench/hitless.ts. DESIGN §4: skipped unless root.
import assert from "node:assert/strict";
import { test } from "node:test";
import { LISTEN_PORT, bringUp, firstReply, orderedPairs, startMeshLab, startPings, tunnelConfig, type MeshLab } from "../../scripts/bench/hitless-lab.js";
import { requireSystem } from "../helpers/system.js";
import { WIREGUARD_BINARIES } from "../helpers/wireguard.js";

/** The ACK of a push applied in place, with how many peers were added, changed and removed. */
const inPlace = (added: number, changed: number) => new RegExp(`^config v\\d+ written to .*; applied without restart \\(wg: peers ${added} added, ${changed} changed, 0 removed\\) to the running \\S+$`);
const REACH_WITHIN_MS = 10_000;

test("hitless: adding a node to a pinging mesh loses no ping among the existing pairs and the new node is reached; an [Interface] change restarts that node only", { timeout: 90_000 }, async (t) => {
  if (!requireSystem(t, { root: true, binaries: [...WIREGUARD_BINARIES, "npm", "node"] })) return;
  let mesh: MeshLab | undefined;
  t.after(() => mesh?.close());
  try {
    mesh = await startMeshLab({ namespaces: 4, prefix: "svch", applyMode: "hitless" });
    const existing = [await mesh.addMember(0), await mesh.addMember(1), await mesh.addMember(2)];
    await bringUp(mesh, existing);

    const pings = startPings(orderedPairs(existing));
    const marks = await mesh.logMarks(existing);
    const added = await mesh.addMember(3);
    for (const [m, push] of await mesh.pushesAfter(marks)) {
      assert.match(push.message ?? "", inPlace(1, 0), `node ${m.letter} took the new peer in place`);
      assert.equal((await tunnelConfig(m)).match(/^\[Peer\]$/gm)?.length, 3, `node ${m.letter}'s file lists the new node`);
    }
    await mesh.bind(added);
    mesh.runAgent(added);
    await mesh.command(added, "start");
    for (const m of existing) await firstReply(mesh.lab, added, m, REACH_WITHIN_MS);
    const losses = await pings.stop();
    t.diagnostic(`pings among the existing pairs: ${losses.map((l) => `${l.from}→${l.to} ${l.lost}/${l.sent} lost`).join(", ")}`);
    for (const loss of losses) assert.ok(loss.sent >= 5, `${loss.from}→${loss.to} pinged throughout (${loss.sent} requests)`);
    assert.deepEqual(losses.filter((loss) => loss.lost > 0), [], "no ping lost among the existing pairs");

    // The listen port is in node a's [Interface]: a restarts; the others only see a new endpoint.
    const [a, b] = existing;
    assert.ok(a !== undefined && b !== undefined);
    const all = [...existing, added];
    const before = await mesh.logMarks(all);
    await mesh.request("PATCH", a.path, { listen_port: LISTEN_PORT + 1 });
    const pushes = await mesh.pushesAfter(before);
    assert.match(pushes.get(a)?.message ?? "", /; \S+ restarted with the wireguard toolchain \(not applied without restart: the \[Interface\] section changed\)$/);
    for (const m of all.filter((m) => m !== a)) assert.match(pushes.get(m)?.message ?? "", inPlace(0, 1), `node ${m.letter}: only a peer's endpoint changed`);
    // The restarted node starts new sessions: its peers' old ones end when it first sends
    // (without traffic from it, a peer would only retry after WireGuard's 15 s of silence).
    await firstReply(mesh.lab, a, b, REACH_WITHIN_MS);
    await firstReply(mesh.lab, b, a, REACH_WITHIN_MS);
    await firstReply(mesh.lab, a, added, REACH_WITHIN_MS);
  } catch (error) {
    for (const line of (mesh?.diagnostics() ?? "").split("\n")) t.diagnostic(line);
    throw error;
  }
});
