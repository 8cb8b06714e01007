/**
 * Measured link health in the console: the topology draws each pair by its measured state with
 * words (an accessible name per line, a legend with counts), hover and focus show both sides'
 * handshake and transfer, "Check links" says how many hosts reported, the open topology asks for
 * a refresh every minute only while the tab is visible, and a bound node's page lists its running
 * peers and its drift in a sentence (stacked cards at 390 px).
 *
 * The real service in-process (SQLite file, aedes on port 0) and Chromium. The link answers are
 * the contract's shapes (`src/protocol/links.schema.ts`, each fixture parsed by its schema),
 * served with `page.route` so that every state, a refresh with a timed-out host and every kind
 * of drift are on one page without hosts; `mesh-links-live.test.ts` draws states from the real
 * backend, fed through MQTT.
 */
import assert from "node:assert/strict";
import test from "node:test";
import type { Page, Route } from "playwright-core";
import type { z } from "zod";
import { linkMatrixAnswer, linkRefreshAnswer, linkViewSchema, nodePeersAnswer } from "../../src/protocol/links.schema.js";
import { bind } from "../control/agent-harness.js";
import type { SseServer } from "../events/sse-harness.js";
import { expectAccessible, expectText, login, screenshot, startConsole, waitLive } from "./harness.js";

type LinkView = z.input<typeof linkViewSchema>;

const KEY_X = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";

test("the topology draws measured link states with words and a legend, shows both directions on hover and focus, Check links counts the hosts, refreshes only while visible; the node page lists running peers and drift", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const s = h as unknown as SseServer;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "links", tunnel_protocol: "wireguard", network_cidr: "10.66.0.0/24" });
  const ids: Record<string, string> = {};
  const keysOf: Record<string, string> = {};
  for (const [i, name] of ["gate", "edge", "db", "cam"].entries()) {
    const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name, mode: "dynamic", public_address: `198.51.100.${i + 1}`, listen_port: 51820 });
    ids[name] = node.node_id;
    keysOf[name] = node.public_key;
  }
  await bind(s, cfg.config_id, ids["gate"] ?? "");
  const pairs = (await h.api("GET", `/api/v1/configs/${cfg.config_id}/mesh-pairs`)).mesh_pairs as Array<{ pair_id: string; node_a: string; node_b: string }>;
  const pairOf = (a: string, b: string) => pairs.find((p) => new Set([p.node_a, p.node_b]).size === 2 && [p.node_a, p.node_b].includes(ids[a] ?? "") && [p.node_a, p.node_b].includes(ids[b] ?? ""));
  await h.api("PATCH", `/api/v1/configs/${cfg.config_id}/mesh-pairs/${pairOf("db", "cam")?.pair_id}`, { enabled: false });

  const now = h.clock.now();
  const ago = (s: number) => new Date(now - s * 1000).toISOString();
  const dir = (hs: number | null, rx: number, tx: number, endpoint: string | null) => ({ latest_handshake_at: hs === null ? null : ago(hs), rx_bytes: rx, tx_bytes: tx, endpoint });
  const link = (a: string, b: string, state: LinkView["link"], configured: LinkView["configured"], ab: ReturnType<typeof dir> | null, ba: ReturnType<typeof dir> | null): LinkView => ({
    node_a: ids[a] ?? "",
    node_b: ids[b] ?? "",
    configured,
    link: state,
    a_to_b: ab,
    b_to_a: ba,
    measured_at: ab === null && ba === null ? null : ago(5),
  });
  const links = [
    link("gate", "edge", "up", "ok", dir(12, 1_572_864, 307_200, "198.51.100.2:51820"), dir(14, 307_200, 1_572_864, "198.51.100.1:51820")),
    link("gate", "db", "stale", "ok", dir(150, 4096, 2048, "198.51.100.3:51820"), dir(150, 2048, 4096, "198.51.100.1:51820")),
    link("gate", "cam", "down", "ok", dir(null, 0, 1480, "198.51.100.4:51820"), dir(4000, 0, 0, "198.51.100.1:51820")),
    link("edge", "db", "up", "ok", dir(30, 10, 20, null), dir(31, 20, 10, null)),
    link("edge", "cam", "unknown", "ok", null, null),
    link("db", "cam", "unknown", "disabled", null, null),
  ];
  const matrix = linkMatrixAnswer.parse({ config_id: cfg.config_id, links, drift: [] });
  const refreshed = linkRefreshAnswer.parse({ ...matrix, asked: [ids["gate"], ids["edge"], ids["db"]], reported: [ids["gate"], ids["edge"]], timed_out: [ids["db"]] });
  const peers = nodePeersAnswer.parse({
    node_id: ids["gate"],
    measured_at: ago(5),
    peers: [
      { public_key: keysOf["edge"], node_id: ids["edge"], node_name: "edge", endpoint: "198.51.100.2:51820", allowed_ips: ["10.66.0.2/32"], latest_handshake_at: ago(12), rx_bytes: 1_572_864, tx_bytes: 307_200, persistent_keepalive_s: 25 },
      { public_key: keysOf["db"], node_id: ids["db"], node_name: "db", endpoint: "192.0.2.77:51820", allowed_ips: ["10.66.0.3/32"], latest_handshake_at: ago(150), rx_bytes: 4096, tx_bytes: 2048, persistent_keepalive_s: null },
      { public_key: KEY_X, node_id: null, node_name: null, endpoint: null, allowed_ips: [], latest_handshake_at: null, rx_bytes: 0, tx_bytes: 0, persistent_keepalive_s: null },
    ],
    drift: {
      node_id: ids["gate"],
      missing_peers: [keysOf["cam"]],
      extra_peers: [KEY_X],
      different: [{ public_key: keysOf["db"], field: "endpoint", staged: "198.51.100.3:51820", running: "192.0.2.77:51820" }],
    },
  });
  const refreshes: number[] = [];
  const serve = async (page: Page) => {
    await page.route(`**/api/v1/configs/${cfg.config_id}/links`, (r: Route) => r.fulfill({ json: matrix }));
    await page.route(`**/api/v1/configs/${cfg.config_id}/links/refresh`, (r: Route) => {
      refreshes.push(Date.now());
      return r.fulfill({ json: refreshed });
    });
    await page.route(`**/api/v1/configs/${cfg.config_id}/nodes/${ids["gate"]}/peers`, (r: Route) => r.fulfill({ json: peers }));
  };

  const page = await h.newPage();
  await serve(page);
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${cfg.config_id}?view=topology`);
  const figure = page.getByRole("figure", { name: "Topology" });
  // Each line is named by its measured state, with words (not colour alone). ("attached": a
  // horizontal line has no height, which Playwright counts as hidden.)
  await figure.getByRole("img", { name: /^edge ↔ gate: up, handshake 1[234] s ago; configured ok$/ }).waitFor({ state: "attached" });
  await figure.getByRole("img", { name: /^db ↔ gate: stale, handshake 2 min ago; configured ok$/ }).waitFor({ state: "attached" });
  await figure.getByRole("img", { name: /^cam ↔ gate: down, handshake 66 min ago; configured ok$/ }).waitFor({ state: "attached" });
  await figure.getByRole("img", { name: /^cam ↔ edge: not measured; configured ok$/ }).waitFor({ state: "attached" });
  await figure.getByRole("img", { name: /^cam ↔ db: not measured; configured disabled$/ }).waitFor({ state: "attached" });
  const legend = figure.getByRole("list", { name: "Legend" });
  await expectText(legend, /up \(2\)\s+stale \(1\)\s+down \(1\)\s+not measured \(1\)\s+configured broken \(0\)\s+configured disabled \(1\)/);
  // Each state has its own pattern, so they differ without colour.
  const dashes = await figure
    .locator("svg.topo-svg line.topo-line")
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- runs in the page (DOM types are not in the Node typecheck)
    .evaluateAll((ls: any[]) => [...new Set(ls.map((l) => (globalThis as any).getComputedStyle(l).strokeDasharray as string))]);
  assert.equal(dashes.length, 5, `five patterns for five drawn kinds: ${dashes.join(" | ")}`);

  // Hover on a line: both directions' handshake age and transfer.
  const details = figure.getByLabel("Link details");
  await figure.getByRole("img", { name: /^edge ↔ gate/ }).hover({ force: true });
  await expectText(details, /gate → edge: handshake 1[234] s ago, received 1\.5 MiB, sent 300 KiB, endpoint 198\.51\.100\.2:51820/);
  await expectText(details, /edge → gate: handshake 1[345] s ago, received 300 KiB, sent 1\.5 MiB, endpoint 198\.51\.100\.1:51820/);
  // Keyboard focus on a node: its pairs, both directions each.
  await figure.getByRole("link", { name: /^Node cam / }).focus();
  await expectText(details, /gate → cam: handshake never, received 0 B, sent 1\.4 KiB/);
  await expectText(details, /cam → gate: handshake 66 min ago/);
  await screenshot(page, "mesh-links");

  // Opening the topology asked once; Check links asks again and says who reported.
  assert.equal(refreshes.length, 1, "the open topology asked for fresh reports once");
  await page.getByRole("button", { name: "Check links" }).click();
  await expectText(page.getByRole("status").filter({ hasText: /reported/ }), "2 of 3 hosts reported; 1 timed out: db.");
  assert.equal(refreshes.length, 2);
  await expectAccessible(page, "mesh-links");

  // Every 60 s while visible, never while hidden.
  const clocked = await h.newPage();
  await clocked.clock.install();
  await serve(clocked);
  await login(clocked);
  await clocked.goto(`/configs/${cfg.config_id}?view=topology`);
  await clocked.getByRole("figure", { name: "Topology" }).getByRole("img", { name: /^edge ↔ gate: up/ }).waitFor();
  const before = refreshes.length;
  await clocked.clock.runFor(60_000);
  await waitFor(() => refreshes.length === before + 1, "a refresh after 60 s");
  await setVisibility(clocked, "hidden");
  await clocked.clock.runFor(180_000);
  assert.equal(refreshes.length, before + 1, "no refresh while the tab is hidden");
  await setVisibility(clocked, "visible");
  await waitFor(() => refreshes.length === before + 2, "a refresh when the tab shows again");
  await clocked.close();

  // The bound node's page: its running peers like wg-easy's list, and its drift in words.
  await page.goto(`/configs/${cfg.config_id}/nodes/${ids["gate"]}`);
  const card = page.getByRole("region", { name: "Peers" });
  const table = card.getByRole("table");
  const row = (name: string | RegExp) => table.getByRole("row").filter({ has: page.getByRole("rowheader", { name }) });
  await expectText(row("edge"), /198\.51\.100\.2:51820\s*10\.66\.0\.2\/32\s*1[234] s ago\s*1\.5 MiB\s*300 KiB\s*every 25 s/);
  await expectText(row("db"), /192\.0\.2\.77:51820\s*10\.66\.0\.3\/32\s*2 min ago\s*4\.0 KiB\s*2\.0 KiB\s*off/);
  await expectText(row(/^xTIBA5rb… \(not a node of this config\)$/), /—\s*none\s*never\s*0 B\s*0 B\s*off/);
  await expectText(
    card.getByRole("note"),
    "Drift. Running peers differ from the staged config: missing cam (staged, not running); extra peer xTIBA5rb… (running, not staged); db's endpoint is 192.0.2.77:51820 (staged 198.51.100.3:51820).",
  );
  await expectAccessible(page, "node-peers");
  await screenshot(page, "node-peers");
});

/** Polls a condition the routes record (not the page), up to 5 s. */
async function waitFor(ok: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(ok(), what);
}

/** Makes the page's document say it is `state` and tells it so, as a browser does when the tab is switched. */
async function setVisibility(page: Page, state: "hidden" | "visible"): Promise<void> {
  await page.evaluate(`Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "${state}" }); document.dispatchEvent(new Event("visibilitychange"));`);
}
