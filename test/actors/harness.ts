import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { createActor, type Actor } from "xstate";
import { GroupCommit, type GroupCommitDeps } from "../../src/actors/group-commit.js";
import { HeartbeatCoalescer } from "../../src/actors/heartbeat-coalescer.js";
import { newEntry, NodeEntries, type Entry } from "../../src/actors/node-entries.js";
import { PresenceSweep } from "../../src/actors/presence-sweep.js";
import type { NodeProjection } from "../../src/actors/projection.js";
import { RecorderSink, type RecorderSinkDeps } from "../../src/actors/recorder-sink.js";
import { afterEventsOf, type RoutedNodeEvent } from "../../src/actors/recorder.js";
import { Rehydrator } from "../../src/actors/rehydration.js";
import type { RegistryDeps } from "../../src/actors/registry.js";
import type { ManualClock } from "../../src/lib/clock.js";
import { nodeMachine, type NodeMachine } from "../../src/machines/node.machine.js";
import { createLogger } from "../../src/logger.js";
import { insertConfig } from "../../src/store/configs.repository.js";
import { Store } from "../../src/store/db.js";
import { insertNode } from "../../src/store/nodes.repository.js";
import { sqliteOf } from "../../src/store/connection.js";

/** Shared set-up of the actor tests: a real SQLite file, migrated, and a second connection. */

export const log = createLogger("silent");
export const CONFIG = "cfg-1";

/** A fresh SQLite file path in a temp directory removed after the test. */
export function tempDbFile(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), "svc-actors-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "svc.db");
}

/**
 * Opens `file` twice: `store` for the part under test and `reader`, a second connection that
 * sees only committed data. `close()` closes both; the caller registers it after stopping
 * what uses them (`t.after` hooks run in the order they were added).
 */
export async function openStores(file: string): Promise<{ store: Store; reader: Store; close(): Promise<void> }> {
  const store = await Store.open(file, log);
  const reader = await Store.open(file, log);
  return {
    store,
    reader,
    close: async () => {
      await reader.close();
      await store.close();
    },
  };
}

/** Stores config {@link CONFIG} and one dynamic node per id (rows only; no actor). */
export async function seedNodes(store: Store, ids: string[]): Promise<void> {
  await insertConfig(store.db, {
    config_id: CONFIG,
    name: "mesh",
    tunnel_protocol: "wireguard",
    network_cidr: "10.9.0.0/24",
    awg_params: null,
    created_at: 0,
    updated_at: 0,
  });
  for (const [i, id] of ids.entries()) {
    await insertNode(
      store.db,
      {
        node_id: id,
        config_id: CONFIG,
        name: id,
        mode: "dynamic",
        interface_name: "svc0",
        address: `10.9.0.${i + 1}`,
        staged_config_version: 0,
        private_key: "k",
        public_key: "p",
        created_at: 0,
        updated_at: 0,
      },
      0,
    );
  }
}

/** A logger that keeps every line it writes (JSON objects), for tests that check what is logged. */
export function capturingLog(level = "info"): { log: ReturnType<typeof createLogger>; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  return { log: createLogger(level, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) }), lines };
}

/** The online TTL and detect timeout the part tests give their node machines, ms. */
export const PART_TTL_MS = 45 * 60_000;
export const PART_DETECT_MS = 20_000;

/**
 * What a `NodeActorRegistry` over `store` needs in a test: the silent log, {@link PART_TTL_MS},
 * {@link PART_DETECT_MS}, effects and status changes ignored, unless `overrides` says otherwise.
 */
export function registryDeps(store: Store, clock: ManualClock, overrides: Partial<RegistryDeps> = {}): RegistryDeps {
  return {
    store,
    clock,
    log,
    onlineTtlMs: PART_TTL_MS,
    detectTimeoutMs: PART_DETECT_MS,
    effects: { revokeClient: () => {}, requestConfigPush: () => {} },
    onStatusChanged: () => {},
    ...overrides,
  };
}

/**
 * The registry's parts wired as `NodeActorRegistry` wires them, over a real store and a
 * ManualClock, for the tests of one part with its real neighbours: `told` collects the status
 * changes the group commit reports, `effects` the machine effects it ran.
 */
export interface Parts {
  entries: NodeEntries;
  recorder: RecorderSink;
  sweep: PresenceSweep<Entry>;
  coalescer: HeartbeatCoalescer;
  commit: GroupCommit;
  rehydrator: Rehydrator;
  told: Array<{ nodeId: string; projection: NodeProjection }>;
  effects: string[];
  /** Delivers an event as the registry does (coalescing aside): through the recorder, as the cause. */
  deliver(entry: Entry, event: RoutedNodeEvent): void;
}

export function buildParts(
  store: Store,
  clock: ManualClock,
  opts: { coalesce?: boolean; listener?: GroupCommitDeps["listener"]; retention?: RecorderSinkDeps["timelineRetention"]; partLog?: typeof log } = {},
): Parts {
  const partLog = opts.partLog ?? log;
  const told: Parts["told"] = [];
  const effects: string[] = [];
  let commit: GroupCommit | undefined;
  const queue = (effect: string) => commit?.queueEffect(() => void effects.push(effect));
  const machine = nodeMachine.provide({
    actions: {
      revokeClient: ({ context }, params) => queue(`revoke ${context.nodeId} ${params.reason}`),
      requestConfigPush: ({ context }) => queue(`push ${context.nodeId}`),
    },
  });
  const entries = new NodeEntries();
  const recorder = new RecorderSink({ store, clock, log: partLog, afterEvents: afterEventsOf(machine.root), ...(opts.retention ? { timelineRetention: opts.retention } : {}) });
  const parts: Partial<Parts> = {};
  const sweep = new PresenceSweep<Entry>({ clock, enabled: true, onDue: (entry, now) => parts.deliver?.(entry, { type: "presence.ttl_check", at: now }) });
  const coalescer = new HeartbeatCoalescer({ enabled: opts.coalesce ?? false, sweep, recorder });
  commit = new GroupCommit({
    store,
    clock,
    log: partLog,
    recorder,
    coalescer,
    listener: opts.listener ?? { onStatusChanged: (_c, nodeId, projection) => void told.push({ nodeId, projection }) },
  });
  const rehydrator = new Rehydrator({ machine, clock, log: partLog, onlineTtlMs: PART_TTL_MS, detectTimeoutMs: PART_DETECT_MS, timersEnabled: true, entries, recorder, sweep, commit });
  const deliver = (entry: Entry, event: RoutedNodeEvent) => recorder.sendAs(rehydrator.actorOf(entry), event);
  return Object.assign(parts, { entries, recorder, sweep, coalescer, commit, rehydrator, told, effects, deliver });
}

/** A started node actor of the plain node machine and a live entry holding it (not under any part). */
export function liveNode(clock: ManualClock, nodeId: string): { actor: Actor<NodeMachine>; entry: Entry } {
  const actor = createActor(nodeMachine, { input: { configId: CONFIG, nodeId, mode: "dynamic", onlineTtlMs: PART_TTL_MS, detectTimeoutMs: PART_DETECT_MS }, clock });
  actor.start();
  const row = { node_id: nodeId, config_id: CONFIG, mode: "dynamic" as const, staged_config_version: 0, staged_config_sha256: null, machine_snapshot: null, machine_version: null };
  return { actor, entry: newEntry({ configId: CONFIG, nodeId, mode: "dynamic" }, row, { kind: "live", actor }, undefined) };
}

/**
 * Counts the transactions opened on `store`'s real connection from now on (observation only:
 * each transaction still runs as it would). Returns the count so far.
 */
export function countTransactions(store: Store): () => number {
  let transactions = 0;
  const sqlite = sqliteOf(store);
  const realTransaction = sqlite.transaction.bind(sqlite);
  sqlite.transaction = ((fn: Parameters<typeof realTransaction>[0]) => {
    const tx = realTransaction(fn);
    return ((...args: unknown[]) => {
      transactions++;
      return tx(...(args as []));
    }) as unknown as typeof tx;
  }) as typeof sqlite.transaction;
  return () => transactions;
}
