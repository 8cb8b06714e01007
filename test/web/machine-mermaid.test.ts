/**
 * "Copy as Mermaid": `machineToMermaid` (web/src/machine-mermaid.ts) over the
 * real `GET /api/v1/machines/node` answer of a started service. Expectations are walked from the
 * answer itself: every state appears, every region is concurrent, every state-changing
 * transition is written with its label, the timers with their delay.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { activeIdsOf, formatDelay, machineToMermaid, transitionLabel } from "../../web/src/machine-mermaid.js";
import type { MachineGraph } from "../../web/src/api/types.js";
import { api } from "../control/agent-harness.js";
import { startSseServer } from "../events/sse-harness.js";

test("Copy as Mermaid turns the real machine graph into stateDiagram-v2 text with every state, the regions concurrent, each compound's initial child and every state-changing transition labelled (timers with their delay)", async (t) => {
  const s = await startSseServer(t, {}, { settings: { detectTimeoutMs: 17_000, bindTokenTtlMs: 240_000 } });
  const res = await api(s, "GET", "/api/v1/machines/node");
  assert.equal(res.status, 200);
  const graph = res.json as MachineGraph;
  const text = machineToMermaid(graph);
  const lines = text.split("\n").map((l) => l.trim());
  assert.equal(lines[0], "stateDiagram-v2");
  const mid = (id: string) => (id === graph.machine_id ? id : id.slice(graph.machine_id.length + 1).replace(/\./g, "_"));

  const parents = new Set(graph.states.map((st) => st.parent));
  for (const st of graph.states) {
    if (parents.has(st.id)) assert.ok(lines.includes(`state ${mid(st.id)} {`), `composite ${st.id}`);
    else assert.ok(lines.includes(`state "${st.key}" as ${mid(st.id)}`), `state ${st.id}`);
    if (st.kind === "compound") assert.ok(lines.includes(`[*] --> ${mid(st.initial!)}`), `initial of ${st.id}`);
  }
  const regions = graph.states.filter((st) => st.parent === graph.machine_id);
  assert.equal(lines.filter((l) => l === "--").length, regions.length - 1, "regions separated by --");

  let written = 0;
  for (const tr of graph.transitions) {
    for (const target of tr.targets) {
      if (target === tr.source) continue;
      written++;
      const arrow = new RegExp(`^\\S+ --> ${mid(target)} : ${transitionLabel(tr).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
      assert.ok(lines.some((l) => arrow.test(l)), `transition ${tr.source} -> ${target} (${transitionLabel(tr)})`);
      if (!target.startsWith(`${tr.source}.`)) assert.ok(lines.includes(`${mid(tr.source)} --> ${mid(target)} : ${transitionLabel(tr)}`), `from ${tr.source}`);
    }
  }
  assert.ok(written > 20, "the machine has state-changing transitions");
  assert.ok(lines.includes("probe_waiting --> probe_idle : after 17 s"), "the detect timer with the service's delay");
  assert.ok(lines.includes("bindToken_valid --> bindToken_expired : after 4 min"), "the bind token timer");
  // A region-level transition is written from each of its other children (presence: on mqtt.will → offline).
  assert.ok(lines.includes("presence_online --> presence_offline : mqtt.will"));
  assert.ok(lines.includes("presence_dropped --> presence_offline : mqtt.will"));
  // Balanced blocks: the text parses as nested composites.
  assert.equal(lines.filter((l) => l.endsWith("{")).length, lines.filter((l) => l === "}").length);
});

test("the tab's labels: delays in s/min, active ids of a stored state value by prefix", () => {
  assert.equal(formatDelay(20_000), "20 s");
  assert.equal(formatDelay(300_000), "5 min");
  assert.equal(formatDelay(90_000), "90 s");
  assert.equal(formatDelay(1_500), "1500 ms");
  assert.deepEqual(activeIdsOf({ presence: "online.fresh", runtime: "running" }, "node"), [
    "node.presence",
    "node.presence.online",
    "node.presence.online.fresh",
    "node.runtime",
    "node.runtime.running",
  ]);
});
