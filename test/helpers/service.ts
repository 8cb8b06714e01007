import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { readFileSync, readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

const START_DEADLINE_MS = 30_000;
const STOP_GRACE_MS = 5_000;

export interface RunningService {
  /** `http://127.0.0.1:<port>`, taken from the service's own "listening" log line. */
  baseUrl: string;
  /** The admin password the service was started with (SVC_ADMIN_PASSWORD). */
  adminPassword: string;
  /** The fresh SVC_DATA_DIR; removed by stop() unless the caller supplied its own. */
  dataDir: string;
  /** SIGTERM to the process group, SIGKILL after 5 s; removes a data dir it created. Idempotent. */
  stop(): Promise<void>;
  /** Everything the service printed so far, stdout and stderr interleaved. */
  output(): string;
}

/**
 * Whether any live (non-zombie) process is left in process group `pgid`. Members that outlive
 * npm are re-parented to init, which may reap them late, hence /proc rather than kill(-pgid, 0).
 */
function groupAlive(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    // no procfs: fall back to the signal probe, which counts zombies as alive
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // exited while we looked
    }
    // Fields after "(comm) ": state, ppid, pgrp, ...
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true;
  }
  return false;
}

/** The "listening" line: pino JSON whose msg is "listening" and which carries the url. */
function listeningUrl(line: string): string | undefined {
  let record: unknown;
  try {
    record = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof record !== "object" || record === null) return undefined;
  const { msg, url } = record as { msg?: unknown; url?: unknown };
  return msg === "listening" && typeof url === "string" ? url : undefined;
}

/** How to start the service: `npm start` in the repository unless told otherwise. */
export interface StartCommand {
  /** Program and arguments; `["npm", "start"]` by default (e.g. `[process.execPath, "dist/src/main.js"]`). */
  argv?: [string, ...string[]];
  /** Working directory; the repository root by default. */
  cwd?: string;
}

/**
 * Starts the service exactly as `npm start` does (or as `command` says), in its own process
 * group, on 127.0.0.1 with an OS-chosen port, a fresh data dir, a random admin password and MQTT
 * services off; `env` overrides any of these. Resolves once the service logs that it listens
 * (30 s deadline); otherwise stops it and rejects with everything it printed.
 */
export async function startService(env: Record<string, string> = {}, command: StartCommand = {}): Promise<RunningService> {
  const ownDataDir = env["SVC_DATA_DIR"] === undefined;
  const dataDir = env["SVC_DATA_DIR"] ?? (await mkdtemp(join(tmpdir(), "svc-e2e-data-")));
  const adminPassword = env["SVC_ADMIN_PASSWORD"] ?? randomBytes(18).toString("base64url");
  const [program, ...args] = command.argv ?? ["npm", "start"];
  const child = spawn(program, args, {
    cwd: command.cwd ?? repoRoot,
    env: {
      ...process.env,
      SVC_HTTP_HOST: "127.0.0.1",
      SVC_HTTP_PORT: "0",
      SVC_LOG_LEVEL: "info",
      SVC_ENABLE_MQTT_SERVICES: "false",
      ...env,
      SVC_DATA_DIR: dataDir,
      SVC_ADMIN_PASSWORD: adminPassword,
    },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const pgid = child.pid;

  let output = "";
  let pending = "";
  let resolveUrl: (url: string) => void = () => undefined;
  const urlSeen = new Promise<string>((resolve) => {
    resolveUrl = resolve;
  });
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    output += chunk;
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      const url = listeningUrl(line);
      if (url !== undefined) resolveUrl(url);
    }
  });
  child.stderr.on("data", (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
  });
  const spawnFailed = once(child, "error").then(([error]) => {
    throw new Error(`could not spawn ${program}: ${String(error)}`);
  });

  const signalGroup = (signal: NodeJS.Signals): void => {
    if (pgid === undefined) return;
    try {
      process.kill(-pgid, signal);
    } catch {
      // ESRCH: the whole group has already exited
    }
  };
  // If the test runner itself exits first, do not leave the detached group behind.
  const onRunnerExit = (): void => signalGroup("SIGKILL");
  process.once("exit", onRunnerExit);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      process.removeListener("exit", onRunnerExit);
      // npm may exit on SIGTERM before the service has finished shutting down, so wait for the
      // whole group (npm, sh, tsx, node), not just for npm.
      signalGroup("SIGTERM");
      const deadline = Date.now() + STOP_GRACE_MS;
      while (pgid !== undefined && groupAlive(pgid) && Date.now() < deadline) await delay(50);
      signalGroup("SIGKILL");
      if (child.exitCode === null && child.signalCode === null) await exited;
      if (ownDataDir) await rm(dataDir, { recursive: true, force: true });
    })();
    return stopping;
  };

  let deadline: NodeJS.Timeout | undefined;
  try {
    const baseUrl = await Promise.race([
      urlSeen,
      spawnFailed,
      exited.then(() => {
        throw new Error(`${[program, ...args].join(" ")} exited (code ${String(child.exitCode)}, signal ${String(child.signalCode)}) before listening`);
      }),
      new Promise<never>((_resolve, reject) => {
        deadline = setTimeout(() => reject(new Error(`no "listening" line within ${START_DEADLINE_MS} ms`)), START_DEADLINE_MS);
      }),
    ]);
    return { baseUrl, adminPassword, dataDir, stop, output: () => output };
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}\n--- service output ---\n${output}`, { cause: error });
  } finally {
    clearTimeout(deadline);
  }
}
