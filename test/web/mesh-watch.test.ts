/**
 * "Watch a whole config": the mesh page colours each node by a chosen region's
 * state (a select kept in the URL) and shows each node's last recorded transition on hover and
 * keyboard focus. The real service in-process (SQLite file, embedded aedes on port 0), Debian's
 * Chromium; agents are MQTT.js clients with a real bind profile (test/control/agent-harness.ts).
 */
import assert from "node:assert/strict";
import test from "node:test";
import { bind, connectAgent, envelope } from "../control/agent-harness.js";
import type { SseServer } from "../events/sse-harness.js";
import { expectAccessible, expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

test("spec §3.1, §6.5 rule 7 (the console shows presence as the backend says): colouring by presence labels nodes online and offline, the choice survives a reload, and hover or focus names each node's last transition, refreshed live", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const s = h as unknown as SseServer;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "watched", tunnel_protocol: "wireguard", network_cidr: "10.61.0.0/24" });
  const ids: Record<string, string> = {};
  const profiles = [];
  for (const name of ["edge-a", "edge-b"]) {
    const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name, mode: "dynamic", public_address: `${name}.example.net` });
    ids[name] = node.node_id;
    profiles.push(await bind(s, cfg.config_id, node.node_id));
  }
  // edge-a's agent connects and says it is up; edge-b is bound but never connects.
  const p = profiles[0]!;
  const agent = await connectAgent(s, p);
  t.after(() => agent.end(true));
  await agent.publishAsync(p.topics.heartbeat!, envelope(p, "heartbeat", { client_online: true, wg_online: true }), { qos: 1 });

  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${cfg.config_id}`);
  const table = page.getByRole("table");
  const link = (name: string) => table.getByRole("link", { name, exact: true });
  const row = (name: string) => table.getByRole("row").filter({ has: page.getByRole("link", { name, exact: true }) });
  await expectText(row("edge-a"), /online/);

  await page.getByLabel("Colour nodes by").selectOption("presence");
  await expectText(row("edge-a"), /presence: online/);
  await expectText(row("edge-b"), /presence: offline/);
  const nodes = (await h.api("GET", `/api/v1/configs/${cfg.config_id}/nodes`)).nodes as Array<{ name: string; client: { client_presence_state: string } }>;
  assert.deepEqual(
    Object.fromEntries(nodes.map((n) => [n.name, n.client.client_presence_state])),
    { "edge-a": "online", "edge-b": "offline" },
    "what the page shows is what the backend says",
  );
  // Colour as well as text: the two states' chips are painted differently.
  const background = (name: string, text: string) =>
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- runs in the page (DOM types are not in the Node typecheck)
    row(name).getByText(text, { exact: true }).evaluate((el: any) => (globalThis as any).getComputedStyle(el).backgroundColor as string);
  assert.notEqual(await background("edge-a", "presence: online"), await background("edge-b", "presence: offline"));

  // The choice is in the URL: a reload keeps it.
  assert.equal(new URL(page.url()).searchParams.get("watch"), "presence");
  await page.reload();
  await waitLive(page);
  await expectText(row("edge-b"), /presence: offline/);
  assert.equal(await page.getByLabel("Colour nodes by").inputValue(), "presence");

  // Hover: the tooltip names edge-a's last transition, the newest row the backend recorded for it.
  const latest = (await h.api("GET", `/api/v1/configs/${cfg.config_id}/timeline/latest`)).transitions as Array<{ node_id: string; event: string; source: string }>;
  const lastA = latest.find((r) => r.node_id === ids["edge-a"]);
  assert.ok(lastA, "edge-a has a recorded transition");
  const escape = (x: string) => x.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  await link("edge-a").hover();
  const tipA = page.getByRole("tooltip");
  await tipA.waitFor({ state: "visible" });
  await expectText(tipA, new RegExp(`^Last transition \\d\\d:\\d\\d:\\d\\d: .+: ${escape(lastA.event)} \\(${escape(lastA.source)}\\)$`));
  // Keyboard focus: edge-b's link is described by its last transition (the bind), shown too.
  await page.mouse.move(0, 0);
  await link("edge-b").focus();
  const tipB = page.getByRole("tooltip").filter({ hasText: /client\.bound/ });
  await tipB.waitFor({ state: "visible" });
  await expectText(tipB, /: client\.bound \(rest POST \/api\/client\/bind\)$/);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- runs in the page (DOM types are not in the Node typecheck)
  const described = await link("edge-b").evaluate((el: any) => ((globalThis as any).document.getElementById(el.getAttribute("aria-describedby") ?? "")?.textContent ?? "") as string);
  assert.match(described, /client\.bound/, "the focused link's description is the last transition");
  await expectAccessible(page, "mesh-watch");
  await screenshot(page, "mesh-watch");

  // Live: edge-a's socket dies (the broker publishes its will); the page follows without a reload.
  agent.stream.destroy();
  await expectText(row("edge-a"), /presence: offline/);
  await link("edge-a").focus();
  await expectText(page.getByRole("tooltip").filter({ hasText: /mqtt\.will/ }), /presence online\.fresh → offline.*: mqtt\.will \(will\)$/);

  // The topology colours and labels the nodes the same way.
  await page.getByRole("button", { name: "Topology" }).click();
  const figure = page.getByRole("figure", { name: "Topology" });
  await expectText(figure, /edge-a \(offline\)/);
  await figure.getByRole("link", { name: /^Node edge-a .*Last transition .*mqtt\.will/ }).waitFor();
  assert.equal(new URL(page.url()).searchParams.get("watch"), "presence");
  await screenshot(page, "mesh-watch-topology");
});
