/**
 * What a new operator meets on a node's page, in a real Chromium: a static node says it has no
 * agent (page and mesh table) and whether its config changed since it was last downloaded; its
 * private key and QR code are hidden until asked for; downloads are named after config and node,
 * with the wg-quick / awg-quick command that brings them up; the node can be renamed, its
 * endpoint edited and the node deleted from its page; a dynamic node's setup is the whole
 * sequence per OS, the release asset checked on a release host before a link is shown (spec §4
 * rules 2, 3, 5); the statechart is drawn at a size whose text can be read.
 */
import assert from "node:assert/strict";
import test from "node:test";
import type { Page } from "playwright-core";
import { VERSION } from "../../src/lib/version.js";
import { startReleaseHost } from "../helpers/release-host.js";
import { expectAccessible, expectText, login, screenshot, startConsole, waitLive, VIEWPORTS } from "./harness.js";

async function openNode(page: Page, configId: string, nodeId: string, name: string): Promise<void> {
  await page.goto(`/configs/${configId}/nodes/${nodeId}`);
  await expectText(page.getByRole("heading", { level: 1 }), name);
}

/** The `<dd>` of the fact named `term` in the page's facts list. */
function fact(page: Page, term: string) {
  return page.locator(".facts > div").filter({ has: page.getByRole("term").filter({ hasText: new RegExp(`^${term}$`) }) }).getByRole("definition");
}

test("a static node: 'static (no agent)' on its page and in the mesh table; its private key and QR code hidden until asked; downloads named <config>-<node>.conf with the wg-quick command; 'changed since last download' with the versions", { timeout: 120_000 }, async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "Office mesh", tunnel_protocol: "wireguard", network_cidr: "10.70.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "laptop 7", mode: "static", public_address: "192.0.2.7", listen_port: 51820 });
  const staged = await h.api("GET", `/api/v1/configs/${cfg.config_id}/nodes/${node.node_id}/config`);
  const privateKey = /^PrivateKey = (\S+)$/m.exec(staged.config_text)?.[1] ?? "";
  assert.notEqual(privateKey, "");

  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await openNode(page, cfg.config_id, node.node_id, "laptop 7");
  await expectText(fact(page, "Agent"), "static (no agent)");
  await expectText(fact(page, "Last download"), "never");

  // The private key is not on the screen until asked for; the QR code (which holds it) neither.
  const text = page.getByLabel("Config text", { exact: true });
  await expectText(text, /PrivateKey = •+ \(hidden\)/);
  assert.ok(!(await text.innerText()).includes(privateKey), "the private key is hidden by default");
  assert.equal(await page.getByRole("img", { name: /^QR code/ }).count(), 0, "no QR code by default");
  await page.getByRole("button", { name: "Show private key" }).click();
  await expectText(text, new RegExp(`PrivateKey = ${privateKey.replace(/[+/=]/g, "\\$&")}`));
  await page.getByRole("button", { name: "Hide private key" }).click();
  await page.getByRole("button", { name: "Show QR codes" }).click();
  await page.getByRole("img", { name: "QR code for the WireGuard app: laptop 7" }).waitFor();
  await page.getByRole("button", { name: "Hide QR codes" }).click();
  assert.equal(await page.getByRole("img", { name: /^QR code/ }).count(), 0, "hidden again");

  // The download is named after the config and the node; wg-quick brings it up under the node's interface name.
  await expectText(page.getByLabel("wg-quick command"), "sudo mkdir -p /etc/wireguard && sudo install -m 600 Office-mesh-laptop-7.conf /etc/wireguard/svc0.conf && sudo wg-quick up svc0");
  await page.getByRole("button", { name: "Create download link" }).click();
  const link = page.getByRole("link", { name: "Download Office-mesh-laptop-7.conf", exact: true });
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  assert.equal(download.suggestedFilename(), "Office-mesh-laptop-7.conf");
  assert.match(await page.getByRole("textbox", { name: "curl command" }).inputValue(), /^curl -fsSL -o Office-mesh-laptop-7\.conf '/);

  // The download is recorded: the page says which version, live.
  await expectText(fact(page, "Last download"), /^v1, /);
  await screenshot(page, "node-static-downloaded");
  // A new peer re-stages the node: the copy on its host is stale, and the page says so.
  await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "gw", mode: "static", public_address: "192.0.2.8", listen_port: 51820 });
  await expectText(fact(page, "Last download"), /Changed since last download: staged v2, downloaded v1/);
  await expectAccessible(page, "node-static-walkthrough");
  await screenshot(page, "node-static-changed");

  // The mesh table: no "offline"/"unknown"/"never" for nodes that have no agent.
  await page.goto(`/configs/${cfg.config_id}`);
  const row = page.getByRole("row").filter({ has: page.getByRole("link", { name: "laptop 7", exact: true }) });
  await expectText(row, /static \(no agent\).*static \(no agent\)/s);
  const rowText = await row.innerText();
  assert.ok(!/\boffline\b|\bunknown\b|\bnever\b/.test(rowText), rowText);
  await screenshot(page, "mesh-static-no-agent");

  // An AmneziaWG config's static node gets the awg-quick command.
  const awg = await h.api("POST", "/api/v1/configs", { name: "lab", tunnel_protocol: "awg_2", network_cidr: "10.71.0.0/24" });
  const awgNode = await h.api("POST", `/api/v1/configs/${awg.config_id}/nodes`, { name: "box", mode: "static", interface_name: "awg0" });
  await openNode(page, awg.config_id, awgNode.node_id, "box");
  await expectText(page.getByLabel("awg-quick command"), "sudo mkdir -p /etc/amnezia/amneziawg && sudo install -m 600 lab-box.conf /etc/amnezia/amneziawg/awg0.conf && sudo awg-quick up awg0");
});

test("the node page renames a node, edits its tunnel address, public endpoint and hub flag, and deletes it behind a confirmation, then shows the config's mesh page", { timeout: 120_000 }, async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "fleet", tunnel_protocol: "wireguard", network_cidr: "10.72.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "edge-a", mode: "static" });
  const dyn = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "edge-d", mode: "dynamic" });
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await openNode(page, cfg.config_id, node.node_id, "edge-a");

  const form = page.getByRole("form", { name: "Edit the node" });
  await form.getByLabel("Name", { exact: true }).fill("edge-b");
  await form.getByLabel("Public address").fill("198.51.100.7");
  await form.getByLabel("Listen port").fill("51999");
  await form.getByRole("button", { name: "Save changes" }).click();
  await expectText(form.getByRole("status"), /^Saved\./);
  await expectText(page.getByRole("heading", { level: 1 }), "edge-b");
  await expectText(fact(page, "Endpoint"), "198.51.100.7:51999");
  const saved = await h.api("GET", `/api/v1/configs/${cfg.config_id}/nodes/${node.node_id}`);
  assert.deepEqual([saved.name, saved.public_address, saved.listen_port], ["edge-b", "198.51.100.7", 51999]);
  // A refused value says why, next to the form.
  await form.getByLabel("Name", { exact: true }).fill("edge-d");
  await form.getByRole("button", { name: "Save changes" }).click();
  await expectText(form.getByRole("alert"), /already exists/);
  await form.getByLabel("Name", { exact: true }).fill("edge-b");
  // The tunnel address: one outside the network is refused by its label; a free one re-stages.
  await form.getByLabel("Tunnel address").fill("10.99.0.5");
  await form.getByRole("button", { name: "Save changes" }).click();
  await expectText(form.getByRole("alert"), /^Tunnel address must be a host address inside 10\.72\.0\.0\/24/);
  assert.equal(await form.getByLabel("Tunnel address").getAttribute("aria-invalid"), "true");
  await form.getByLabel("Tunnel address").fill("10.72.0.50");
  await form.getByLabel(/^Hub/).check();
  await form.getByRole("button", { name: "Save changes" }).click();
  await expectText(form.getByRole("status"), /^Saved\./);
  await expectText(fact(page, "Tunnel address"), "10.72.0.50");
  const moved = await h.api("GET", `/api/v1/configs/${cfg.config_id}/nodes/${node.node_id}`);
  assert.deepEqual([moved.address, moved.hub], ["10.72.0.50", true]);
  await expectAccessible(page, "node-settings");
  await screenshot(page, "node-settings");

  await page.getByRole("button", { name: "Delete node" }).click();
  const dialog = page.getByRole("dialog", { name: "Delete edge-b?" });
  await dialog.waitFor();
  await screenshot(page, "node-delete-confirm");
  await dialog.getByRole("button", { name: "Delete edge-b" }).click();
  await page.waitForURL(new RegExp(`/configs/${cfg.config_id}$`), { waitUntil: "commit" });
  await expectText(page.getByRole("heading", { level: 1 }), "fleet");
  const left = await h.api("GET", `/api/v1/configs/${cfg.config_id}`);
  assert.deepEqual(
    left.nodes.map((n: { name: string }) => n.name),
    ["edge-d"],
  );

  // A dynamic node's page has the same settings.
  await openNode(page, cfg.config_id, dyn.node_id, "edge-d");
  await page.getByRole("form", { name: "Edit the node" }).waitFor();
  await page.getByRole("button", { name: "Delete node" }).waitFor();
});

test("spec §4 rules 2, 3, 5: a dynamic node's setup shows the whole sequence per OS, and a release-host link only for an asset the release host has", { timeout: 120_000 }, async (t) => {
  const linuxAmd64 = `svc-client-linux-amd64-v${VERSION}.zip`;
  const release = await startReleaseHost(t, { [`v${VERSION}`]: [linuxAmd64] });
  const h = await startConsole(t, { releaseApiUrl: release.apiUrl });
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "edge-net", tunnel_protocol: "wireguard", network_cidr: "10.73.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "edge-1", mode: "dynamic" });
  const status = await h.api("GET", "/api/v1/system/status");
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await openNode(page, cfg.config_id, node.node_id, "edge-1");

  // One tab per OS the client is built for; Linux first.
  const tabs = page.getByRole("tablist", { name: "Operating system of the node's host" }).getByRole("tab");
  assert.deepEqual(await tabs.allInnerTexts(), ["Linux", "macOS", "Windows"]);
  await expectText(page.getByLabel("Install Node.js"), /nodesource.*setup_lts\.x/);
  await expectText(page.getByLabel("Install WireGuard tools"), "sudo apt-get install -y wireguard-tools");

  // The release host has this version's linux/amd64 client: said, then linked.
  await expectText(page.getByRole("status").filter({ hasText: /release host has/ }), `The release host has ${linuxAmd64}.`);
  assert.equal(await page.getByRole("link", { name: `Download ${linuxAmd64}` }).getAttribute("href"), `${status.update.release_download_url}/v${VERSION}/${linuxAmd64}`);
  assert.ok(release.requests.includes(`/repos/svc-mesh/svc/releases/tags/v${VERSION}`), "the backend asked the release host");
  // …but not linux/arm64: no link, the reason, and the local build as the way out.
  await page.getByLabel("Architecture").selectOption("arm64");
  const linuxArm64 = `svc-client-linux-arm64-v${VERSION}.zip`;
  await expectText(page.getByRole("alert"), new RegExp(`^The release host has no ${linuxArm64.replace(/[.]/g, "\\.")}: release v`));
  assert.equal(await page.getByRole("link", { name: `Download ${linuxArm64}` }).count(), 0, "no link to a missing asset");
  await screenshot(page, "node-setup-release-missing");
  await page.getByRole("button", { name: "Use the client built by this server" }).click();
  assert.equal(await page.getByRole("radio", { name: "Built by this server" }).isChecked(), true);
  await page.getByRole("radio", { name: "Release host" }).check();
  await page.getByLabel("Architecture").selectOption("amd64");

  // Bind from the unpacked directory, as root; then what "bound" looks like.
  await page.getByRole("button", { name: "Generate bind command" }).click();
  await expectText(page.getByLabel("Bind command", { exact: true }), /^cd svc-client && sudo \.\/svcctl bind --server http:\/\/\S+ --token \S+$/);
  await expectText(page.getByLabel("Status command"), "sudo ./svcctl status");
  await expectText(page.getByRole("region", { name: "4. Check that it is bound" }), /bound node … of config …/);
  await expectAccessible(page, "node-setup-linux");
  await screenshot(page, "node-setup-linux");

  // Windows: winget, svcctl.cmd from an elevated prompt.
  await page.getByRole("tab", { name: "Windows" }).click();
  await expectText(page.getByLabel("Install Node.js"), "winget install --id OpenJS.NodeJS.LTS -e");
  await expectText(page.getByLabel("Install WireGuard"), "winget install --id WireGuard.WireGuard -e");
  await expectText(page.getByLabel("Bind command", { exact: true }), /^cd svc-client && svcctl\.cmd bind --server \S+ --token \S+$/);
  assert.match(page.url(), /[?&]os=windows/);
  await screenshot(page, "node-setup-windows");

  // An AmneziaWG config asks for the AmneziaWG tools instead.
  const awg = await h.api("POST", "/api/v1/configs", { name: "awg-net", tunnel_protocol: "awg_2", network_cidr: "10.74.0.0/24" });
  const awgNode = await h.api("POST", `/api/v1/configs/${awg.config_id}/nodes`, { name: "awg-1", mode: "dynamic" });
  await openNode(page, awg.config_id, awgNode.node_id, "awg-1");
  await expectText(page.getByLabel("Install AmneziaWG"), /ppa:amnezia\/ppa.*amneziawg/);
});

test("the statechart is drawn at full size in a scrolling frame: state names and edge labels are at least 11 px and no edge label covers a state name", { timeout: 120_000 }, async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "sc", tunnel_protocol: "wireguard", network_cidr: "10.75.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "d1", mode: "dynamic" });
  for (const viewport of [VIEWPORTS.desktop, VIEWPORTS.phone]) {
    const page = await h.newPage({ viewport });
    await login(page);
    await waitLive(page);
    await page.goto(`/configs/${cfg.config_id}/nodes/${node.node_id}?tab=machine`);
    const figure = page.getByRole("figure", { name: "Node statechart" });
    await figure.locator(".react-flow__edge-text, .sc-edge-label").first().waitFor();
    // A string, not a function: the test's TypeScript transform would name inner functions with a helper the page lacks.
    const found = (await page.evaluate(`(() => {
      const el = document.querySelector('figure[aria-label="Node statechart"]');
      const rects = (sel) => [...el.querySelectorAll(sel)].map((n) => ({ text: n.textContent, r: n.getBoundingClientRect() }));
      const names = rects(".sc-label");
      const labels = rects(".react-flow__edge-text, .sc-edge-label > div");
      const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
      const covered = [];
      for (const l of labels) for (const n of names) if (overlap(l.r, n.r)) covered.push(l.text + " over " + n.text);
      return { smallestName: Math.min(...names.map((n) => n.r.height)), smallestLabel: Math.min(...labels.map((l) => l.r.height)), covered, count: labels.length };
    })()`)) as { smallestName: number; smallestLabel: number; covered: string[]; count: number };
    if (viewport === VIEWPORTS.desktop) await screenshot(page, "node-statechart");
    assert.ok(found.count > 5, `edge labels drawn (${found.count})`);
    assert.ok(found.smallestName >= 11, `state names at least 11 px high (smallest ${found.smallestName})`);
    assert.ok(found.smallestLabel >= 11, `edge labels at least 11 px high (smallest ${found.smallestLabel})`);
    assert.deepEqual(found.covered, [], "no edge label covers a state name");
  }
});
