/**
 * The configs page, the mesh page and the static node page in a real browser, with their axe checks
 * and screenshots. The real service in-process (SQLite file, embedded aedes), Debian's Chromium;
 * the agents of the protocol-switch test are MQTT.js clients with a real bind profile
 * (test/control/agent-harness.ts).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import type { Locator, Page } from "playwright-core";
import { bind, connectAgent, envelope, nextMessage } from "../control/agent-harness.js";
import type { SseServer } from "../events/sse-harness.js";
import { requireSystem } from "../helpers/system.js";
import { expectAccessible, expectText, login, screenshot, startConsole, UI_TIMEOUT_MS, waitLive } from "./harness.js";
import { decodeQr } from "./qr.js";

/**
 * Waits until exactly `count` elements match `locator`: the `count`-th is there and the next one
 * is not (Playwright polls the page; no sleeping). Fails with how many it saw.
 */
async function expectCount(locator: Locator, count: number, label: string): Promise<void> {
  try {
    if (count > 0) await locator.nth(count - 1).waitFor({ state: "attached", timeout: UI_TIMEOUT_MS });
    await locator.nth(count).waitFor({ state: "detached", timeout: UI_TIMEOUT_MS });
  } catch {
    assert.fail(`expected ${count} ${label}, saw ${await locator.count()}`);
  }
}

/** A config text whose first line that is not a `#` comment is `[Interface]`. */
const FIRST_SECTION_INTERFACE = /^(#[^\n]*\n)*\[Interface\]\n/;

async function addStaticNode(page: Page, name: string, publicAddress: string): Promise<void> {
  await page.getByLabel("Node name").fill(name);
  await page.getByLabel("Node mode").selectOption("static");
  await page.getByLabel("Public address").fill(publicAddress);
  await page.getByLabel("Listen port", { exact: true }).fill("51820");
  await page.getByRole("button", { name: "Add node" }).click();
  await expectText(page.getByRole("status").filter({ hasText: /^Node / }), `Node ${name} added.`);
}

test("spec §1.4, §1.5, §2.4, §6.5 (broken-link indicators from connections): a config and three static nodes made in the console show three rows, three nodes and three ok links; the node's config downloads through the page's link and curl command and is drawn as a QR code the WireGuard app reads", async (t) => {
  if (!requireSystem(t, { binaries: ["zbarimg"] })) return;
  const h = await startConsole(t);
  if (!h) return;
  // The curl command is for another host: it names the public URL, here the address the test listens on.
  await h.api("PUT", "/api/v1/settings/server", { public_url: h.baseUrl });
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.getByRole("link", { name: "Configs", exact: true }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "Configs");
  await page.getByText("No configs yet").waitFor();

  // An API error names the field by its label.
  await page.getByLabel("Name", { exact: true }).fill("lab");
  await page.getByLabel("Network CIDR").fill("10.40.0.0/33");
  await page.getByRole("button", { name: "Create config" }).click();
  await expectText(page.getByRole("alert"), /network_cidr|CIDR|prefix/i);

  await page.getByLabel("Network CIDR").fill("10.40.0.0/24");
  await page.getByRole("button", { name: "Create config" }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "lab");
  await page.getByText("No nodes yet. Add the first one above.").waitFor();

  // The add-node form is open already: the config has no node.
  await addStaticNode(page, "n1", "n1.example.net");
  await addStaticNode(page, "n2", "192.0.2.2");
  await addStaticNode(page, "n3", "n3.example.net");

  // The table: three rows, each with the backend's values.
  const table = page.getByRole("table");
  await expectCount(table.getByRole("rowheader"), 3, "node rows");
  for (const name of ["n1", "n2", "n3"]) await table.getByRole("link", { name, exact: true }).waitFor();
  const rowN2 = table.getByRole("row").filter({ has: page.getByRole("link", { name: "n2", exact: true }) });
  const cells = (await rowN2.getByRole("cell").allInnerTexts()).map((c) => c.trim());
  assert.equal(cells.length, 9, cells.join(" | "));
  assert.deepEqual([cells[1], cells[3], cells[4], cells[5], cells[7], cells[8]], ["static", "192.0.2.2:51820", "static (no agent)", "static (no agent)", "—", "—"]);
  assert.match(cells[2]!, /^10\.40\.0\.\d+$/);
  assert.match(cells[6]!, /^static v\d+$/, "a static node has no sync state (spec §3.5: null for static), shown as static");
  await expectText(page.getByRole("status").filter({ hasText: /pairs,/ }), "3 pairs, 0 broken");

  // Filters live in the URL: a reload keeps them.
  await page.getByLabel("Search nodes").fill("n3");
  await expectCount(table.getByRole("rowheader"), 1, "rows after the search");
  assert.match(page.url(), /[?&]q=n3/);
  await page.reload();
  await expectCount(page.getByRole("table").getByRole("rowheader"), 1, "rows after the reload");
  await page.getByLabel("Search nodes").fill("");
  await expectCount(table.getByRole("rowheader"), 3, "rows without a search");
  await expectAccessible(page, "mesh");
  await screenshot(page, "mesh");

  // The topology: three nodes, three pairs coloured by the integrity the backend reported.
  await page.getByRole("button", { name: "Topology" }).click();
  const figure = page.getByRole("figure", { name: "Topology" });
  await expectCount(figure.getByRole("link", { name: /^Node / }), 3, "topology nodes");
  // No host has reported its peers: each line says so, and that the pair is configured ok.
  await expectCount(figure.getByRole("img", { name: /^n\d ↔ n\d: not measured; configured ok$/ }), 3, "ok links");
  assert.match(page.url(), /view=topology/);
  await expectAccessible(page, "mesh-topology");
  await screenshot(page, "mesh-topology");

  // A disabled pair is drawn as disabled, straight from the pair's integrity.
  await page.getByRole("button", { name: "Disable pair n1 – n2" }).click();
  await expectCount(figure.getByRole("img", { name: /^n1 ↔ n2: not measured; configured disabled$/ }), 1, "disabled link");

  // The static node page: config text, download link, curl command, QR code.
  await page.getByRole("button", { name: "Table" }).click();
  await page.getByRole("table").getByRole("link", { name: "n1", exact: true }).click();
  await expectText(page.getByRole("heading", { level: 1 }), "n1");
  // The renderer puts one `# Managed by svc` comment line first (src/domain/render.ts, its golden
  // files): the first section is [Interface].
  await expectText(page.getByLabel("Config text"), FIRST_SECTION_INTERFACE);
  await page.getByRole("button", { name: "Create download link" }).click();
  const link = page.getByRole("link", { name: /^Download .*\.conf$/ });
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  const file = await download.path();
  const text = readFileSync(file, "utf8");
  assert.match(text, FIRST_SECTION_INTERFACE, "the downloaded config starts with [Interface] (after its comment line)");
  assert.match(text, /\[Peer\]/);
  // The copy-paste command works as pasted, without a session (spec §4 rule 1: a token link).
  const curl = await page.getByRole("textbox", { name: "curl command" }).inputValue();
  assert.match(curl, /^curl -fsSL -o lab-n1\.conf 'http:\/\/127\.0\.0\.1:\d+\/api\/v1\/configs\/.+\/config\/download\?download_token=.+'$/);
  const dir = mkdtempSync(join(tmpdir(), "svc-curl-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Async: the service answering curl runs in this process.
  await promisify(execFile)("bash", ["-c", curl], { cwd: dir, timeout: UI_TIMEOUT_MS });
  assert.equal(readFileSync(join(dir, "lab-n1.conf"), "utf8"), text);
  // The WireGuard app's QR code, drawn only when asked for (it holds the private key), is the
  // downloaded config, read back by a real decoder.
  await page.getByRole("button", { name: "Show QR codes" }).click();
  assert.equal(await decodeQr(page.getByRole("img", { name: "QR code for the WireGuard app: n1" })), text);
  await expectAccessible(page, "node-static");
  await screenshot(page, "node-static");
});

test("spec §2.2, §6.5 table (config.list.updated: sidebar list): the configs page searches by name, deletes with a confirmation, and follows another operator's changes live", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  await h.api("POST", "/api/v1/configs", { name: "office", tunnel_protocol: "wireguard", network_cidr: "10.50.0.0/24" });
  await h.api("POST", "/api/v1/configs", { name: "lab-eu", tunnel_protocol: "awg_2", network_cidr: "10.51.0.0/24" });
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto("/configs");
  const table = page.getByRole("table");
  await expectCount(table.getByRole("rowheader"), 2, "configs");
  await page.getByLabel("Search configs").fill("awg");
  await expectCount(table.getByRole("rowheader"), 1, "configs matching awg");
  await table.getByRole("link", { name: "lab-eu" }).waitFor();
  await page.getByLabel("Search configs").fill("");
  await expectAccessible(page, "configs");
  await screenshot(page, "configs");

  // Created elsewhere: appears without a reload.
  await h.api("POST", "/api/v1/configs", { name: "home", tunnel_protocol: "wireguard", network_cidr: "10.52.0.0/24" });
  await expectCount(table.getByRole("rowheader"), 3, "configs after a create elsewhere");

  // Delete: cancel keeps it, confirm removes it.
  await page.getByRole("button", { name: "Delete config office" }).click();
  await page.getByRole("dialog", { name: "Delete config office?" }).waitFor();
  await page.getByRole("button", { name: "Cancel" }).click();
  assert.equal(await table.getByRole("link", { name: "office" }).count(), 1);
  await page.getByRole("button", { name: "Delete config office" }).click();
  await page.getByRole("button", { name: "Delete config", exact: true }).click();
  await expectCount(table.getByRole("rowheader"), 2, "configs after the delete");
  const left = (await h.api("GET", "/api/v1/configs")).configs.map((c: { name: string }) => c.name).sort();
  assert.deepEqual(left, ["home", "lab-eu"]);
});

test("spec §3.5 (the backend computes sync, the console shows it), §2.2: switching the protocol after a confirmation naming how many nodes re-stage turns every latest node pending", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "fleet", tunnel_protocol: "wireguard", network_cidr: "10.60.0.0/24" });
  const s = h as unknown as SseServer;
  const agents = [];
  for (const name of ["edge-a", "edge-b"]) {
    const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name, mode: "dynamic", public_address: `${name}.example.net` });
    const profile = await bind(s, cfg.config_id, node.node_id);
    const agent = await connectAgent(s, profile);
    t.after(() => agent.end(true));
    agents.push({ profile, agent });
  }
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${cfg.config_id}`);
  const table = page.getByRole("table");
  const row = (name: string) => table.getByRole("row").filter({ has: page.getByRole("link", { name, exact: true }) });
  for (const name of ["edge-a", "edge-b"]) await expectText(row(name), /pending v\d/);

  // Push config to both (bulk action); each agent applies it, so both become latest.
  const pushes = agents.map(({ profile, agent }) => nextMessage(agent, profile.topics.config_push!).then((m) => ({ m, profile, agent })));
  await page.getByRole("checkbox", { name: "Select all shown nodes" }).check();
  await page.getByRole("button", { name: "Push config to 2 dynamic nodes" }).click();
  await expectText(page.getByRole("status").filter({ hasText: /Config push/ }), "Config push sent to 2 nodes.");
  for (const { m, profile, agent } of await Promise.all(pushes)) {
    await agent.publishAsync(profile.topics.config_push_ack!, envelope(profile, "ack", { status: "applied", message: "", action: "push_config" }, m.request_id), { qos: 1 });
  }
  for (const name of ["edge-a", "edge-b"]) await expectText(row(name), /latest v\d/);

  // The switch asks first and says how many nodes re-stage.
  await page.getByRole("button", { name: "Switch to awg_2" }).click();
  const dialog = page.getByRole("dialog", { name: "Switch fleet to awg_2?" });
  await expectText(dialog, /2 nodes are re-staged/);
  await expectAccessible(page, "mesh-protocol-dialog");
  await dialog.getByRole("button", { name: "Switch to awg_2" }).click();
  await expectText(page.getByRole("paragraph").filter({ hasText: /protocol/ }), /protocol awg_2/);
  for (const name of ["edge-a", "edge-b"]) await expectText(row(name), /pending v\d/);
  const nodes = (await h.api("GET", `/api/v1/configs/${cfg.config_id}/nodes`)).nodes as Array<{ client: { config_version_state: string } }>;
  assert.deepEqual(nodes.map((n) => n.client.config_version_state), ["pending", "pending"], "what the page shows is what the backend says");
  await screenshot(page, "mesh-dynamic");
});
