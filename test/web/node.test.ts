/**
 * Console tests of the node page, with their axe checks and screenshots: the initialization page
 * of a dynamic node, binding with the real `svcctl` (bind, then `agent run` over the tunnel
 * stand-ins of test/fixtures/awg-standin) flipping it to the control page without a reload
 * (spec §3.2), the control log live without loss or duplicates across a reload (spec §6.5
 * rule 7), and MQTT switched off (spec §1.7 bullet 7).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import type { Page } from "playwright-core";
import { ManualClock } from "../../src/lib/clock.js";
import { testSettings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createServer } from "../../src/server.js";
import { bind, connectAgent, envelope } from "../control/agent-harness.js";
import type { SseServer } from "../events/sse-harness.js";
import { bindCommandInvocation, freeTcpPort, svcctlPrefix } from "../helpers/agent.js";
import { startReleaseHost } from "../helpers/release-host.js";
import { VERSION } from "../../src/lib/version.js";
import { STANDIN, start } from "./processes.js";
import { ADMIN_PASSWORD, expectAccessible, expectText, login, screenshot, startConsole, storedToken, waitLive, type Backend } from "./harness.js";

/** spec §3.2: the control page shows `online` this soon after the agent starts. */
const ONLINE_WITHIN_MS = 5_000;

/** The node page of `configId/nodeId`, reached through the address bar. */
async function openNode(page: Page, configId: string, nodeId: string, name: string): Promise<void> {
  await page.goto(`/configs/${configId}/nodes/${nodeId}`);
  await expectText(page.getByRole("heading", { level: 1 }), name);
}

/** Marks the document; {@link assertNotReloaded} fails if the page was loaded again since. */
async function markDocument(page: Page): Promise<void> {
  await page.evaluate("window.__svcTestMark = true");
}
async function assertNotReloaded(page: Page): Promise<void> {
  assert.equal(await page.evaluate("window.__svcTestMark === true"), true, "the page was reloaded");
}

test("spec §3.2, §3.1, §4 rules 2/5/6, §9 rule 3: the initialization page's bind command, run with the real svcctl, flips the page to the control page without a reload; online, start accepted → applied, wg_show output, SIGKILL → offline and the page stays", { timeout: 240_000 }, async (t) => {
  const port = await freeTcpPort("127.0.0.1");
  const baseUrl = `http://127.0.0.1:${port}`;
  // The release host has this version's Linux amd64 and macOS arm64 clients (spec §4 rule 2).
  const release = await startReleaseHost(t, { [`v${VERSION}`]: [`svc-client-linux-amd64-v${VERSION}.zip`, `svc-client-darwin-arm64-v${VERSION}.zip`] });
  const h = await startConsole(t, { httpPort: port, publicUrl: baseUrl, releaseApiUrl: release.apiUrl });
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "edge-net", tunnel_protocol: "wireguard", network_cidr: "10.50.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "edge-1", mode: "dynamic", public_address: "192.0.2.10", listen_port: 51820 });
  const status = await h.api("GET", "/api/v1/system/status");
  const version: string = status.update.version;

  const page = await h.newPage();
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl });
  await login(page);
  await waitLive(page);
  await openNode(page, cfg.config_id, node.node_id, "edge-1");
  await page.getByRole("heading", { name: "2. Download and unpack the client" }).waitFor();

  // spec §4 rules 2 and 5: once the backend found the asset on the release host, its URL is built
  // in the browser from the version and the release download base of system status; the command
  // is curl -fL -o + unzip -oq -d only.
  const assetName = `svc-client-linux-amd64-v${version}.zip`;
  const releaseLink = page.getByRole("link", { name: `Download ${assetName}` });
  assert.equal(await releaseLink.getAttribute("href"), `${status.update.release_download_url}/v${version}/${assetName}`);
  await page.getByRole("tab", { name: "macOS" }).click();
  await page.getByLabel("Architecture").selectOption("arm64");
  const darwinAsset = `svc-client-darwin-arm64-v${version}.zip`;
  const darwinUrl = `${status.update.release_download_url}/v${version}/${darwinAsset}`;
  assert.equal(await page.getByRole("link", { name: `Download ${darwinAsset}` }).getAttribute("href"), darwinUrl);
  await expectText(page.getByLabel("Download command", { exact: true }), `curl -fL -o ${darwinAsset} ${darwinUrl} && unzip -oq ${darwinAsset} -d svc-client`);
  await page.getByRole("tab", { name: "Linux" }).click();
  await page.getByLabel("Architecture").selectOption("amd64");
  await expectAccessible(page, "node-init");

  // spec §4 rule 6: local_build asks download-grant; the link and the copied command carry only
  // the 5-minute client_artifact file token, never the admin session.
  await page.getByRole("radio", { name: "Built by this server" }).check();
  await page.getByRole("button", { name: "Get download link" }).click();
  const localLink = page.getByRole("link", { name: `Download ${assetName}` });
  await localLink.waitFor({ timeout: 120_000 });
  const localHref = (await localLink.getAttribute("href")) ?? "";
  assert.match(localHref, /^\/api\/v1\/tools\/download\/client-artifacts\/[a-z0-9_-]+\?download_token=[^&]+$/);
  const localCommand = (await page.getByLabel("Download command", { exact: true }).innerText()).trim();
  assert.ok(localCommand.includes(`${baseUrl}${localHref}`), localCommand);
  assert.match(localCommand, /^curl -fL -o \S+ \S+ && unzip -oq \S+ -d svc-client$/);
  const token = await storedToken(page);
  assert.ok(token !== null && !localCommand.includes(token) && !localHref.includes(token), "no admin token in the link or command");
  await expectText(page.locator("time.countdown").first(), /^expires in [45]:\d\d$/);
  const zip = await fetch(new URL(localHref, baseUrl));
  assert.equal(zip.status, 200);
  assert.equal(Buffer.from(await zip.arrayBuffer()).subarray(0, 2).toString("latin1"), "PK");
  await screenshot(page, "node-init-local-build");
  await page.getByRole("radio", { name: "Release host" }).check();

  // spec §4 rule 10: the bind command with its expiry counting down, copied with the button.
  await page.getByRole("button", { name: "Generate bind command" }).click();
  const bindPre = page.getByLabel("Bind command", { exact: true });
  // Run from the unpacked client as root: svcctl is not on the PATH, and bind installs a system service.
  await expectText(bindPre, new RegExp(`^cd svc-client && sudo \\./svcctl bind --server ${baseUrl.replace(/[.]/g, "\\.")} --token \\S+$`));
  await expectText(page.locator("time.countdown").last(), /^expires in [45]:\d\d$/);
  await page.getByRole("button", { name: "Copy bind command" }).click();
  await expectText(page.getByRole("button", { name: "Copy bind command" }), /^Copied/);
  const copied = (await page.evaluate("navigator.clipboard.readText()")) as string;
  assert.equal(copied, (await bindPre.innerText()).trim());
  await screenshot(page, "node-init");

  // The copied command, word for word, through the real CLI (`svcctl` → node --import tsx svcctl.ts).
  await markDocument(page);
  const dir = mkdtempSync(join(tmpdir(), "svc-web-agent-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const profileDir = join(dir, "profile");
  const inv = bindCommandInvocation(copied.replace(/^cd svc-client && sudo \.\//, ""), profileDir);
  const bindRun = start(t, inv.cmd, inv.args);
  assert.equal(await bindRun.exited, 0, bindRun.output());

  // spec §3.2: client_initialized=true → the control page, without a reload (SSE only).
  await page.getByRole("heading", { name: "Endpoint", level: 2, exact: true }).waitFor();
  await assertNotReloaded(page);
  assert.equal(await page.getByRole("heading", { name: "2. Download and unpack the client" }).count(), 0);
  await expectText(page.getByRole("definition").filter({ has: page.locator(".badge") }), "offline");

  // `svcctl agent run` with the stand-in tunnel tools first on PATH (wg and wg-quick).
  const bin = join(dir, "bin");
  mkdirSync(bin);
  symlinkSync(join(STANDIN, "awg"), join(bin, "wg"));
  symlinkSync(join(STANDIN, "awg-quick"), join(bin, "wg-quick"));
  const prefix = svcctlPrefix(profileDir);
  const agent = start(t, prefix.cmd, [...prefix.args, "agent", "run"], {
    PATH: `${bin}:${process.env["PATH"] ?? ""}`,
    SVC_STANDIN_STATE: join(dir, "standin-state"),
    SVC_AGENT_TUNNEL_DIR: join(dir, "tunnels"),
  });
  await agent.printed("agent starting");
  const presence = page.getByRole("definition").filter({ has: page.locator(".badge") });
  await expectText(presence, "online", ONLINE_WITHIN_MS);
  await assertNotReloaded(page);

  // Push the config (so the interface has one), then Start: its log row goes accepted → applied.
  const log = page.getByRole("table", { name: "Control log", exact: true });
  await page.getByRole("button", { name: "Push config" }).click();
  await expectText(log.getByRole("row").filter({ has: page.getByRole("cell", { name: "push_config", exact: true }) }), /applied/);
  await page.getByRole("button", { name: "Start", exact: true }).click();
  const startRow = log.getByRole("row").filter({ has: page.getByRole("cell", { name: "start", exact: true }) });
  await expectText(startRow, /accepted → applied/);
  await expectText(page.getByRole("definition").filter({ hasText: /^(running|stopped|unknown)$/ }), "running");
  // spec §9 rule 3: the client version reported at bind and in detect ACKs is shown.
  await expectText(page.getByRole("group").or(page.locator("dl.facts-grid")).first(), /Client version\s*\d+\.\d+\.\d+/);

  // wg_show: the output streamed from control-log events into the monospace panel.
  await page.getByRole("button", { name: "Run wg show" }).click();
  await expectText(page.getByLabel("wg show output"), /interface: /);
  await expectAccessible(page, "node-control");
  await screenshot(page, "node-control");

  // spec §3.1: the will message → offline, without a reload; the page stays the control page.
  agent.proc.kill("SIGKILL");
  await agent.exited;
  await expectText(presence, "offline");
  await assertNotReloaded(page);
  await page.getByRole("heading", { name: "Endpoint", level: 2, exact: true }).waitFor();
  assert.equal(await page.getByRole("heading", { name: "2. Bind the client" }).count(), 0);
  await expectText(log.getByRole("row").filter({ hasText: "offline" }).first(), /event\s*offline/);

  // spec §3.1/§3.2 reset-client, behind a confirmation: client_initialized=false → back to the
  // initialization page, still without a reload.
  await page.getByRole("button", { name: "Reset client" }).click();
  const dialog = page.getByRole("dialog", { name: "Reset the client of edge-1?" });
  await dialog.waitFor();
  await screenshot(page, "node-control-reset-confirm");
  await dialog.getByRole("button", { name: "Reset the client" }).click();
  await page.getByRole("heading", { name: "2. Download and unpack the client" }).waitFor();
  await assertNotReloaded(page);
  assert.equal((await h.api("GET", `/api/v1/configs/${cfg.config_id}/nodes/${node.node_id}`)).client.client_initialized, false);
});

/** The messages of the control log's rows matching `^evt-\d+$`, as the page shows them. */
async function eventMessages(page: Page): Promise<string[]> {
  return page.getByRole("table", { name: "Control log", exact: true }).getByRole("cell", { name: /^evt-\d+$/ }).allInnerTexts();
}

test("spec §6.5 rule 7: reloading the control page in the middle of a stream of log events loses no row and duplicates none", { timeout: 120_000 }, async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const s = h as unknown as SseServer; // the control harness needs baseUrl, token and server (the broker's port)
  const cfg = await h.api("POST", "/api/v1/configs", { name: "stream", tunnel_protocol: "wireguard", network_cidr: "10.51.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "talker", mode: "dynamic", public_address: "192.0.2.11", listen_port: 51820 });
  const profile = await bind(s, cfg.config_id, node.node_id);
  const agent = await connectAgent(s, profile);
  t.after(() => agent.end(true));
  const publish = async (from: number, to: number) => {
    for (let i = from; i <= to; i++) {
      await agent.publishAsync(profile.topics.event!, envelope(profile, "event", { level: "info", event: "note", message: `evt-${i}` }), { qos: 1 });
    }
  };

  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await openNode(page, cfg.config_id, node.node_id, "talker");
  await page.getByRole("heading", { name: "Control log", exact: true }).waitFor();
  await publish(1, 20);
  await page.getByRole("table", { name: "Control log", exact: true }).getByRole("cell", { name: "evt-20", exact: true }).waitFor();

  // The reload's control-log snapshot is held until events that reach the page over the live
  // stream are also in it (the overlap a merge must not double); events 21..30 go out while the
  // page unloads and loads (before its stream is back: only the snapshot can bring them).
  const TOTAL = 60;
  let requested!: () => void;
  const snapshotRequested = new Promise<void>((resolve) => (requested = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route("**/control-logs?*", async (route) => {
    requested();
    await released;
    await route.continue();
  });
  const reloading = page.reload();
  await publish(21, 30);
  await snapshotRequested; // the page asks only once its stream is live
  await publish(31, 45);
  await page.getByRole("table", { name: "Control log", exact: true }).getByRole("cell", { name: "evt-45", exact: true }).waitFor();
  release();
  await reloading;
  await expectText(page.getByRole("heading", { level: 1 }), "talker");
  await page.getByRole("table", { name: "Control log", exact: true }).getByRole("cell", { name: "evt-30", exact: true }).waitFor();
  await publish(46, TOTAL);
  await page.getByRole("table", { name: "Control log", exact: true }).getByRole("cell", { name: `evt-${TOTAL}`, exact: true }).waitFor();
  // One more after everything settled: it arrives live, once.
  await publish(TOTAL + 1, TOTAL + 1);
  await page.getByRole("table", { name: "Control log", exact: true }).getByRole("cell", { name: `evt-${TOTAL + 1}`, exact: true }).waitFor();

  const shown = await eventMessages(page);
  const expected = Array.from({ length: TOTAL + 1 }, (_, i) => `evt-${TOTAL + 1 - i}`);
  assert.deepEqual(shown, expected, "every event once, newest first");
  // The same rows the backend stored (spec §2.8), nothing derived in the browser.
  const stored = (await h.api("GET", `/api/v1/configs/${cfg.config_id}/nodes/${node.node_id}/control-logs?limit=1000`)).logs as Array<{ message: string }>;
  assert.deepEqual(stored.map((l) => l.message).filter((m) => /^evt-\d+$/.test(m)), expected);
});

/**
 * Two dynamic nodes stored with MQTT on (one bound, one not) and a static one, in `dataDir`; the
 * server is closed again, so a console over the same data can start with MQTT off.
 */
async function storeNodesWithMqttOn(dataDir: string): Promise<{ configId: string; bound: string; unbound: string; fixed: string }> {
  const server = await createServer(testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, mqttEnabled: true }), createLogger("silent"), { clock: new ManualClock() });
  try {
    const cfg = await server.mesh.createConfig({ name: "off", tunnel_protocol: "wireguard", network_cidr: "10.52.0.0/24" });
    const bound = await server.mesh.createNode(cfg.config_id, { name: "bound", mode: "dynamic", public_address: "192.0.2.21", listen_port: 51820 });
    const unbound = await server.mesh.createNode(cfg.config_id, { name: "unbound", mode: "dynamic", public_address: "192.0.2.22", listen_port: 51820 });
    const fixed = await server.mesh.createNode(cfg.config_id, { name: "fixed", mode: "static", public_address: "192.0.2.23", listen_port: 51820 });
    const cmd = await server.control.bindCommand(cfg.config_id, bound.node_id);
    const token = /--token (\S+)$/.exec(cmd.command)?.[1];
    assert.ok(token);
    await server.control.bind({ bind_token: token, server_url: "http://127.0.0.1:8080", client_version: "1.2.3", platform: "linux", hostname: "h" });
    return { configId: cfg.config_id, bound: bound.node_id, unbound: unbound.node_id, fixed: fixed.node_id };
  } finally {
    await server.close();
  }
}

/** Fetches the node's config through the page's download link (no session): the config text. */
async function downloadThroughPage(page: Page, h: Backend): Promise<string> {
  await page.getByRole("button", { name: "Create download link" }).click();
  const href = await page.getByRole("link", { name: /^Download .+\.conf$/ }).getAttribute("href");
  assert.match(href ?? "", /download_token=/);
  const res = await fetch(new URL(href!, h.baseUrl));
  assert.equal(res.status, 200);
  return res.text();
}

test("spec §1.7 bullet 7: with MQTT off the control page and the client-download page show the notice instead, MQTT controls stay disabled with the reason, static features work", { timeout: 120_000 }, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-web-off-"));
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const ids = await storeNodesWithMqttOn(dataDir);
  const h = await startConsole(t, { mqttEnabled: false, dataDir });
  if (!h) return;
  const page = await h.newPage();
  await login(page);
  await waitLive(page);

  // The bound node: no control page, the notice, its controls disabled with the reason.
  await openNode(page, ids.configId, ids.bound, "bound");
  const notice = page.getByText(/MQTT services are disabled/).first();
  await notice.waitFor();
  assert.equal(await page.getByRole("heading", { name: "Control log", exact: true }).count(), 0, "no control page");
  assert.equal(await page.getByRole("heading", { name: "Endpoint", level: 2, exact: true }).count(), 0);
  for (const name of ["Get download link", "Generate bind command", "Push config", "Start", "Stop", "Run wg show", "Reset client"]) {
    const button = page.getByRole("button", { name, exact: true });
    assert.equal(await button.isDisabled(), true, `${name} is disabled`);
    assert.match((await button.getAttribute("title")) ?? "", /MQTT services are disabled/);
    const described = await button.getAttribute("aria-describedby");
    assert.match(await page.locator(`#${described}`).innerText(), /SVC_ENABLE_MQTT_SERVICES=false/);
  }
  // Treated as static (spec §1.7): its config downloads.
  assert.match(await downloadThroughPage(page, h), /^\[Interface\]$/m);
  await expectAccessible(page, "node-mqtt-off-control");
  await screenshot(page, "node-mqtt-off-control");

  // The unbound node: no client-download page, the notice instead.
  await openNode(page, ids.configId, ids.unbound, "unbound");
  await notice.waitFor();
  assert.equal(await page.getByRole("heading", { name: "2. Download and unpack the client" }).count(), 0, "no client-download page");
  for (const name of ["Get download link", "Generate bind command", "Push config", "Reset client"]) {
    assert.equal(await page.getByRole("button", { name, exact: true }).isDisabled(), true, `${name} is disabled`);
  }
  await expectAccessible(page, "node-mqtt-off-init");
  await screenshot(page, "node-mqtt-off-init");

  // A static node works as ever, without the notice.
  await openNode(page, ids.configId, ids.fixed, "fixed");
  await page.getByRole("button", { name: "Create download link" }).waitFor();
  assert.equal(await page.getByText(/MQTT services are disabled/).count(), 0);
  assert.match(await downloadThroughPage(page, h), /^\[Interface\]$/m);

  // Backups (no MQTT involved) work too.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Backups" }).click();
  await page.getByRole("button", { name: "Create snapshot" }).click();
  await page.getByRole("table", { name: "Snapshots" }).getByRole("rowheader").first().waitFor();
});
