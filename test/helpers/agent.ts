import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import type { TestContext } from "node:test";
import { runAgent } from "../../src/agent/agent.js";
import type { AgentProfile } from "../../src/agent/profile.js";
import type { ExecResult, Lab } from "./netns.js";
import { repoRoot } from "./service.js";
import { tempDir } from "./temp-dir.js";

/** The CLI's entry point, run from source exactly as `svcctl` would run the bundled build. */
export const SVCCTL_ENTRY = join(repoRoot, "src", "cli", "svcctl.ts");

/** Largest amount of a long-running process's output kept for failure messages (the tail wins). */
const OUTPUT_CAP_CHARS = 256 * 1024;

/**
 * A port the OS considers free on `host` right now: a throwaway server listens on port 0 there,
 * the port is read back and the server closed. Another process could take it before the caller
 * binds it; on a lab's own uplink address nothing else listens, so that race is theoretical.
 */
export function freeTcpPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close((error) => {
        if (error !== undefined) reject(error);
        else if (port === 0) reject(new Error(`no port read back on ${host}`));
        else resolve(port);
      });
    });
  });
}

/** `node --import tsx <repo>/src/cli/svcctl.ts --profile-dir <dir>`: what replaces the word `svcctl`. */
export function svcctlPrefix(profileDir: string): { cmd: string; args: string[] } {
  return { cmd: process.execPath, args: ["--import", "tsx", SVCCTL_ENTRY, "--profile-dir", profileDir] };
}

/**
 * The bind command as the console shows it (`svcctl bind --server URL --token T`, spec §4 rule
 * 10), split into words and run word for word, except that `svcctl` becomes
 * {@link svcctlPrefix} and `--no-service` is appended (a test installs no system service).
 * @throws when the command does not start with the word `svcctl`
 */
export function bindCommandInvocation(command: string, profileDir: string): { cmd: string; args: string[] } {
  const words = command.trim().split(/\s+/);
  if (words[0] !== "svcctl") throw new Error(`the bind command does not start with svcctl: ${JSON.stringify(command)}`);
  const prefix = svcctlPrefix(profileDir);
  return { cmd: prefix.cmd, args: [...prefix.args, ...words.slice(1), "--no-service"] };
}

/** Runs the bind command inside `ns` (cwd = the repository, so `--import tsx` resolves). */
export function runBindCommand(lab: Lab, ns: string, command: string, profileDir: string): Promise<ExecResult> {
  const { cmd, args } = bindCommandInvocation(command, profileDir);
  return lab.exec(ns, cmd, args, { cwd: repoRoot, timeoutMs: 30_000 });
}

export interface LongRunningProcess {
  /** Pid of `ip netns exec`, which execs the command: the command's own pid, and its process group. */
  pid: number;
  /** Everything printed so far, stdout and stderr interleaved (the last 256 KiB). */
  output(): string;
  /** Length of the output so far: an offset for "printed after this point" checks. */
  outputLength(): number;
  /** Output printed after `offset` (an earlier {@link outputLength}). */
  outputSince(offset: number): string;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Whether it is still running. */
  running(): boolean;
  /** SIGTERM to its process group, SIGKILL after `graceMs`; resolves once it exited. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts `cmd args` inside `ns` (`ip netns exec`) as a long-running child in its own process
 * group, keeping its output. `env` is merged over process.env; an undefined value removes the
 * variable. A runner that exits first SIGKILLs the group, so nothing is left behind; daemons the
 * child detached (wireguard-go) are the lab's to end (lab.destroy()).
 */
export function spawnInNamespace(
  ns: string,
  cmd: string,
  args: string[],
  options: { env?: Record<string, string | undefined>; cwd?: string } = {},
): LongRunningProcess {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  const child = spawn("ip", ["netns", "exec", ns, cmd, ...args], {
    env,
    cwd: options.cwd ?? repoRoot,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let dropped = 0;
  const append = (chunk: string): void => {
    output += chunk;
    if (output.length > OUTPUT_CAP_CHARS) {
      dropped += output.length - OUTPUT_CAP_CHARS;
      output = output.slice(output.length - OUTPUT_CAP_CHARS);
    }
  };
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", append);
  child.stderr.on("data", append);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    child.once("error", (error) => {
      append(`\n[spawn failed: ${String(error)}]\n`);
      resolve({ code: null, signal: null });
    });
  });
  let done = false;
  void exited.then(() => {
    done = true;
  });
  const pid = child.pid ?? -1;

  const signalGroup = (signal: NodeJS.Signals): void => {
    if (pid <= 0) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // ESRCH: the group is gone
    }
  };
  const onRunnerExit = (): void => signalGroup("SIGKILL");
  process.once("exit", onRunnerExit);

  let stopping: Promise<void> | undefined;
  const stop = (graceMs = 5_000): Promise<void> => {
    stopping ??= (async () => {
      process.removeListener("exit", onRunnerExit);
      if (!done) signalGroup("SIGTERM");
      const deadline = Date.now() + graceMs;
      while (!done && Date.now() < deadline) await delay(50);
      // Whatever of the group outlived the grace period (or the leader): SIGKILL.
      signalGroup("SIGKILL");
      await exited;
    })();
    return stopping;
  };

  return {
    pid,
    output: () => (dropped > 0 ? `[${dropped} earlier characters dropped]\n${output}` : output),
    outputLength: () => dropped + output.length,
    outputSince: (offset) => output.slice(Math.max(0, offset - dropped)),
    exited,
    running: () => !done,
    stop,
  };
}

/**
 * The real agent runtime (`runAgent`) in this process with `profile`, its profile and tunnel
 * directories in a temp directory; stopped (and the directory removed) after the test.
 * @returns its log lines as they come, and `stop()` (idempotent) resolving when it has stopped
 */
export function startAgentInProcess(t: TestContext, profile: AgentProfile, prefix = "svc-agent-"): { logs: Array<Record<string, unknown>>; stop(): Promise<void> } {
  const dir = tempDir(t, prefix);
  const logs: Array<Record<string, unknown>> = [];
  const ctl = new AbortController();
  const running = runAgent({ profile, profileDir: dir, log: (l) => logs.push(l), signal: ctl.signal, tunnelDir: join(dir, "tunnels"), isPrivileged: () => true });
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= (ctl.abort(), running));
  t.after(stop);
  return { logs, stop };
}
