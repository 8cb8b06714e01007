/**
 * Hub nodes (README "Hubs: meshes behind NAT"): a node with a public endpoint marked `hub`
 * forwards between the nodes of its config that cannot reach each other directly. Over HTTP,
 * real SQLite: the refusal of a hub without a public address, each pair's route in the pair
 * list (`direct` / `via_hub` with the hub's id), the rendered configs (spec §6.3 `config_text`:
 * the hub peer's `AllowedIPs`, the hub's forwarding `PostUp`/`PostDown`, peers named).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { assertError, createConfig, createNode, startHarness, type Harness } from "./harness.js";

async function configText(h: Harness, configId: string, nodeId: string): Promise<string> {
  return (await h.req("GET", `/api/v1/configs/${configId}/nodes/${nodeId}/config`)).json.config_text;
}

interface PairAnswer {
  pair_id: string;
  node_a: string;
  node_b: string;
  integrity: { status: string };
  route: string | null;
  hub_node_id: string | null;
}

async function pairsOf(h: Harness, configId: string): Promise<PairAnswer[]> {
  return (await h.req("GET", `/api/v1/configs/${configId}/mesh-pairs`)).json.mesh_pairs;
}

function pairOf(pairs: readonly PairAnswer[], x: string, y: string): PairAnswer {
  const pair = pairs.find((p) => (p.node_a === x && p.node_b === y) || (p.node_a === y && p.node_b === x));
  assert.ok(pair, `a pair of ${x} and ${y}`);
  return pair;
}

/** The `AllowedIPs` of the `[Peer]` block holding `publicKey`. */
function allowedIpsOf(text: string, publicKey: string): string[] {
  const block = text.split("[Peer]").find((b) => b.includes(`PublicKey = ${publicKey}`)) ?? "";
  return (/^AllowedIPs = (.*)$/m.exec(block)?.[1] ?? "").split(", ").filter((a) => a !== "");
}

test("a hub needs a public address: create and PATCH refuse HUB_NEEDS_PUBLIC_ENDPOINT and change nothing", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const refused = await h.req("POST", `/api/v1/configs/${config.config_id}/nodes`, { name: "gw", mode: "static", hub: true });
  assertError(refused, "HUB_NEEDS_PUBLIC_ENDPOINT", "create");
  assert.match(refused.json.error.message, /public address/);
  assert.equal((await h.req("GET", `/api/v1/configs/${config.config_id}/nodes`)).json.nodes.length, 0);

  const laptop = await createNode(h, config.config_id, { name: "laptop" });
  assertError(await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${laptop.node_id}`, { hub: true }), "HUB_NEEDS_PUBLIC_ENDPOINT", "PATCH hub");
  const gw = await createNode(h, config.config_id, { name: "gw", public_address: "203.0.113.1", hub: true });
  assert.equal(gw.hub, true);
  assert.equal(gw.listen_port, 51820, "the listen port defaults with the public address");
  assertError(
    await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${gw.node_id}`, { public_address: null }),
    "HUB_NEEDS_PUBLIC_ENDPOINT",
    "PATCH a hub's public address away",
  );
  const unmade = await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${gw.node_id}`, { hub: false, public_address: null });
  assert.equal(unmade.status, 200, unmade.text);
  assert.equal(unmade.json.hub, false);
  assert.equal(laptop.hub, false);
});

test("nodes behind NAT route through the hub: pairs say via_hub with the hub's id, the hub peer carries their addresses, the hub forwards", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const gw = await createNode(h, config.config_id, { name: "gateway", public_address: "203.0.113.1", hub: true });
  const laptops: Array<Awaited<ReturnType<typeof createNode>>> = [];
  for (const name of ["ana", "ben", "cy"]) laptops.push(await createNode(h, config.config_id, { name }));
  const [ana, ben, cy] = laptops;
  assert.ok(ana && ben && cy);

  const pairs = await pairsOf(h, config.config_id);
  assert.equal(pairs.length, 6, "auto_pair still pairs every node with every other");
  for (const laptop of laptops) {
    const withHub = pairOf(pairs, gw.node_id, laptop.node_id);
    assert.deepEqual([withHub.integrity.status, withHub.route, withHub.hub_node_id], ["ok", "direct", null]);
  }
  for (const [x, y] of [[ana, ben], [ana, cy], [ben, cy]] as const) {
    const pair = pairOf(pairs, x.node_id, y.node_id);
    assert.deepEqual([pair.integrity.status, pair.route, pair.hub_node_id], ["ok", "via_hub", gw.node_id], `${x.name} – ${y.name}`);
  }

  // spec §6.3 config_text: each laptop has one peer, the hub, reaching the other two through it.
  for (const laptop of laptops) {
    const text = await configText(h, config.config_id, laptop.node_id);
    assert.equal(text.match(/^\[Peer\]$/gm)?.length, 1, `${laptop.name}: the hub is its only peer`);
    const others = laptops.filter((l) => l !== laptop).map((l) => `${l.address}/32`);
    assert.deepEqual(allowedIpsOf(text, gw.public_key), [`${gw.address}/32`, ...others]);
    assert.match(text, /^# gateway \(node /m, "the peer is named");
    assert.match(text, /^PersistentKeepalive = 25$/m);
  }
  const hubText = await configText(h, config.config_id, gw.node_id);
  assert.match(hubText, /^PostUp = sysctl -w net\.ipv4\.ip_forward=1$/m);
  assert.match(hubText, /^PostUp = iptables -I FORWARD -i %i -o %i -j ACCEPT$/m);
  assert.match(hubText, /^PostDown = iptables -D FORWARD -i %i -o %i -j ACCEPT$/m);
  for (const laptop of laptops) assert.deepEqual(allowedIpsOf(hubText, laptop.public_key), [`${laptop.address}/32`], "the hub routes by each node's own address");

  // A laptop's pair with the hub disabled: its pairs with the other laptops have no hub left.
  const hubPair = pairOf(pairs, gw.node_id, cy.node_id);
  await h.req("PATCH", `/api/v1/configs/${config.config_id}/mesh-pairs/${hubPair.pair_id}`, { enabled: false });
  const after = await pairsOf(h, config.config_id);
  assert.equal(pairOf(after, ana.node_id, cy.node_id).integrity.status, "broken");
  assert.equal(pairOf(after, ana.node_id, ben.node_id).route, "via_hub");
  assert.deepEqual(allowedIpsOf(await configText(h, config.config_id, ana.node_id), gw.public_key), [`${gw.address}/32`, `${ben.address}/32`]);
});

test("without a hub the pairs of nodes behind NAT stay broken; making a node hub routes them, unmaking it breaks them again", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const gw = await createNode(h, config.config_id, { name: "gateway", public_address: "203.0.113.1" });
  const a = await createNode(h, config.config_id, { name: "a" });
  const b = await createNode(h, config.config_id, { name: "b" });
  const pair = () => pairsOf(h, config.config_id).then((ps) => pairOf(ps, a.node_id, b.node_id));
  assert.deepEqual(await pair().then((p) => [p.integrity.status, p.route]), ["broken", null]);
  const textBefore = await configText(h, config.config_id, a.node_id);
  assert.deepEqual(allowedIpsOf(textBefore, gw.public_key), [`${gw.address}/32`]);

  const made = await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${gw.node_id}`, { hub: true });
  assert.equal(made.status, 200, made.text);
  assert.deepEqual(await pair().then((p) => [p.integrity.status, p.route, p.hub_node_id]), ["ok", "via_hub", gw.node_id]);
  assert.deepEqual(allowedIpsOf(await configText(h, config.config_id, a.node_id), gw.public_key), [`${gw.address}/32`, `${b.address}/32`]);
  assert.deepEqual(allowedIpsOf(await configText(h, config.config_id, b.node_id), gw.public_key), [`${gw.address}/32`, `${a.address}/32`]);

  await h.req("PATCH", `/api/v1/configs/${config.config_id}/nodes/${gw.node_id}`, { hub: false });
  assert.equal((await pair()).integrity.status, "broken");
  assert.equal(await configText(h, config.config_id, a.node_id), textBefore, "the same text as before the hub");
});
