/**
 * Reports of after-commit rendering (`MeshChange.rendered`: a large write's
 * dynamic nodes rendered in small batches) are coalesced by the notifier for its window, then
 * published once per config — one `config.list.updated`, one `config.overview.updated`, one
 * `node.apply.updated` per node with its latest (version, sha), one `system.status.updated` —
 * instead of a whole overview per batch (spec §6.5: the same events and payloads; rule 6: after
 * the commit, which the reports follow). A write is still published at once. Real SQLite, a real
 * MeshService; the hub is a recording fake at its seam; time moves by a ManualClock.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ManualClock } from "../../src/lib/clock.js";
import { AppEvents } from "../../src/services/app-events.js";
import { createLogger } from "../../src/logger.js";
import { MeshService, type MeshChange } from "../../src/services/mesh.service.js";
import { countedAfresh, Notifier, systemStatus, type StoreCounts } from "../../src/services/notifier.js";
import type { SystemStatus } from "../../src/protocol/views.schema.js";
import { Store } from "../../src/store/db.js";

type Published = { type: string; payload: unknown };

/** A real store in a temporary directory, with a mesh service on a manual clock. */
async function meshStore(t: { after: (fn: () => unknown) => void }) {
  const dir = mkdtempSync(join(tmpdir(), "svc-notifier-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const clock = new ManualClock();
  return { store, clock, mesh: new MeshService({ store, clock, mqttEnabled: true }) };
}

/** A hub stand-in that keeps each system status published; `nextStatus` resolves at the next one. */
function statusHub(live: () => boolean = () => true) {
  const statuses: SystemStatus[] = [];
  let statusSeen: () => void = () => {};
  const hub = {
    publish: (type: string, payload: unknown) => {
      if (type !== "system.status.updated") return;
      statuses.push(payload as SystemStatus);
      statusSeen();
    },
    subscriberCount: () => (live() ? 1 : 0),
  };
  return { hub: hub as never, statuses, nextStatus: () => new Promise<void>((resolve) => (statusSeen = resolve)) };
}

async function setup(t: { after: (fn: () => unknown) => void }) {
  const { clock, mesh } = await meshStore(t);
  const published: Published[] = [];
  let statusSeen: () => void = () => {};
  const hub = {
    publish: (type: string, payload: unknown) => {
      published.push({ type, payload });
      if (type === "system.status.updated") statusSeen();
    },
    subscriberCount: () => 1,
  };
  // The status's content is not under test here: a fixed object stands in.
  const status = async () => ({ summary: {}, topology: {} }) as unknown as SystemStatus;
  const control = { endpointStatusOf: () => assert.fail("no endpoint status in this test") };
  const notifier = new Notifier({ events: new AppEvents(), hub: hub as never, mesh, control, status, clock, log: createLogger("silent"), renderedCoalesceMs: 250 });
  const nextStatus = () => new Promise<void>((resolve) => (statusSeen = resolve));
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).config_id;
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await mesh.createNode(configId, { name: `n${i}`, mode: "static", public_address: "192.0.2.1", listen_port: 51820 + i })).node_id);
  return { clock, notifier, published, nextStatus, configId, ids };
}

const rendered = (configId: string, staged: MeshChange["staged"]): MeshChange => ({ configId, created: [], deleted: [], modeChanged: [], touched: [], staged, rendered: true });

test("spec §6.5: three rendering reports within the window publish one config list, one overview, one node.apply.updated per node (its latest version and sha) and one system status, once the window ends", async (t) => {
  const { clock, notifier, published, nextStatus, configId, ids } = await setup(t);
  const [a, b] = ids as [string, string];
  notifier.meshChanged(rendered(configId, [{ nodeId: a, version: 1, sha: "a1" }]));
  notifier.meshChanged(rendered(configId, [{ nodeId: b, version: 1, sha: "b1" }]));
  notifier.meshChanged(rendered(configId, [{ nodeId: a, version: 2, sha: "a2" }]));
  await new Promise<void>((resolve) => setImmediate(resolve));
  assert.equal(published.length, 0, "nothing is built while the window is open");

  const done = nextStatus();
  clock.advance(249);
  assert.equal(published.length, 0);
  clock.advance(1);
  await done;
  assert.deepEqual(published.map((p) => p.type).filter((type) => type !== "node.apply.updated"), ["config.list.updated", "config.overview.updated", "system.status.updated"]);
  const applies = published.filter((p) => p.type === "node.apply.updated").map((p) => p.payload as { node_id: string; preview: { config_version: number; config_sha256: string } });
  assert.deepEqual(
    applies.map((p) => [p.node_id, p.preview.config_version, p.preview.config_sha256]).sort(),
    [[a, 2, "a2"], [b, 1, "b1"]].sort(),
    "each node once, with its latest staging",
  );

  // The next report opens a new window.
  published.length = 0;
  notifier.meshChanged(rendered(configId, [{ nodeId: b, version: 2, sha: "b2" }]));
  const again = nextStatus();
  clock.advance(250);
  await again;
  assert.equal(published.filter((p) => p.type === "config.overview.updated").length, 1);
});

test("spec §6.5 rule 6: a write (not a rendering report) is published at once, with no window", async (t) => {
  const { notifier, published, nextStatus, configId, ids } = await setup(t);
  const done = nextStatus();
  notifier.meshChanged({ configId, created: [], deleted: [], modeChanged: [], touched: [ids[0] as string], staged: [] });
  await done;
  assert.deepEqual(
    published.map((p) => p.type).filter((type) => type !== "mesh.workspace.updated"),
    ["config.list.updated", "config.overview.updated", "node.workspace.updated", "system.status.updated"],
  );
});

test("spec §6.5: a rendering report's system status reuses the store counts of the last status counted, and counts again after any other write, a restore, a write no console saw, or a write committed while counting", async (t) => {
  const { store, clock, mesh } = await meshStore(t);
  let live = true;
  const { hub, statuses, nextStatus } = statusHub(() => live);
  // The real status over the real store; each call records whether it was handed counts.
  const handed: Array<StoreCounts | undefined> = [];
  let duringCount: () => void = () => {};
  const status = async (counts?: StoreCounts) => {
    handed.push(counts);
    if (counts === undefined) duringCount();
    const deps = { store, registry: undefined as never, mqttEnabled: false, brokerConnected: () => false, releaseDownloadUrl: "" };
    return systemStatus(deps, counts);
  };
  const control = { endpointStatusOf: () => assert.fail("no endpoint status in this test") };
  const notifier = new Notifier({ events: new AppEvents(), hub, mesh, control, status, clock, log: createLogger("silent"), renderedCoalesceMs: 10 });
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).config_id;
  const a = (await mesh.createNode(configId, { name: "a", mode: "static", public_address: "192.0.2.1", listen_port: 51820 })).node_id;
  const write = (): MeshChange => ({ configId, created: [], deleted: [], modeChanged: [], touched: [a], staged: [] });
  const next = async (change: MeshChange): Promise<SystemStatus> => {
    const seen = nextStatus();
    notifier.meshChanged(change);
    clock.advance(10);
    await seen;
    return statuses.at(-1) as SystemStatus;
  };
  const counted = (s: SystemStatus) => [s.summary.configs, s.summary.nodes, s.topology.mesh_pairs];

  // A write counts.
  assert.deepEqual(counted(await next(write())), [1, 1, 0]);
  assert.equal(handed.at(-1), undefined, "a write's status counts the store");
  // A node (auto-paired with a) appears behind the notifier's back (no report of it yet): a
  // rendering report does not count.
  const b = (await mesh.createNode(configId, { name: "b", mode: "static", public_address: "192.0.2.2", listen_port: 51821 })).node_id;
  assert.deepEqual(counted(await next(rendered(configId, [{ nodeId: a, version: 1, sha: "a1" }]))), [1, 1, 0]);
  assert.deepEqual(handed.at(-1), { configs: 1, nodes: 1, mesh_pairs: 0 }, "the rendering report took the counts it was handed");
  // The write's own report counts again, and the next rendering report takes those counts.
  assert.deepEqual(counted(await next(write())), [1, 2, 1]);
  assert.deepEqual(counted(await next(rendered(configId, [{ nodeId: b, version: 1, sha: "b1" }]))), [1, 2, 1]);
  assert.notEqual(handed.at(-1), undefined);

  // A write while no console listens publishes nothing, yet the next rendering report counts.
  live = false;
  await mesh.createNode(configId, { name: "d", mode: "static", public_address: "192.0.2.4", listen_port: 51823 });
  notifier.meshChanged(write());
  live = true;
  assert.deepEqual(counted(await next(rendered(configId, [{ nodeId: b, version: 2, sha: "b2" }]))), [1, 3, 3]);
  assert.equal(handed.at(-1), undefined, "counted after a write no console saw");

  // A restore (the status it publishes is countedAfresh, as the composition root wires it): the
  // next rendering report counts.
  await mesh.createNode(configId, { name: "c", mode: "static", public_address: "192.0.2.3", listen_port: 51822 });
  await countedAfresh(notifier, () => Promise.resolve(statuses.at(-1) as SystemStatus))();
  assert.deepEqual(counted(await next(rendered(configId, [{ nodeId: a, version: 2, sha: "a2" }]))), [1, 4, 6]);
  assert.equal(handed.at(-1), undefined, "counted after a restore");

  // A write that commits while the counts are read: those counts are not reused.
  duringCount = () => {
    duringCount = () => {};
    notifier.countsChanged();
  };
  await next(write());
  await next(rendered(configId, [{ nodeId: b, version: 3, sha: "b3" }]));
  assert.equal(handed.at(-1), undefined, "counts read across a write are counted again");
  await next(rendered(configId, [{ nodeId: a, version: 4, sha: "a4" }]));
  assert.notEqual(handed.at(-1), undefined, "and reused once counted cleanly");
});

test("a report's system status takes the store counts read off the event loop's thread when they can be (countsOffThread), and a rendering report reuses them", async (t) => {
  const { clock, configId, ids } = await setup(t);
  const handed: Array<StoreCounts | undefined> = [];
  const { hub, nextStatus } = statusHub();
  const status = async (counts?: StoreCounts) => {
    handed.push(counts);
    const c = counts ?? { configs: 0, nodes: 0, mesh_pairs: 0 };
    return { summary: { configs: c.configs, nodes: c.nodes }, topology: { mesh_pairs: c.mesh_pairs } } as unknown as SystemStatus;
  };
  const offThread = { configs: 3, nodes: 30, mesh_pairs: 435 };
  let asked = 0;
  const countsOffThread = () => {
    asked++;
    return Promise.resolve(offThread);
  };
  const mesh = { listConfigs: async () => [], getConfig: async () => ({ nodes: [], tags: [] }), listPairs: async () => ({ mesh_pairs: [], next_cursor: null }) };
  const notifier = new Notifier({ events: new AppEvents(), hub, mesh: mesh as never, control: { endpointStatusOf: () => assert.fail("none") }, status, countsOffThread, clock, log: createLogger("silent"), renderedCoalesceMs: 10 });
  const next = async (change: MeshChange) => {
    const seen = nextStatus();
    notifier.meshChanged(change);
    clock.advance(10);
    await seen;
  };
  await next({ configId, created: [], deleted: [], modeChanged: [], touched: [], staged: [] });
  assert.deepEqual(handed.at(-1), offThread, "a write's status took the counts read off the thread");
  assert.equal(asked, 1);
  await next(rendered(configId, [{ nodeId: ids[0] as string, version: 1, sha: "a1" }]));
  assert.deepEqual(handed.at(-1), offThread);
  assert.equal(asked, 1, "a rendering report did not read them again");
});

