/**
 * `npm run chaos`: the full chaos run (scripts/chaos-lib.ts says what it does
 * and counts). Prints progress and one table; asserts nothing (the short version in
 * test/chaos/chaos-short.test.ts asserts). Needs mosquitto and mosquitto_ctrl.
 *
 *   npm run chaos                       16 agents, 10,000 commands, 10 broker / 5 backend SIGKILLs
 *   CHAOS_SEED=7 CHAOS_COMMANDS=20000 npm run chaos
 */
import { formatReport, runChaos } from "./chaos-lib.js";

const num = (name: string, fallback: number): number => {
  const v = Number(process.env[name] ?? "");
  return Number.isFinite(v) && v > 0 ? v : fallback;
};

const report = await runChaos({
  seed: num("CHAOS_SEED", 15),
  agents: num("CHAOS_AGENTS", 16),
  commands: num("CHAOS_COMMANDS", 10_000),
  brokerRestarts: num("CHAOS_BROKER_RESTARTS", 10),
  backendKills: num("CHAOS_BACKEND_KILLS", 5),
  rebinds: num("CHAOS_REBINDS", 5),
  concurrency: num("CHAOS_CONCURRENCY", 8),
  commandTimeoutS: 5,
  detectTimeoutS: 2,
  onlineTtlMs: 6000,
  heartbeatMs: 2000,
  dropEveryMs: 400,
  failRate: 0.1,
  log: (line) => console.log(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`),
});
console.log(`\n${formatReport(report)}\n`);
