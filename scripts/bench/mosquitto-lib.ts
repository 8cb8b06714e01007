/**
 * Mosquitto for the benchmarks (scripts/bench/fleet.ts, scripts/bench/ingest.ts `--broker
 * mosquitto`): a Mosquitto 2.0 with dynamic security, started from deploy/mosquitto/mosquitto.conf
 * (listener on a free loopback port, files in a temp dir; test/mqtt/mosquitto-harness.ts), and
 * the accounts of nodes seeded by `seedStore` (ingest-lib.ts) written into it and sealed in the
 * service's vault, as a bind would leave them. A benchmark helper: nothing here is asserted.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { pbkdf2Sync, randomBytes } from "node:crypto";
import { openSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as netServer } from "node:net";
import { userInfo } from "node:os";
import { join } from "node:path";
import SQLite from "better-sqlite3";
import type { Settings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { nodeClientId, nodeUsername } from "../../src/mqtt/authz.policy.js";
import { BrokerPasswordVault } from "../../src/mqtt/broker-passwords.js";
import { nodeAcls, passwordFingerprint } from "../../src/mqtt/mosquitto-admin.js";
import type { AppContext } from "../../src/server.js";
import { deriveConfig, TEMPLATE } from "../../test/mqtt/mosquitto-harness.js";
import { benchConfigId, benchNodeId, benchPassword } from "./ingest-lib.js";

/** The dynamic-security admin account the service manages Mosquitto with. */
export const ADMIN_USER = "svc-admin";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A free TCP port on 127.0.0.1 (released before it is returned). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = netServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      s.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}

/**
 * Seals every node's broker password with the service's vault (the bind's `broker_credentials`
 * row), for `n` nodes seeded `perConfig` to a config.
 */
export function sealPasswords(dbFile: string, dataDir: string, n: number, perConfig: number): void {
  const vault = new BrokerPasswordVault(dataDir, createLogger("silent"));
  const db = new SQLite(dbFile);
  const ins = db.prepare("INSERT INTO broker_credentials (mqtt_username, password_sealed, updated_at) VALUES (?, ?, ?)");
  const now = Date.now();
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const nodeId = benchNodeId(i);
      const username = nodeUsername(benchConfigId(Math.floor(i / perConfig)), nodeId);
      ins.run(username, vault.seal(username, benchPassword(nodeId)), now);
    }
  })();
  db.close();
}

/** Adds the node accounts to the dynamic-security file, as the adapter would create them. */
export function writeDynsecAccounts(file: string, n: number, perConfig: number): void {
  const json = JSON.parse(readFileSync(file, "utf8")) as { clients: unknown[]; roles: unknown[] };
  for (let i = 0; i < n; i++) {
    const configId = benchConfigId(Math.floor(i / perConfig));
    const nodeId = benchNodeId(i);
    const username = nodeUsername(configId, nodeId);
    const password = benchPassword(nodeId);
    const salt = randomBytes(12);
    json.clients.push({
      username,
      clientid: nodeClientId(configId, nodeId),
      textdescription: passwordFingerprint(password),
      password: pbkdf2Sync(password, salt, 101, 64, "sha512").toString("base64"),
      salt: salt.toString("base64"),
      iterations: 101,
      roles: [{ rolename: username }],
    });
    json.roles.push({ rolename: username, acls: nodeAcls(configId, nodeId).map((a) => ({ acltype: a.acltype, topic: a.topic, allow: a.allow, priority: a.priority })) });
  }
  writeFileSync(file, JSON.stringify(json));
}

// ---- mosquitto -----------------------------------------------------------------------------------

/** A prepared Mosquitto: its port and files; `start` runs it (again), `kill` stops it. */
export interface Broker {
  port: number;
  url: string;
  dir: string;
  adminPassword: string;
  pid(): number | undefined;
  /** Lines of Mosquitto's logs (all starts) that are not about a connection or a start. */
  problems(): string[];
  start(): Promise<number>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Prepares (does not start) a Mosquitto with dynamic security in `dir`, on a free port. */
export async function prepareBroker(dir: string): Promise<Broker> {
  const port = await freePort();
  const adminPassword = randomBytes(18).toString("base64url");
  execFileSync("mosquitto_ctrl", ["dynsec", "init", join(dir, "dynamic-security.json"), ADMIN_USER, adminPassword]);
  const conf = join(dir, "mosquitto.conf");
  writeFileSync(conf, deriveConfig(readFileSync(TEMPLATE, "utf8"), { port, dir, user: userInfo().username }));
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const logs: string[] = [];
  const b: Broker = {
    port,
    url: `mqtt://127.0.0.1:${port}`,
    dir,
    adminPassword,
    pid: () => child?.pid,
    problems() {
      const out: string[] = [];
      for (const f of logs) {
        for (const line of readFileSync(f, "utf8").split("\n")) if (/error|unable|warning|too many/i.test(line)) out.push(line);
      }
      return out;
    },
    async start() {
      // Its log (connection_messages is on, as deployed) goes to a file: piped through this
      // process it would load the backend being measured.
      const log = join(dir, `mosquitto-${Date.now()}.log`);
      const fd = openSync(log, "w");
      logs.push(log);
      const proc = spawn("/usr/sbin/mosquitto", ["-c", conf], { stdio: ["ignore", fd, fd] });
      child = proc;
      let gone = false;
      exited = new Promise((resolve) => proc.once("exit", () => resolve()));
      proc.once("exit", () => (gone = true));
      const deadline = Date.now() + 300_000;
      for (;;) {
        const text = readFileSync(log, "utf8");
        if (/mosquitto version \S+ running/.test(text)) return Date.now();
        if (gone || Date.now() > deadline) throw new Error(`mosquitto did not start:\n${text.slice(-2000)}`);
        await sleep(10);
      }
    },
    async kill(signal = "SIGKILL") {
      child?.kill(signal);
      await exited;
    },
  };
  return b;
}

/** The service's settings for this Mosquitto (`SVC_MQTT_BROKER=mosquitto`, its URL, the dynamic-security admin). */
export function mosquittoSettings(broker: Broker): Partial<Settings> {
  return {
    mqttBroker: "mosquitto",
    mqttUrl: broker.url,
    mosquittoAdminUsername: ADMIN_USER,
    mosquittoAdminPassword: broker.adminPassword,
    mqttPublicHost: "127.0.0.1",
    mqttPublicPort: broker.port,
  };
}

/**
 * Waits until the service's backend client is connected to Mosquitto and its broker sync has
 * reconciled the accounts once. @throws Error after `timeoutMs`
 */
export async function awaitBackendReady(server: AppContext, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(server.mqtt.connected() && (server.mqtt.sync?.state().reconciled ?? 0) >= 1)) {
    if (Date.now() > deadline) throw new Error(`the backend was not connected to Mosquitto and reconciled within ${timeoutMs} ms`);
    await sleep(50);
  }
}
