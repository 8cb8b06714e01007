/**
 * spec §6.5 rule 5: "with no active subscribers, the server does not keep generating pushes".
 * The hub drops what it is handed while nobody listens, so its metrics cannot tell whether a
 * payload was built and thrown away; this test counts the work itself, at the notifier's
 * injected seams: endpoint-status builds (`control.endpointStatusOf`), system-status builds and
 * store counts, and every read of the (real) mesh service over a real SQLite file. Every
 * publishing point starts its first read in the same synchronous call as its guard, so the
 * counts are read at once after the events; the live round after it shows the same events do
 * reach each seam.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { ControlLogView } from "../../src/actors/commands.js";
import type { NodeProjection } from "../../src/actors/projection.js";
import { isoTime, ManualClock } from "../../src/lib/clock.js";
import { createLogger } from "../../src/logger.js";
import type { SystemStatus } from "../../src/protocol/views.schema.js";
import { AppEvents } from "../../src/services/app-events.js";
import { MeshService, type MeshChange } from "../../src/services/mesh.service.js";
import { Notifier } from "../../src/services/notifier.js";
import { Store } from "../../src/store/db.js";

const COALESCE_MS = 100;

interface Work {
  endpointStatusBuilds: number;
  systemStatusBuilds: number;
  storeCounts: number;
  meshReads: number;
}

/** A mesh service whose every method call is counted (each one reads the store). */
function counted(mesh: MeshService, work: Work): MeshService {
  return new Proxy(mesh, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        work.meshReads++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

test("spec §6.5 rule 5: with no subscriber no publishing point builds an endpoint status, a system status or reads the store; with one, each does", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-notifier-idle-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const store = await Store.open(join(dir, "svc.db"), createLogger("silent"));
  t.after(() => store.close());
  const clock = new ManualClock();
  const mesh = new MeshService({ store, clock, mqttEnabled: true });
  const configId = (await mesh.createConfig({ name: "c", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" })).config_id;
  const nodeId = (await mesh.createNode(configId, { name: "n", mode: "dynamic", public_address: "192.0.2.1" })).node_id;

  const work: Work = { endpointStatusBuilds: 0, systemStatusBuilds: 0, storeCounts: 0, meshReads: 0 };
  let subscribers = 0;
  const published: string[] = [];
  let statusSeen: () => void = () => {};
  const hub = {
    publish: (type: string) => {
      published.push(type);
      if (type === "system.status.updated") statusSeen();
    },
    subscriberCount: () => subscribers,
  };
  const events = new AppEvents();
  new Notifier({
    events,
    hub: hub as never,
    mesh: counted(mesh, work),
    control: {
      endpointStatusOf: () => {
        work.endpointStatusBuilds++;
        return {} as never; // the payload's content is not under test: only that it was built
      },
    },
    status: async () => {
      work.systemStatusBuilds++;
      return { summary: { configs: 1, nodes: 1 }, topology: { mesh_pairs: 0 } } as unknown as SystemStatus;
    },
    countsOffThread: async () => {
      work.storeCounts++;
      return null;
    },
    clock,
    log: createLogger("silent"),
    renderedCoalesceMs: COALESCE_MS,
  });

  const projection: NodeProjection = {
    mode: "dynamic",
    clientInitialized: true,
    presence: "online",
    runtime: "running",
    bindToken: "used",
    sync: "pending",
    lastReachableAt: clock.now(),
    lastSignalAt: clock.now(),
    clientVersion: "1.0.0",
    confirmedVersion: null,
    confirmedSha: null,
    confirmedProtocol: null,
    stagedVersion: 1,
    stagedSha: "a".repeat(64),
  };
  const log: ControlLogView = {
    log_id: 1, config_id: configId, node_id: nodeId, request_id: "r-1", kind: "command", action: "start", status: "pending",
    message: null, stream: null, output: null, level: null, event: null, created_at: isoTime(clock.now()), updated_at: isoTime(clock.now()),
  };
  const write: MeshChange = { configId, created: [], deleted: [], modeChanged: [], touched: [nodeId], staged: [] };
  const rendered: MeshChange = { configId, created: [], deleted: [], modeChanged: [], touched: [], staged: [{ nodeId, version: 2, sha: "b".repeat(64) }], rendered: true };
  /** Every app event the notifier publishes from, and the end of the rendering window. */
  const everyPublishingPoint = () => {
    events.emit("node.status_changed", configId, nodeId, projection);
    events.emit("control.log", "created", log);
    events.emit("broker.connection_changed");
    events.emit("mesh.changed", write);
    events.emit("mesh.changed", rendered);
    clock.advance(COALESCE_MS);
  };

  everyPublishingPoint();
  assert.deepEqual(work, { endpointStatusBuilds: 0, systemStatusBuilds: 0, storeCounts: 0, meshReads: 0 }, "no subscriber: nothing built, nothing read");
  assert.deepEqual(published, []);

  // One console opens: the same events reach every seam (the counts above could have moved).
  subscribers = 1;
  let statuses = 0;
  const threeStatuses = new Promise<void>((resolve) => {
    statusSeen = () => {
      if (++statuses === 3) resolve();
    };
  });
  everyPublishingPoint();
  await threeStatuses; // the broker change, the write and the rendering report each end with one
  assert.equal(work.endpointStatusBuilds, 1);
  assert.ok(work.meshReads > 0, "the mesh write's views read the store");
  assert.equal(work.systemStatusBuilds, 3);
  assert.ok(work.storeCounts >= 2, "the broker change and the write count the store");
  const types = new Set<string>(published);
  assert.ok(types.has("endpoint.status.updated") && types.has("control.log.created"));

  // A rendering report gathered while a console watched, whose console closed before the window
  // ended: the window's end builds nothing either.
  const before = { ...work };
  const publishedBefore = published.length;
  events.emit("mesh.changed", rendered);
  subscribers = 0;
  clock.advance(COALESCE_MS);
  assert.deepEqual(work, before, "the last subscriber left during the window: nothing built, nothing read");
  assert.equal(published.length, publishedBefore);
});
