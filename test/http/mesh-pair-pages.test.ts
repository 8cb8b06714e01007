import assert from "node:assert/strict";
import { test } from "node:test";
import { assertError, createConfig, createNode, startHarness, type Harness } from "./harness.js";

/**
 * The mesh-pair list at scale: `GET /api/v1/configs/{id}/mesh-pairs` answers keyset
 * pages (`limit`, opaque `cursor`, `next_cursor`) in creation order, and `node_id=` answers one
 * node's pairs only, each with its connection integrity (spec §6.5 `workspace.connections[*]`).
 * Without `limit` a page holds up to 10,000 pairs: small meshes answer in one page, as before.
 * Over real HTTP routing (inject) on a real SQLite file; the clock moves 1 ms per node.
 */

type Pair = { pair_id: string; node_a: string; node_b: string; integrity: { status: string } };
type Page = { mesh_pairs: Pair[]; next_cursor: string | null };

async function pairsPage(h: Harness, configId: string, query = ""): Promise<Page> {
  const res = await h.req("GET", `/api/v1/configs/${configId}/mesh-pairs${query === "" ? "" : `?${query}`}`);
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** A full mesh of `n` nodes (auto-paired), the first one behind NAT, the others public. */
async function fullMesh(h: Harness, configId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    h.clock.advance(1);
    ids.push((await createNode(h, configId, { name: `n${i}`, ...(i === 0 ? {} : { public_address: `192.0.2.${i}` }) })).node_id);
  }
  return ids;
}

test("spec §6.5 connections: mesh-pair pages cover every pair once, in creation order, and the unpaged answer is the same list with next_cursor null", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  await fullMesh(h, config.config_id, 8); // 28 pairs
  const all = await pairsPage(h, config.config_id);
  assert.equal(all.mesh_pairs.length, 28, "no limit: the whole (small) mesh in one page");
  assert.equal(all.next_cursor, null);
  const seen: Pair[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: Page = await pairsPage(h, config.config_id, `limit=5${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`);
    assert.ok(page.mesh_pairs.length <= 5 && page.mesh_pairs.length > 0);
    seen.push(...page.mesh_pairs);
    cursor = page.next_cursor;
    pages++;
  } while (cursor !== null && pages < 20);
  assert.equal(pages, 6, "28 pairs in pages of 5");
  assert.deepEqual(seen, all.mesh_pairs, "the pages, joined, are the unpaged list (same order, same integrity)");
});

test("spec §6.5 connections: node_id= answers exactly that node's pairs with their integrity, paged with a cursor bound to the node", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const ids = await fullMesh(h, config.config_id, 6);
  const [nat, pub] = [ids[0]!, ids[1]!];
  const ofNat = await pairsPage(h, config.config_id, `node_id=${nat}`);
  assert.equal(ofNat.mesh_pairs.length, 5);
  assert.ok(ofNat.mesh_pairs.every((p) => p.node_a === nat || p.node_b === nat), "only pairs the node is a side of");
  assert.ok(ofNat.mesh_pairs.every((p) => p.integrity.status === "ok"), "the NAT'd node initiates toward public peers");
  const all = (await pairsPage(h, config.config_id)).mesh_pairs;
  assert.deepEqual(ofNat.mesh_pairs, all.filter((p) => p.node_a === nat || p.node_b === nat), "the same views as the full list, in its order");

  const first = await pairsPage(h, config.config_id, `node_id=${pub}&limit=2`);
  assert.equal(first.mesh_pairs.length, 2);
  assert.ok(first.next_cursor);
  const rest = await pairsPage(h, config.config_id, `node_id=${pub}&limit=10&cursor=${encodeURIComponent(first.next_cursor)}`);
  assert.equal(rest.mesh_pairs.length, 3);
  assert.equal(rest.next_cursor, null);
  // The cursor of one node's list is not a cursor of another node's list nor of the whole list.
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs?node_id=${nat}&cursor=${encodeURIComponent(first.next_cursor)}`), "INVALID_CURSOR");
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs?cursor=${encodeURIComponent(first.next_cursor)}`), "INVALID_CURSOR");
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs?cursor=not-a-cursor`), "INVALID_CURSOR");
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs?node_id=node-unknown`), "NOT_FOUND");
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs?limit=0`), "VALIDATION_FAILED");
  assertError(await h.req("GET", `/api/v1/configs/${config.config_id}/mesh-pairs?limit=10001`), "VALIDATION_FAILED");
});
