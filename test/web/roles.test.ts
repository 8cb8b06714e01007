/**
 * The console follows the signed-in role (README "Users, roles and tokens"). A viewer walks every
 * page and finds no enabled control of an operation above their role: every control calling an
 * operation carries `data-op="<operationId>"`, and each one whose operation's `x-min-role`
 * (`web/src/api/endpoints.ts`, checked against the OpenAPI document by api-client.test.ts) is
 * above the role must be disabled with the reason, while a sweep by name finds no enabled button
 * that writes without such a mark. An operator may push, start and stop, but not edit.
 */
import assert from "node:assert/strict";
import test from "node:test";
import type { Page } from "playwright-core";
import { roleAtLeast, type Role } from "../../src/protocol/roles.js";
import { ENDPOINTS, type OperationId } from "../../web/src/api/endpoints.js";
import { bind, connectAgent, envelope, nextMessage } from "../control/agent-harness.js";
import type { SseServer } from "../events/sse-harness.js";
import { expectAccessible, expectText, screenshot, startConsole, waitLive } from "./harness.js";

const PASSWORD = "a long enough password";

/** Signs in through the login page as `username`, then waits for the home page. */
async function signIn(page: Page, username: string): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "System", level: 1 }).waitFor();
  await page.getByText(`Signed in as ${username} (`).waitFor();
}

/** Names of buttons that change something: no role below a control's operation may find one enabled without a mark. */
const WRITE_NAME =
  /^(create|add|delete|remove|save|push|start|stop|run|restore|import|reset|switch|generate|get (a )?download|prepare|set |enable|disable|revoke|change|use (the default|environment)|new download|show qr)/i;

interface Control {
  op: string | null;
  /** A link navigates (a download link is handed out only by a marked, gated button). */
  link: boolean;
  name: string;
  disabled: boolean;
  reason: string;
}

/** Every button, input, select and link of the page's main part (not in a closed dialog): its operation mark, name, state and the reason it points to. */
async function controls(page: Page): Promise<Control[]> {
  // A closed dialog's buttons are reached only through the control that opens it.
  return page.evaluate(`[...document.querySelectorAll("main button, main input, main select, main a")].filter((el) => el.closest("dialog:not([open])") === null).map((el) => ({
    op: el.getAttribute("data-op"),
    link: el.tagName === "A",
    name: (el.getAttribute("aria-label") || el.textContent || el.value || "").trim(),
    disabled: el.matches(":disabled"),
    reason: (el.getAttribute("aria-describedby") || "").split(" ").map((id) => document.getElementById(id)?.textContent ?? "").join(" "),
  }))`);
}

/**
 * The check of one page for `role`: each marked control of an operation above the role is
 * disabled and says why ("Needs the admin role — you are a viewer"); no enabled button is named
 * like a write unless its mark says the role may use it; and the page shows at least one reason.
 */
async function expectNoWriteControl(page: Page, role: Role, where: string, opts: { reasons?: boolean } = {}): Promise<number> {
  const article = /^[aeiou]/.test(role) ? "an" : "a";
  // Until "who am I" answers, a gated control is disabled without a reason; every reason comes with that one answer.
  if (opts.reasons !== false) await page.getByText(`Needs the`).filter({ hasText: `role — you are ${article} ${role}` }).first().waitFor();
  const found = await controls(page);
  const problems: string[] = [];
  let gated = 0;
  for (const c of found) {
    const min = c.op === null ? undefined : ENDPOINTS[c.op as OperationId]?.minRole;
    if (c.op !== null && min === undefined) problems.push(`${c.name}: data-op="${c.op}" is no operation of the client`);
    const allowed = min === null || (min !== undefined && roleAtLeast(role, min));
    if (c.op !== null && !allowed) {
      gated++;
      if (!c.disabled) problems.push(`${c.name} (${c.op}, needs ${min}) is enabled`);
      else if (!c.reason.includes(`Needs the ${min} role — you are ${article} ${role}`)) problems.push(`${c.name} (${c.op}) does not point to its reason (it says "${c.reason}")`);
    }
    if (!c.disabled && !allowed && !c.link && WRITE_NAME.test(c.name)) problems.push(`${c.name} is enabled and looks like a write (${c.op ?? "no data-op"})`);
  }
  assert.deepEqual(problems, [], `${where}: ${problems.join("; ")}`);
  return gated;
}

test("a viewer finds no enabled write control on any page, each with the reason; an operator may push, start and stop (a stop reaches the agent) but not edit", { timeout: 120_000 }, async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const s = h as unknown as SseServer;
  await h.api("POST", "/api/v1/users", { username: "vera", password: PASSWORD, role: "viewer" });
  await h.api("POST", "/api/v1/users", { username: "otto", password: PASSWORD, role: "operator" });
  const cfg = await h.api("POST", "/api/v1/configs", { name: "lab", tunnel_protocol: "wireguard", network_cidr: "10.80.0.0/24" });
  const nodes = `/api/v1/configs/${cfg.config_id}/nodes`;
  const fixed = await h.api("POST", nodes, { name: "gate", mode: "static", public_address: "192.0.2.5" });
  const fresh = await h.api("POST", nodes, { name: "fresh", mode: "dynamic" });
  const edge = await h.api("POST", nodes, { name: "edge", mode: "dynamic", public_address: "192.0.2.6" });
  await h.api("POST", `${nodes}/${fixed.node_id}/port-forwards`, { protocol: "tcp", listen_port: 8080, target_address: "10.80.0.9", target_port: 80 });
  await h.api("POST", "/api/v1/backups", {});
  const profile = await bind(s, cfg.config_id, edge.node_id);
  const agent = await connectAgent(s, profile);
  t.after(() => agent.end(true));
  await agent.publishAsync(profile.topics.event!, envelope(profile, "event", { level: "info", event: "mqtt_connected", message: "agent connected" }), { qos: 1 });

  const page = await h.newPage();
  await signIn(page, "vera");
  await waitLive(page);
  // Owners only: the viewer's navigation has no Users entry; Tokens is everyone's.
  const nav = page.getByRole("navigation", { name: "Main" });
  await nav.getByRole("link", { name: "Tokens" }).waitFor();
  assert.equal(await nav.getByRole("link", { name: "Users" }).count(), 0);

  const mesh = `/configs/${cfg.config_id}`;
  const walk: Array<[string, string, string]> = [
    ["home", "/", "System"],
    ["tokens", "/tokens", "Personal access tokens"],
    ["configs", "/configs", "Configs"],
    ["mesh", mesh, "lab"],
    ["mesh topology", `${mesh}?view=topology`, "lab"],
    ["static node", `${mesh}/nodes/${fixed.node_id}`, "gate"],
    ["init page", `${mesh}/nodes/${fresh.node_id}`, "fresh"],
    ["control page", `${mesh}/nodes/${edge.node_id}`, "edge"],
    ["backups", "/backups", "Backups"],
    ["settings", "/settings", "Settings"],
  ];
  // A viewer's open topology never asks the hosts for fresh reports (refreshing is an operator's).
  const refreshes: string[] = [];
  page.on("request", (req) => {
    if (req.url().endsWith("/links/refresh")) refreshes.push(req.url());
  });
  let gated = 0;
  for (const [where, path, heading] of walk) {
    await page.goto(path);
    await expectText(page.getByRole("heading", { level: 1 }), heading);
    const readOnly = where === "home" || where === "tokens";
    if (where !== "home") await page.locator("[data-op]").first().waitFor();
    if (where === "mesh") await page.getByRole("checkbox", { name: "Select all shown nodes" }).check();
    if (where === "control page") await page.getByRole("heading", { name: "Control", exact: true }).waitFor();
    if (where === "mesh topology") await page.getByRole("button", { name: "Check links" }).waitFor();
    gated += await expectNoWriteControl(page, "viewer", where, { reasons: !readOnly });
    if (where === "static node") await expectText(page.locator("[data-role-note='getStagedConfig']"), /^Needs the operator role — you are a viewer: the config text holds the node's private key\.$/);
    if (where === "mesh" || where === "static node") {
      await expectAccessible(page, `viewer ${where}`);
      await screenshot(page, `viewer-${where.replace(" ", "-")}`);
    }
  }
  assert.ok(gated >= 20, `the walk met ${gated} gated controls`);
  assert.deepEqual(refreshes, [], "no link refresh by a viewer");
  await page.goto("/users");
  await expectText(page.locator("[data-role-note]"), /^Needs the owner role — you are a viewer/);
  assert.equal(await page.getByRole("table").count(), 0, "no user list for a viewer");
  // Alerts (admins): no navigation entry; the page says why it shows no channel, rule or delivery, and offers no control.
  assert.equal(await nav.getByRole("link", { name: "Alerts" }).count(), 0);
  await page.goto("/alerts");
  await expectText(page.locator("[data-role-note='listAlertChannels']"), /^Needs the admin role — you are a viewer: alert channels hold secrets/);
  assert.equal(await page.getByRole("table").count(), 0, "no channels or deliveries for a viewer");
  await expectNoWriteControl(page, "viewer", "alerts");

  // An operator: control commands yes, edits no.
  const op = await h.newPage();
  await signIn(op, "otto");
  await op.goto(`${mesh}/nodes/${edge.node_id}`);
  await op.getByRole("heading", { name: "Control", exact: true }).waitFor();
  await expectNoWriteControl(op, "operator", "operator control page");
  for (const name of ["Push config", "Start", "Stop", "Run wg show"]) assert.ok(await op.getByRole("button", { name, exact: true }).isEnabled(), `${name} is enabled for an operator`);
  assert.ok(await op.getByRole("button", { name: "Save changes" }).isDisabled());
  assert.ok(await op.getByRole("button", { name: "Delete node" }).isDisabled());
  await expectText(op.getByText("Needs the admin role — you are an operator").first(), "Needs the admin role — you are an operator");
  const stop = nextMessage(agent, profile.topics.control!);
  await op.getByRole("button", { name: "Stop", exact: true }).click();
  assert.equal((await stop).payload.action, "stop", "the operator's stop reached the agent");
  await op.goto(`${mesh}/nodes/${fresh.node_id}`);
  await op.getByRole("button", { name: "Generate bind command" }).click();
  await op.getByLabel("Bind command", { exact: true }).waitFor();
  await op.goto(`${mesh}/nodes/${fixed.node_id}`);
  await expectText(op.getByRole("region", { name: "Staged config" }), /PrivateKey/);
  await expectNoWriteControl(op, "operator", "operator static node");
});
