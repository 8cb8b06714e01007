import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { AgentProfile } from "../../src/agent/profile.js";
import type { CommandResult, CommandRunner } from "../../src/agent/toolchain.types.js";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/** A bind answer as the service gives it (spec §2.6, DESIGN §5). */
export function sampleProfile(overrides: { mqtt?: Partial<AgentProfile["mqtt"]> } = {}): AgentProfile {
  const base = "svc/cfg-abc/node-xyz";
  return {
    profile: { config_id: "cfg-abc", node_id: "node-xyz", server_url: "https://mesh.example.com" },
    mqtt: {
      host: "mesh.example.com",
      port: 8883,
      tls: true,
      username: "n:cfg-abc:node-xyz",
      password: "s3cret-password",
      client_id: "svc-cfg-abc-node-xyz",
      ...overrides.mqtt,
    },
    topics: {
      config_push: `${base}/config/push`,
      control: `${base}/control`,
      detect: `${base}/detect`,
      info: `${base}/info`,
      config_push_ack: `${base}/config/push/ack`,
      control_ack: `${base}/control/ack`,
      detect_ack: `${base}/detect/ack`,
      info_ack: `${base}/info/ack`,
      event: `${base}/event`,
      heartbeat: `${base}/heartbeat`,
    },
  };
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The bound on one svcctl child process: tsx start-up plus one HTTP round trip. */
export const CLI_TIMEOUT_MS = 60_000;

/**
 * Runs `node --import tsx src/cli/svcctl.ts ...args` from the repository root, killed after
 * {@link CLI_TIMEOUT_MS}. SVC_AGENT_DIR is removed from the environment unless `env` sets it.
 */
export function runCli(args: readonly string[], env: Record<string, string> = {}): Promise<CliRun> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  delete childEnv["SVC_AGENT_DIR"];
  Object.assign(childEnv, env);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/cli/svcctl.ts", ...args], {
      cwd: repoRoot,
      env: childEnv,
      stdio: ["ignore", "pipe", "pipe"],
      timeout: CLI_TIMEOUT_MS,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** A runner that records every command and answers from `answer` (default: exit 0, no output). */
export function recordingRunner(answer: (argv: string[]) => Partial<CommandResult> = () => ({})): { runner: CommandRunner; calls: string[][] } {
  const calls: string[][] = [];
  const runner: CommandRunner = async (file, args) => {
    const argv = [file, ...args];
    calls.push(argv);
    return { code: 0, stdout: "", stderr: "", ...answer(argv) };
  };
  return { runner, calls };
}
