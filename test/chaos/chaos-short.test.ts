import assert from "node:assert/strict";
import { test } from "node:test";
import { formatReport, mosquittoInstalled, runChaos } from "../../scripts/chaos-lib.js";
import { requireSystem } from "../helpers/system.js";

/**
 * The short chaos run (the full one is `npm run chaos`): a real Mosquitto with
 * dynamic security, the backend as a child process on one data directory, 6 stand-in agents;
 * ≥ 500 commands over REST while Mosquitto is SIGKILLed and restarted twice and the backend
 * once, one node is reset and bound again, and agent connections drop at random. Seeded; real time across processes, every wait
 * bounded (scripts/chaos-lib.ts). Jepsen-style accounting from the database the backend wrote.
 */
test(
  "chaos (short): every command ends in exactly one terminal status, none lost, duplicated or stuck; presence converges within TTL + detect timeout; integrity ok; broker accounts = database (spec §3.4, §6.4 rules 1–2, §3.1, §4 rules 11–12)",
  { timeout: 90_000 },
  async (t) => {
    if (!mosquittoInstalled() && !requireSystem(t, { binaries: ["mosquitto", "mosquitto_ctrl"] })) return;
    const lines: string[] = [];
    const started = Date.now();
    const r = await runChaos({
      seed: 1308,
      agents: 6,
      commands: 500,
      brokerRestarts: 2,
      backendKills: 1,
      rebinds: 1,
      concurrency: 4,
      commandTimeoutS: 3,
      detectTimeoutS: 2,
      onlineTtlMs: 4000,
      heartbeatMs: 1000,
      dropEveryMs: 400,
      failRate: 0.1,
      log: (line) => lines.push(`${((Date.now() - started) / 1000).toFixed(1)} s: ${line}`),
    });
    const table = `${lines.join("\n")}\n${formatReport(r)}`;
    t.diagnostic(table);
    assert.ok(r.sent >= 500, table);
    assert.equal(r.brokerRestarts, 2, table);
    assert.equal(r.backendKills, 1, table);
    assert.equal(r.rebinds, 1, table);
    // spec §3.4, §6.4 rule 2: one terminal status per command, none lost, none twice, none open.
    assert.equal(r.lost, 0, table);
    assert.equal(r.duplicated, 0, table);
    assert.equal(r.stuck, 0, table);
    assert.equal(r.orphansStuck, 0, table);
    assert.equal(r.applied + r.failed + r.timedOut, r.sent, table);
    // A command is closed `applied` only by the agent's applied ACK with its request_id.
    assert.equal(r.phantom, 0, table);
    // spec §3.1: presence converges to the truth within online TTL + detect timeout.
    assert.ok(r.convergenceMs !== null && r.convergenceMs <= r.convergenceBoundMs, table);
    assert.equal(r.integrity, "ok", table);
    // spec §4 rules 11–12: the broker's accounts are the database's.
    assert.ok(r.accountsEqual, table);
    assert.ok(r.databaseAccounts === 6, table);
  },
);
