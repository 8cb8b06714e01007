import { resolveProfileDir, type AgentProfile } from "../agent/profile.js";
import type { AgentLauncher, ServiceTarget } from "./service/index.js";

/**
 * What svcctl's commands are given: the process as injectable dependencies (tests drive the
 * commands in-process with fakes), the global options, and how a result is printed.
 */

/** The agent runtime's entry (`src/agent/agent.ts`). */
export type RunAgent = (opts: {
  profile: AgentProfile;
  profileDir: string;
  log: (line: Record<string, unknown>) => void;
  signal?: AbortSignal;
  /** Where tunnel configs go instead of the system directories (env SVC_AGENT_TUNNEL_DIR). */
  tunnelDir?: string;
}) => Promise<void>;

/** Everything svcctl takes from the process, injectable for tests. */
export interface CliDeps {
  env: Record<string, string | undefined>;
  platform: NodeJS.Platform;
  hostname(): string;
  fetch: typeof fetch;
  stdout(text: string): void;
  stderr(text: string): void;
  service: ServiceTarget;
  launcher: AgentLauncher;
  loadAgent(): Promise<RunAgent>;
  /** Calls `onSignal` at SIGINT/SIGTERM; returns the unsubscribe. */
  onShutdownSignal(onSignal: () => void): () => void;
  now(): Date;
}

/** The options every command sees (`--profile-dir`, `--json`). */
export interface Globals {
  profileDir?: string;
  json?: boolean;
}

/** The profile directory: `--profile-dir`, env SVC_AGENT_DIR, or the platform default. */
export function profileDirOf(g: Globals, deps: CliDeps): string {
  return resolveProfileDir(g.profileDir, deps.platform, deps.env);
}

/** Prints a command's result: `json` with `--json`, else `text`. */
export function print(deps: CliDeps, g: Globals, json: object, text: string): void {
  deps.stdout(g.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
}
