import type { TunnelProtocol } from "../protocol/envelope.schema.js";
import type { PeerChanges } from "./peer-delta.js";

/**
 * The seam between the agent and the tunnel tools (spec §6.3 "Toolchains by tunnel_protocol"):
 * `wireguard` uses `wg` / `wg-quick`, `awg_2` uses `awg` / `awg-quick` on Linux and macOS; on
 * Windows each uses its tunnel-service executable. Only the profile's interface is ever looked
 * at (spec §6.3: `wg_online` is only the current profile's interface).
 */

/** Result of one external command. */
export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs an external command without a shell; never throws for a non-zero exit. */
export type CommandRunner = (file: string, args: readonly string[], opts?: { env?: NodeJS.ProcessEnv; timeoutMs?: number }) => Promise<CommandResult>;

export interface Toolchain {
  readonly protocol: TunnelProtocol;
  /** Where this toolchain keeps the interface's config file, e.g. /etc/wireguard/svc0.conf. */
  configPath(interfaceName: string): string;
  /** True when the interface is up under this toolchain (`wg show <iface>` succeeds). */
  isRunning(interfaceName: string): Promise<boolean>;
  /** Brings the interface up from its config file. @throws Error with the tool's stderr */
  up(interfaceName: string): Promise<void>;
  /** Takes the interface down. @throws Error with the tool's stderr */
  down(interfaceName: string): Promise<void>;
  /** Raw diagnostics (`wg show <iface>` / `awg show <iface>`); output is for `command_output` events only. */
  show(interfaceName: string): Promise<CommandResult>;
  /** The machine-readable dump (`wg show <iface> dump` / `awg show <iface> dump`), parsed by src/protocol/wg-dump.ts; absent on a toolchain that cannot give one. */
  dump?(interfaceName: string): Promise<CommandResult>;
  /**
   * Gives the running interface the peers of its (already written) config file without taking it
   * down, touching only the peers that differ (src/agent/peer-delta.ts): `wg-quick strip
   * <configPath>` and `wg show <iface> peers`, then `wg addconf <iface> <private temp file>` for
   * peers added or changed and `wg set <iface> peer <key> remove …` for peers gone (`awg-quick` /
   * `awg` for awg_2). Absent where the platform has no `strip` (Windows).
   * @param previousText the config file the interface was running from
   * @throws ToolchainCommandError with the failing tool's exit code and output
   */
  syncPeers?(interfaceName: string, previousText: string): Promise<PeerChanges>;
}

/** Picks the toolchain for a message's `tunnel_protocol` (the client uses the current message's value, spec §2.6). */
export type ToolchainFor = (protocol: TunnelProtocol) => Toolchain;
