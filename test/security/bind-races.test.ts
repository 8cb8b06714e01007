import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { promisify } from "node:util";
import { hashToken } from "../../src/domain/tokens.js";
import { createLogger } from "../../src/logger.js";
import { nodeUsername, parseNodeUsername } from "../../src/mqtt/authz.policy.js";
import { BrokerPasswordVault } from "../../src/mqtt/broker-passwords.js";
import { passwordFingerprint } from "../../src/mqtt/mosquitto-admin.js";
import { api, dynamicNode } from "../control/agent-harness.js";
import { startSseServer } from "../events/sse-harness.js";
import { mosquitto, mosquittoSettings, startService, tempDataDir, until, type MosquittoBroker, type Service } from "../mqtt/mosquitto-harness.js";
import { dynamicNode as mosquittoNode } from "../mqtt/mosquitto-harness.js";
import { loopbackAddress, mulberry32, postFrom, seedFromEnv } from "./seed.js";
import { sqliteOf } from "../../src/store/connection.js";

/**
 * Bind races (spec §2.5, §3.6, §4 rules 11-12): many concurrent redemptions of
 * one bind token over real HTTP, and bind racing reset-client and dynamic → static against a real
 * Mosquitto, after which the broker holds exactly the accounts the database holds.
 * Seeded (SVC_TEST_SEED) and bounded; figures printed for docs/reliability.md.
 */

const execFileP = promisify(execFile);
const SEED = seedFromEnv();
const ROUNDS = Number(process.env.SVC_BIND_RACE_ROUNDS ?? 1000);
const CONCURRENCY = 16;

const tokenOf = (command: string): string => {
  const token = /--token (\S+)$/.exec(command)?.[1];
  assert.ok(token, command);
  return token;
};

const redeemBody = (token: string, baseUrl: string) => ({ bind_token: token, server_url: baseUrl, client_version: "1.0.0", platform: "linux", hostname: "race" });

/** One redemption over HTTP from the `n`-th loopback address (every public route is limited per address). */
const redeem = (baseUrl: string, token: string, n: number) => postFrom(baseUrl, "/api/client/bind", redeemBody(token, baseUrl), loopbackAddress(n));

test(`spec §2.5 "used successfully once", §3.6 row 1, §4 rule 11: ${ROUNDS} rounds of ${CONCURRENCY} concurrent redemptions of one token over HTTP: exactly one 200 per round, the others 409 BIND_TOKEN_USED; the database holds the winner's password only`, async (t) => {
  const s = await startSseServer(t);
  const { configId, nodeId } = await dynamicNode(s);
  const started = Date.now();
  let wins = 0;
  let refused = 0;
  let last = "";
  for (let round = 0; round < ROUNDS; round++) {
    const cmd = await api(s, "POST", `/api/v1/configs/${configId}/nodes/${nodeId}/bind-command`);
    assert.equal(cmd.status, 200, JSON.stringify(cmd.json));
    const token = tokenOf(cmd.json.command);
    const results = await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => redeem(s.baseUrl, token, round * CONCURRENCY + i)));
    const ok = results.filter((r) => r.status === 200);
    assert.equal(ok.length, 1, `round ${round}: ${results.map((r) => r.status).join(",")}`);
    for (const r of results) if (r.status !== 200) assert.deepEqual([r.status, r.json.error.code], [409, "BIND_TOKEN_USED"], `round ${round}`);
    wins += 1;
    refused += results.length - 1;
    last = ok[0]?.json.mqtt.password;
  }
  // What the embedded broker reads at CONNECT: one hash, the last winner's.
  const rows = sqliteOf(s.server.store).prepare("SELECT mqtt_username AS u, mqtt_password_hash AS h FROM node_client_state WHERE mqtt_password_hash IS NOT NULL").all() as Array<{ u: string; h: string }>;
  assert.deepEqual(rows, [{ u: nodeUsername(configId, nodeId), h: hashToken(last) }], "the last winner's password, hashed");
  const used = sqliteOf(s.server.store).prepare("SELECT state, COUNT(*) AS n FROM bind_tokens GROUP BY state ORDER BY state").all();
  assert.deepEqual(used, [{ state: "used", n: ROUNDS }]);
  assert.ok(last.length > 0);
  console.log(`# bind races: rounds=${ROUNDS} concurrency=${CONCURRENCY} successes=${wins} refused=${refused} wall_ms=${Date.now() - started}`);
});

/** The node accounts Mosquitto's dynamic security holds: username → password fingerprint. */
async function brokerAccounts(m: MosquittoBroker): Promise<Map<string, string>> {
  const ctl = async (...args: string[]) =>
    (await execFileP("mosquitto_ctrl", ["-h", "127.0.0.1", "-p", String(m.port), "-u", m.adminUser, "-P", m.adminPassword, "dynsec", ...args])).stdout;
  const out = new Map<string, string>();
  for (const line of (await ctl("listClients")).split("\n")) {
    const username = line.trim();
    if (parseNodeUsername(username) === null) continue;
    const text = /Text description:\s*(\S+)/.exec(await ctl("getClient", username))?.[1] ?? "";
    out.set(username, text);
  }
  return out;
}

/** The node accounts the database holds: username → fingerprint of the password sealed for it. */
function databaseAccounts(s: Service): Map<string, string> {
  const rows = sqliteOf(s.server.store)
    .prepare(
      `SELECT s.mqtt_username AS u, b.password_sealed AS sealed FROM node_client_state s JOIN nodes n ON n.node_id = s.node_id
       JOIN broker_credentials b ON b.mqtt_username = s.mqtt_username
       WHERE s.client_initialized = 1 AND n.mode = 'dynamic' AND s.mqtt_password_hash IS NOT NULL`,
    )
    .all() as Array<{ u: string; sealed: string }>;
  const vault = new BrokerPasswordVault(s.dataDir, createLogger("silent"));
  return new Map(rows.map((r) => [r.u, passwordFingerprint(vault.open(r.u, r.sealed) ?? "unopenable")]));
}

const RACE_ROUNDS = Number(process.env.SVC_BIND_RACE_MOSQUITTO_ROUNDS ?? 40);

test(`spec §4 rules 11-12, §3.6 row 3, §3.1 dynamic → static: bind racing reset-client and bind racing a mode change (${RACE_ROUNDS} rounds each, real Mosquitto): afterwards no broker account survives that the database does not hold, and every account the database holds is at the broker with its password`, async (t) => {
  const m = await mosquitto(t);
  if (m === undefined) return;
  const s = await startService(t, mosquittoSettings(m, tempDataDir()));
  const sync = s.server.mqtt.sync;
  assert.ok(sync);
  await until("the backend reconciled with mosquitto", () => sync.state().reconciled > 0);
  const rnd = mulberry32(SEED);
  const started = Date.now();
  const outcomes = { bind_won: 0, bind_lost: 0, reset: 0, made_static: 0 };
  const nodes = await Promise.all([0, 1, 2, 3].map(() => mosquittoNode(s)));
  for (let round = 0; round < RACE_ROUNDS * 2; round++) {
    const { configId, nodeId } = nodes[round % nodes.length] as { configId: string; nodeId: string };
    const base = `/api/v1/configs/${configId}/nodes/${nodeId}`;
    const modeChange = round >= RACE_ROUNDS;
    if (modeChange) assert.equal((await s.api("PATCH", base, { mode: "dynamic" })).status, 200);
    const cmd = await s.api("POST", `${base}/bind-command`);
    assert.equal(cmd.status, 200, JSON.stringify(cmd.json));
    const token = tokenOf(cmd.json.command);
    // Seeded jitter of -8..2 ms: negative holds the rival back, positive the bind. The bind
    // (a fresh connection) starts slower than the rival (a kept-alive one), hence the skew.
    const jitter = Math.floor(rnd() * 11) - 8;
    const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
    const bind = later(jitter).then(() => redeem(s.baseUrl, token, 1_000_000 + round));
    const rival = later(-jitter).then(() => (modeChange ? s.api("PATCH", base, { mode: "static" }) : s.api("POST", `${base}/reset-client`)));
    const [b, r] = await Promise.all([bind, rival]);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    outcomes[modeChange ? "made_static" : "reset"] += 1;
    outcomes[b.status === 200 ? "bind_won" : "bind_lost"] += 1;
    if (b.status !== 200) assert.ok(["INVALID_BIND_TOKEN", "NODE_NOT_DYNAMIC", "BIND_TOKEN_USED"].includes(b.json.error.code), JSON.stringify(b.json));
    await sync.idle();
    assert.deepEqual(await brokerAccounts(m), databaseAccounts(s), `round ${round} (${modeChange ? "mode change" : "reset"}, bind ${b.status}, jitter ${jitter} ms)`);
  }
  console.log(`# bind vs reset / mode change (mosquitto): rounds=${RACE_ROUNDS * 2} ${JSON.stringify(outcomes)} wall_ms=${Date.now() - started} seed=${SEED}`);
});
