import { readFile } from "node:fs/promises";
import { z } from "zod";
import { writeFileAtomic } from "../lib/atomic-write.js";
import { interfaceNameSchema, tunnelProtocolSchema, type ConfigPushPayload, type TunnelProtocol } from "../protocol/envelope.schema.js";

/** The config push the agent last applied: what a bare control `push_config` re-applies. */
const lastPushSchema = z.object({
  interface_name: interfaceNameSchema,
  tunnel_protocol: tunnelProtocolSchema,
  config_version: z.number().int().nonnegative(),
  config_sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type LastPush = z.infer<typeof lastPushSchema>;

/**
 * Kept across restarts in `state.json` (mode 0600): the profile interface the agent last
 * operated (heartbeats report it), and the version and digest of the last config it applied
 * (the text itself stays only in the tunnel config file).
 */
export interface AgentState {
  interface_name: string | null;
  tunnel_protocol: TunnelProtocol | null;
  last_push: LastPush | null;
}

/** The agent's state file: read once at start, rewritten when what it holds changes. */
export class AgentStateFile {
  readonly #path: string;
  readonly #state: AgentState;
  readonly #log: (line: Record<string, unknown>) => void;
  /** The last write queued: writes run one at a time, in the order their states were made. */
  #writing: Promise<void> = Promise.resolve();

  private constructor(path: string, state: AgentState, log: (line: Record<string, unknown>) => void) {
    this.#path = path;
    this.#state = state;
    this.#log = log;
  }

  /**
   * Reads `path`; a missing, unreadable or malformed file (or field) reads as empty state.
   * @param log one JSON log line (a failed write is logged, never thrown)
   */
  static async open(path: string, log: (line: Record<string, unknown>) => void): Promise<AgentStateFile> {
    return new AgentStateFile(path, await readState(path), log);
  }

  /** The state as last remembered. */
  get current(): Readonly<AgentState> {
    return this.#state;
  }

  /**
   * Remembers the interface and protocol operated, and with `push` the config applied (else
   * the last push stays); writes the file only when something changed, atomically (temp file,
   * fsync, rename: a crash leaves the old state or the new, never a torn file that would read as
   * empty) and after any write still in flight, so the newest state is the one left. A failed
   * write is not fatal: heartbeats then report the interface only until the next restart.
   */
  async remember(interfaceName: string, protocol: TunnelProtocol, push?: ConfigPushPayload): Promise<void> {
    const state = this.#state;
    const lastPush: LastPush | null =
      push === undefined
        ? state.last_push
        : { interface_name: push.interface_name, tunnel_protocol: push.tunnel_protocol, config_version: push.config_version, config_sha256: push.config_sha256 };
    if (
      state.interface_name === interfaceName &&
      state.tunnel_protocol === protocol &&
      JSON.stringify(state.last_push) === JSON.stringify(lastPush)
    ) {
      return;
    }
    state.interface_name = interfaceName;
    state.tunnel_protocol = protocol;
    state.last_push = lastPush;
    const text = JSON.stringify(state);
    this.#writing = this.#writing.then(() =>
      writeFileAtomic(this.#path, text, { mode: 0o600 }).catch((err: unknown) =>
        this.#log({ level: "warn", msg: "could not write the agent state file", path: this.#path, err: String(err) }),
      ),
    );
    await this.#writing;
  }
}

async function readState(path: string): Promise<AgentState> {
  try {
    const raw = JSON.parse(await readFile(path, "utf8")) as Partial<Record<keyof AgentState, unknown>>;
    const protocol = raw.tunnel_protocol === "wireguard" || raw.tunnel_protocol === "awg_2" ? raw.tunnel_protocol : null;
    const iface = typeof raw.interface_name === "string" && /^[a-zA-Z0-9_=+.-]{1,15}$/.test(raw.interface_name) ? raw.interface_name : null;
    const lastPush = lastPushSchema.safeParse(raw.last_push);
    return { interface_name: iface, tunnel_protocol: protocol, last_push: lastPush.success ? lastPush.data : null };
  } catch {
    return { interface_name: null, tunnel_protocol: null, last_push: null };
  }
}
