/**
 * The mesh topology's layout, measured in Chromium: a full mesh of 50 nodes is drawn on a circle
 * with every label readable (at least 10 px on screen) and no two labels overlapping (their
 * rotated boxes, as the browser places them, tested by separating axes), and every node is on top
 * where it is drawn (a click there opens that node). Beyond the drawing's limit the page
 * summarises the pairs with counts and points to the table. The real service in-process. (The
 * drawing's accessibility is checked on a small mesh in configs-mesh.test.ts: axe over 1,225
 * lines takes most of a minute.)
 */
import assert from "node:assert/strict";
import test from "node:test";
import { expectText, login, screenshot, startConsole } from "./harness.js";

const DRAWN = 50;
const BEYOND = 65;

/** Names of uneven length, as real fleets have them. */
function nodeName(i: number): string {
  const kinds = ["gw", "edge-router", "db", "branch-office-vpn", "cam"];
  return `${kinds[i % kinds.length]}-${String(i).padStart(2, "0")}`;
}

interface Measured {
  links: number;
  minLabelPx: number;
  overlaps: string[];
  unreachable: string[];
}

/**
 * Measures the drawing in the page (plain JavaScript: the test's compiled helpers do not exist
 * there): each node link's label as the four screen corners of its rotated box, its height on
 * screen, the pairs of labels whose boxes intersect (separating axes, 0.5 px tolerance), and the
 * nodes whose dot or label centre, scrolled into view, is covered by something else.
 */
const MEASURE = `(fig) => {
  const anchors = [...fig.querySelectorAll("a")];
  const quadOf = (a) => {
    const text = a.querySelector("text");
    if (text === null) {
      // A node drawn as an HTML box: its box on screen; its text's size, scaled as drawn.
      const r = a.getBoundingClientRect();
      const corners = [{ x: r.left, y: r.top }, { x: r.right, y: r.top }, { x: r.right, y: r.bottom }, { x: r.left, y: r.bottom }];
      return { name: a.getAttribute("aria-label"), corners, px: parseFloat(getComputedStyle(a).fontSize) * (r.width / (a.offsetWidth || r.width)) };
    }
    const bb = text.getBBox();
    const m = text.getScreenCTM();
    const at = (x, y) => ({ x: m.a * x + m.c * y + m.e, y: m.b * x + m.d * y + m.f });
    return { name: a.getAttribute("aria-label"), corners: [at(bb.x, bb.y), at(bb.x + bb.width, bb.y), at(bb.x + bb.width, bb.y + bb.height), at(bb.x, bb.y + bb.height)], px: bb.height * Math.hypot(m.b, m.d) };
  };
  const quads = anchors.map(quadOf);
  const separated = (p, q) => [p, q].some((poly) => poly.some((c, i) => {
    const d = poly[(i + 1) % poly.length];
    const ax = { x: -(d.y - c.y), y: d.x - c.x };
    const len = Math.hypot(ax.x, ax.y);
    const pp = p.map((v) => (v.x * ax.x + v.y * ax.y) / len);
    const qq = q.map((v) => (v.x * ax.x + v.y * ax.y) / len);
    return Math.max(...pp) < Math.min(...qq) + 0.5 || Math.max(...qq) < Math.min(...pp) + 0.5;
  }));
  const overlaps = [];
  for (let i = 0; i < quads.length; i++)
    for (let j = i + 1; j < quads.length; j++)
      if (!separated(quads[i].corners, quads[j].corners)) overlaps.push(quads[i].name + " x " + quads[j].name);
  const unreachable = [];
  anchors.forEach((a) => {
    a.scrollIntoView({ block: "center", inline: "center" });
    const dot = (a.querySelector("circle") ?? a).getBoundingClientRect();
    const c = quadOf(a).corners;
    const mid = { x: (c[0].x + c[1].x + c[2].x + c[3].x) / 4, y: (c[0].y + c[1].y + c[2].y + c[3].y) / 4 };
    for (const pt of [{ x: dot.x + dot.width / 2, y: dot.y + dot.height / 2 }, mid]) {
      const hit = document.elementFromPoint(pt.x, pt.y);
      if (hit === null || hit.closest("a") !== a) unreachable.push(a.getAttribute("aria-label"));
    }
  });
  return { links: anchors.length, minLabelPx: Math.min(...quads.map((q) => q.px)), overlaps, unreachable };
}`;

test("the topology of a 50-node full mesh is a circle whose labels are readable and never overlap, every node reachable; beyond the limit a summary with counts", async (t) => {
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "big", tunnel_protocol: "wireguard", network_cidr: "10.77.0.0/16" });
  for (let i = 0; i < DRAWN; i++) await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: nodeName(i), mode: "static", public_address: `198.51.100.${i + 1}`, listen_port: 51820 });

  const page = await h.newPage();
  await login(page);
  await page.goto(`/configs/${cfg.config_id}?view=topology`);
  const figure = page.getByRole("figure", { name: "Topology" });
  await expectText(figure.getByRole("list", { name: "Legend" }), new RegExp(`\\(${(DRAWN * (DRAWN - 1)) / 2}\\)`));
  const m = (await page.evaluate(`(${MEASURE})(document.querySelector('figure[aria-label="Topology"]'))`)) as Measured;
  assert.equal(m.links, DRAWN, "every node is drawn as a link");
  assert.ok(m.minLabelPx >= 10, `labels are at least 10 px tall on screen (smallest ${m.minLabelPx.toFixed(1)} px)`);
  assert.deepEqual(m.overlaps, [], "no two labels overlap");
  assert.deepEqual(m.unreachable, [], "every node's dot and label take the pointer");
  // A click on a node drawn at the left of the circle (its label turned over) opens it.
  await figure.getByRole("link", { name: /^Node db-27 / }).click();
  await page.waitForURL(/\/nodes\//);
  await expectText(page.getByRole("heading", { level: 1 }), "db-27");
  await page.goBack();
  await figure.getByRole("link", { name: /^Node gw-00 / }).waitFor();
  await screenshot(page, "mesh-topology-50");

  // Beyond the limit: no drawing, a summary with the counts, the legend still counting.
  for (let i = DRAWN; i < BEYOND; i++) await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: nodeName(i), mode: "static", auto_pair: false });
  await expectText(figure, new RegExp(`${BEYOND} nodes: too many to draw .* see the table\\. ${(DRAWN * (DRAWN - 1)) / 2} pairs: 0 up, 0 stale, 0 down, ${(DRAWN * (DRAWN - 1)) / 2} not measured`));
  assert.equal(await figure.getByRole("link").count(), 0, "nothing drawn");
  await screenshot(page, "mesh-topology-summary");
});
