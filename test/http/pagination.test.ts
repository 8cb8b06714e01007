import assert from "node:assert/strict";
import { test } from "node:test";
import { insertClientEventLogs } from "../../src/store/control-logs.repository.js";
import { assertError, createConfig, createNode, startHarness, type Harness } from "./harness.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Lists for big fleets: nodes, configs and control logs are keyset pages
 * (`limit`, opaque `cursor`, `next_cursor`), filtered in the store; node counts by state. The
 * states filtered and counted are the ones the node view shows (presence spec §3.1, sync spec
 * §3.5; the console re-derives nothing, spec §6.5 rule 7). Over real HTTP routing (inject) on a
 * real SQLite file.
 */

type Page = { nodes: Array<{ node_id: string; name: string; client: { client_presence_state: string; config_version_state: string | null } }>; next_cursor: string | null };

async function nodesPage(h: Harness, configId: string, query: string): Promise<Page> {
  const res = await h.req("GET", `/api/v1/configs/${configId}/nodes?${query}`);
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** Creates `n` static nodes without pairs, the clock 1 ms apart (creation order = list order). */
async function seedNodes(h: Harness, configId: string, n: number, prefix: string, body: Record<string, unknown> = {}): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    h.clock.advance(1);
    ids.push((await createNode(h, configId, { name: `${prefix}-${String(i).padStart(3, "0")}`, auto_pair: false, ...body })).node_id);
  }
  return ids;
}

test("node pages cover every node exactly once, in creation order, while nodes are created and deleted between pages", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const initial = await seedNodes(h, config.config_id, 23, "n");
  const seen: string[] = [];
  const created: string[] = [];
  const deleted = new Set<string>();
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: Page = await nodesPage(h, config.config_id, `limit=5${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`);
    assert.ok(page.nodes.length <= 5);
    seen.push(...page.nodes.map((n) => n.node_id));
    cursor = page.next_cursor;
    pages++;
    // Between pages: a new node (after every existing one), and one not yet listed is deleted.
    created.push(...(await seedNodes(h, config.config_id, 1, `late${pages}`)));
    const ahead = initial.find((id) => !seen.includes(id) && !deleted.has(id) && initial.indexOf(id) % 4 === 3);
    if (ahead !== undefined) {
      assert.equal((await h.req("DELETE", `/api/v1/configs/${config.config_id}/nodes/${ahead}`)).status, 204);
      deleted.add(ahead);
    }
  } while (cursor !== null && pages < 50);
  assert.equal(new Set(seen).size, seen.length, "no node twice");
  assert.ok(deleted.size > 0, "the test did delete nodes ahead of the cursor");
  // Every node that existed throughout is there, in creation order; deleted ones are not; nodes
  // created meanwhile come after the older ones (the last one may be created after the last page).
  const survivors = initial.filter((id) => !deleted.has(id));
  assert.deepEqual(seen.slice(0, survivors.length), survivors);
  assert.deepEqual(seen.slice(survivors.length), created.slice(0, seen.length - survivors.length));
  assert.ok(seen.length >= survivors.length + created.length - 1);
  // The default page is the whole (small) list, with no next page: old callers see every node.
  const all = await nodesPage(h, config.config_id, "");
  assert.deepEqual(all.nodes.map((n) => n.node_id), [...survivors, ...created]);
  assert.equal(all.next_cursor, null);
});

test("spec §3.1, §3.5: presence, mode, sync and text filters run on the server; node-counts counts by state", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { network_cidr: "10.60.0.0/24" });
  const other = await createConfig(h, { network_cidr: "10.61.0.0/24" });
  await seedNodes(h, other.config_id, 3, "elsewhere");
  const statics = await seedNodes(h, config.config_id, 4, "edge", { tags: ["eu"] });
  const dynamics = await seedNodes(h, config.config_id, 6, "agent", { mode: "dynamic" });
  // Client states as the store holds them after binds and signals: two online (one confirmed its
  // staged config), one dropped; the rest never bound.
  const sqlite = sqliteOf(h.server.store);
  const setClient = sqlite.prepare("UPDATE node_client_state SET client_initialized = 1, client_presence_state = ? WHERE node_id = ?");
  setClient.run("online", dynamics[0]);
  setClient.run("online", dynamics[1]);
  setClient.run("dropped", dynamics[2]);
  sqlite.prepare("UPDATE nodes SET confirmed_config_sha256 = staged_config_sha256 WHERE node_id = ?").run(dynamics[0]);

  const ids = async (query: string) => (await nodesPage(h, config.config_id, query)).nodes.map((n) => n.node_id);
  assert.deepEqual(await ids("presence=online"), [dynamics[0], dynamics[1]]);
  assert.deepEqual(await ids("presence=dropped"), [dynamics[2]]);
  assert.deepEqual(await ids("presence=offline"), [...statics, ...dynamics.slice(3)]);
  assert.deepEqual(await ids("mode=static"), statics);
  assert.deepEqual(await ids("sync=latest"), [dynamics[0]]);
  assert.deepEqual(await ids("sync=pending"), dynamics.slice(1));
  assert.deepEqual(await ids("sync=static"), statics);
  assert.deepEqual(await ids("q=EDGE-00"), statics, "name, case-insensitive");
  assert.deepEqual(await ids("q=eu"), statics, "tag");
  assert.deepEqual(await ids("q=10.60.0.5"), [dynamics[0]], "tunnel address (statics have .1–.4, dynamics .5–.10)");
  assert.deepEqual(await ids("q=%25"), [], "% is a character, not a wildcard");
  assert.deepEqual(await ids("presence=online&sync=pending&limit=1"), [dynamics[1]]);
  // The views of the filtered list say what was filtered on.
  for (const n of (await nodesPage(h, config.config_id, "presence=online")).nodes) assert.equal(n.client.client_presence_state, "online");

  const counts = await h.req("GET", `/api/v1/configs/${config.config_id}/node-counts?mode=dynamic`);
  assert.equal(counts.status, 200, counts.text);
  assert.deepEqual(counts.json, {
    total: 10,
    matching: 6,
    presence: { online: 2, dropped: 1, offline: 7 },
    mode: { static: 4, dynamic: 6 },
    sync: { latest: 1, pending: 5, static: 4 },
  });
  assert.equal((await h.req("GET", `/api/v1/configs/${config.config_id}/node-counts`)).json.matching, 10);
  assertError(await h.req("GET", "/api/v1/configs/nope/node-counts"), "NOT_FOUND");
  assertError(await h.req("GET", "/api/v1/configs/nope/nodes"), "NOT_FOUND");
});

test("a bad cursor answers 400 INVALID_CURSOR, a bad limit or filter 400 VALIDATION_FAILED, and nothing is written", async (t) => {
  const h = await startHarness(t);
  const a = await createConfig(h);
  const b = await createConfig(h, { network_cidr: "10.21.0.0/24" });
  await seedNodes(h, a.config_id, 3, "a");
  await seedNodes(h, b.config_id, 3, "b");
  const cursorOfA = (await nodesPage(h, a.config_id, "limit=1")).next_cursor;
  assert.ok(cursorOfA);
  const configCursor = (await h.req("GET", "/api/v1/configs?limit=1")).json.next_cursor;
  assert.ok(configCursor);
  const before = h.fingerprint();
  const nodesOfB = `/api/v1/configs/${b.config_id}/nodes`;
  for (const [cursor, why] of [
    ["garbage!", "not base64url"],
    [Buffer.from("{not json").toString("base64url"), "not JSON"],
    [Buffer.from(JSON.stringify({ l: "nodes", c: b.config_id, at: "x", id: "n" })).toString("base64url"), "wrong types"],
    [cursorOfA, "another config's cursor"],
    [configCursor, "the config list's cursor"],
  ] as const) {
    assertError(await h.req("GET", `${nodesOfB}?cursor=${encodeURIComponent(cursor)}`), "INVALID_CURSOR", why);
  }
  assertError(await h.req("GET", `/api/v1/configs?cursor=${encodeURIComponent(cursorOfA)}`), "INVALID_CURSOR", "a node cursor on the config list");
  for (const q of ["limit=0", "limit=1001", "limit=abc", "limit=1.5", "presence=gone", "sync=old", "mode=x", "colour=red", `q=${"x".repeat(201)}`, "cursor="]) {
    assertError(await h.req("GET", `${nodesOfB}?${q}`), "VALIDATION_FAILED", q);
  }
  assertError(await h.req("GET", "/api/v1/configs?limit=0"), "VALIDATION_FAILED");
  assert.equal(h.fingerprint(), before);
});

test("config pages in creation order with total and a name filter", async (t) => {
  const h = await startHarness(t);
  const made: string[] = [];
  for (let i = 0; i < 5; i++) {
    h.clock.advance(1);
    made.push((await createConfig(h, { name: i % 2 === 0 ? `Lab-${i}` : `prod-${i}`, network_cidr: `10.${70 + i}.0.0/24` })).config_id);
  }
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await h.req("GET", `/api/v1/configs?limit=2${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.total, 5);
    assert.equal(res.json.matching, 5);
    seen.push(...res.json.configs.map((c: { config_id: string }) => c.config_id));
    cursor = res.json.next_cursor;
  } while (cursor !== null);
  assert.deepEqual(seen, made);
  const labs = await h.req("GET", "/api/v1/configs?q=lab");
  assert.deepEqual(labs.json.configs.map((c: { config_id: string }) => c.config_id), [made[0], made[2], made[4]]);
  assert.equal(labs.json.matching, 3);
  assert.equal(labs.json.total, 5);
});

test("spec §2.8: control-log pages newest first cover every row once while new rows arrive; kind filter; counts by kind", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const [nodeId] = await seedNodes(h, config.config_id, 1, "logger");
  assert.ok(nodeId);
  const sqlite = sqliteOf(h.server.store);
  const event = (i: number, at: number) => ({
    config_id: config.config_id,
    node_id: nodeId,
    kind: i % 3 === 0 ? ("output" as const) : ("event" as const),
    request_id: null,
    level: "info",
    event: i % 3 === 0 ? "command_output" : "mqtt_connected",
    message: `m${i}`,
    action: null,
    stream: null,
    output: null,
    created_at: at,
  });
  // 17 rows, several sharing a created_at; newest first is insertion order (log_id), spec §2.8.
  const stored = insertClientEventLogs(sqlite, Array.from({ length: 17 }, (_, i) => event(i, 1_000 + Math.floor(i / 3))));
  const newestFirst = [...stored].sort((x, y) => y.log_id - x.log_id).map((r) => r.log_id);
  const path = `/api/v1/configs/${config.config_id}/nodes/${nodeId}/control-logs`;
  const seen: number[] = [];
  let cursor: string | null = null;
  let i = 100;
  do {
    const res = await h.req("GET", `${path}?limit=4${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`);
    assert.equal(res.status, 200, res.text);
    seen.push(...res.json.logs.map((l: { log_id: number }) => l.log_id));
    cursor = res.json.next_cursor;
    insertClientEventLogs(sqlite, [event(1, 5_000 + i++)]); // an event row newer than every listed row: never on a later page
  } while (cursor !== null);
  assert.deepEqual(seen, newestFirst);
  const outputs = await h.req("GET", `${path}?kind=output`);
  assert.deepEqual(
    outputs.json.logs.map((l: { log_id: number }) => l.log_id),
    newestFirst.filter((id) => stored.find((r) => r.log_id === id)?.kind === "output"),
  );
  assert.equal(outputs.json.counts.output, 6);
  assert.equal(outputs.json.counts.event, 11 + (i - 100));
  assert.equal(outputs.json.counts.command, 0);
  assertError(await h.req("GET", `${path}?cursor=${encodeURIComponent(Buffer.from(JSON.stringify({ l: "control_logs", n: "other", at: 1, id: 1 })).toString("base64url"))}`), "INVALID_CURSOR");
});

test("in a 12,000-node config a rare filter answers short pages, each scan bounded, that still cover every match once; counts are summed over chunks", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h, { network_cidr: "10.64.0.0/16" });
  const sqlite = sqliteOf(h.server.store);
  const ids: string[] = [];
  sqlite.transaction(() => {
    const node = sqlite.prepare(`INSERT INTO nodes (node_id, config_id, name, mode, interface_name, address, private_key, public_key, created_at, updated_at)
      VALUES (?, ?, ?, ?, 'svc0', ?, 'k', 'K', ?, ?)`);
    const client = sqlite.prepare("INSERT INTO node_client_state (node_id, client_initialized, client_presence_state, updated_at) VALUES (?, ?, ?, 0)");
    for (let i = 0; i < 12_000; i++) {
      const id = `node-bulk${String(i).padStart(8, "0")}`;
      ids.push(id);
      const dropped = i === 10 || i === 3_000 || i === 11_999;
      node.run(id, config.config_id, `bulk-${i}`, dropped ? "dynamic" : "static", `10.64.${i >> 8}.${i & 255}`, 1_000 + i, 1_000 + i);
      client.run(id, dropped ? 1 : 0, dropped ? "dropped" : "offline");
    }
  })();
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const page: Page = await nodesPage(h, config.config_id, `presence=dropped&limit=100${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`);
    pages.push(page.nodes.map((n) => n.node_id));
    cursor = page.next_cursor;
  } while (cursor !== null && pages.length < 20);
  // 2,000 nodes examined per request (NODE_SCAN_BUDGET): empty pages between matches, and one
  // after the last (its scan ended exactly on the last node, so the end was not yet known).
  assert.deepEqual(pages, [[ids[10]], [ids[3_000]], [], [], [], [ids[11_999]], []]);
  const counts = await h.req("GET", `/api/v1/configs/${config.config_id}/node-counts?presence=dropped`);
  assert.deepEqual(counts.json, {
    total: 12_000,
    matching: 3,
    presence: { online: 0, dropped: 3, offline: 11_997 },
    mode: { static: 11_997, dynamic: 3 },
    sync: { latest: 0, pending: 3, static: 11_997 },
  });
  // Unfiltered pages are always full.
  assert.equal((await nodesPage(h, config.config_id, "limit=1000")).nodes.length, 1000);
});
