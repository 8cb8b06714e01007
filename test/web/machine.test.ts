/**
 * Console test of the node page's "State machine" tab: a node bound with the
 * real `svcctl` and run by `svcctl agent run` over the tunnel stand-ins (as test/web/node.test.ts)
 * shows `presence.online` highlighted; SIGKILLing the agent (its MQTT will) turns it to
 * `presence.offline` without a reload and puts the new timeline row on top; choosing an older row
 * shows the states stored with it; "Copy as Mermaid" puts `stateDiagram-v2` text on the clipboard.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { bindCommandInvocation, freeTcpPort, svcctlPrefix } from "../helpers/agent.js";
import { STANDIN, start } from "./processes.js";
import { expectAccessible, expectText, login, screenshot, startConsole, waitLive } from "./harness.js";


test("spec §3.1, §3.2: the State machine tab shows presence.online highlighted for a running agent, a SIGKILLed agent turns it to offline without a reload with the will row on top of the timeline, an older row shows the states stored after it, Copy as Mermaid copies stateDiagram-v2 text, Older pages back to the first row", { timeout: 180_000 }, async (t) => {
  const port = await freeTcpPort("127.0.0.1");
  const baseUrl = `http://127.0.0.1:${port}`;
  const h = await startConsole(t, { httpPort: port, publicUrl: baseUrl });
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "fr-net", tunnel_protocol: "wireguard", network_cidr: "10.60.0.0/24" });
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "recorder-1", mode: "dynamic", public_address: "192.0.2.20", listen_port: 51820 });

  // Bound with the real CLI, then `svcctl agent run` with the stand-in tunnel tools first on PATH.
  const dir = mkdtempSync(join(tmpdir(), "svc-web-machine-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const profileDir = join(dir, "profile");
  const { command } = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes/${node.node_id}/bind-command`);
  const inv = bindCommandInvocation(command, profileDir);
  const bindRun = start(t, inv.cmd, inv.args);
  assert.equal(await bindRun.exited, 0, bindRun.output());
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

  const page = await h.newPage();
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl });
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${cfg.config_id}/nodes/${node.node_id}`);
  await expectText(page.getByRole("heading", { level: 1 }), "recorder-1");

  // Accessible tabs: the keyboard moves from Control to State machine (arrow keys, WAI-ARIA).
  const controlTab = page.getByRole("tab", { name: "Control" });
  await controlTab.focus();
  await page.keyboard.press("ArrowRight");
  await page.getByRole("tab", { name: "State machine", selected: true }).waitFor();
  assert.equal(await controlTab.getAttribute("aria-selected"), "false");
  assert.equal(await page.evaluate("document.activeElement?.getAttribute('role') + ':' + document.activeElement?.textContent"), "tab:State machine", "focus follows the arrow key");
  await page.getByRole("tabpanel", { name: "State machine" }).waitFor();
  assert.equal(await page.getByRole("heading", { name: "Endpoint", exact: true }).isVisible(), false, "the Control panel is hidden");

  // spec §3.1/§3.2: the running agent's node is online; the chart says so in text (not colour only).
  await page.getByRole("img", { name: "presence.online (active)", exact: true }).waitFor();
  await page.getByRole("img", { name: "presence.offline", exact: true }).waitFor();
  await expectText(page.getByLabel("Active states").getByRole("definition").first(), /.+/);
  assert.match(await page.getByLabel("Active states").innerText(), /presence\s+online/);
  await page.getByRole("img", { name: "presence.online (active)" }).filter({ hasText: "active" }).waitFor();
  const timeline = page.getByRole("list", { name: "Transitions, newest first" });
  await expectText(timeline.getByRole("button"), /^\d\d:\d\d:\d\d .*presence offline → online(\.fresh)?.*: mqtt\.signal \(\w+.*\)$/);
  await expectAccessible(page, "node-machine");
  await screenshot(page, "node-machine");

  // spec §3.1: SIGKILL → the broker sends the will → offline, without a reload (SSE → refetch).
  await page.evaluate("window.__svcTestMark = true");
  const rowsBefore = await timeline.getByRole("button").count();
  agent.proc.kill("SIGKILL");
  await agent.exited;
  await page.getByRole("img", { name: "presence.offline (active)", exact: true }).waitFor();
  await page.getByRole("img", { name: "presence.online", exact: true }).waitFor();
  assert.equal(await page.evaluate("window.__svcTestMark === true"), true, "the page was reloaded");
  await expectText(timeline.getByRole("button").first(), /^\d\d:\d\d:\d\d presence online(\.fresh)? → offline.*: mqtt\.will \(will\)$/);
  assert.ok((await timeline.getByRole("button").count()) > rowsBefore, "a row was added");

  // Choosing the older row where the node came online shows the states stored with it.
  const onlineRow = timeline.getByRole("button", { name: /presence offline → online/ }).first();
  await onlineRow.click();
  assert.equal(await onlineRow.getAttribute("aria-pressed"), "true");
  await page.getByRole("img", { name: "presence.online (active)", exact: true }).waitFor();
  await page.getByRole("img", { name: "presence.offline", exact: true }).waitFor();
  assert.match(await page.getByLabel("States after the chosen row").innerText(), /presence\s+online/);
  await expectText(page.getByRole("status").filter({ hasText: "Showing the states after" }), /Showing the states after \d\d:\d\d:\d\d/);
  await screenshot(page, "node-machine-row");
  await page.getByRole("button", { name: "Show the live state" }).click();
  await page.getByRole("img", { name: "presence.offline (active)", exact: true }).waitFor();

  // Copy as Mermaid: the chart as stateDiagram-v2 text on the clipboard.
  await page.getByRole("button", { name: "Copy as Mermaid" }).click();
  await expectText(page.getByRole("button", { name: /Copied as Mermaid/ }), /Copied/);
  const copied = (await page.evaluate("navigator.clipboard.readText()")) as string;
  assert.match(copied, /^stateDiagram-v2\n/);
  assert.match(copied, /presence_online --> presence_offline : mqtt\.will/);

  // Paging: each new bind token records a row (its expiry is a shown field). After a reload (the
  // tab is kept in the URL) the first page holds 20 rows, newest first; "Older" adds the rest,
  // down to the node's first row.
  for (let i = 0; i < 15; i++) {
    h.clock.advance(1_000); // a new expiry each time (the harness clock is manual)
    await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes/${node.node_id}/bind-command`);
  }
  await page.reload();
  await page.getByRole("tabpanel", { name: "State machine" }).waitFor();
  await expectText(timeline.getByRole("button").first(), /bind_token\.issued \(rest POST \/api\/v1\/configs\/:config_id\/nodes\/:node_id\/bind-command\)$/);
  assert.equal(await timeline.getByRole("button").count(), 20);
  assert.doesNotMatch(await timeline.innerText(), /initial state/);
  await page.getByRole("button", { name: "Older" }).click();
  await expectText(timeline.getByRole("button").last(), /initial state: xstate\.init \(rest POST \/api\/v1\/configs\/:config_id\/nodes\)$/);
  assert.ok((await timeline.getByRole("button").count()) > 20);
  assert.equal(await page.getByRole("button", { name: "Older" }).count(), 0, "no Older button on the last page");
});
