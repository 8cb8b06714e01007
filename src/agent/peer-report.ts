import type { TunnelProtocol } from "../protocol/enums.js";
import { parseWgDump } from "../protocol/wg-dump.js";
import { WG_PEERS_EVENT, type WgPeersReport } from "../protocol/wg-peers.schema.js";
import type { DownstreamKind } from "../protocol/topics.js";
import type { AgentLink } from "./agent-link.js";
import type { AgentStateFile } from "./agent-state.js";
import type { ToolchainFor } from "./toolchain.types.js";

/**
 * Whether a finished command is one after which the agent reports its peers (docs/links.md):
 * every detect (the backend's way of asking, spec §6.3 detect), an applied config push, and an
 * applied control `start` or `push_config` (the interface's peers just changed).
 */
export function reportsPeersAfter(kind: DownstreamKind, action: string, status: string): boolean {
  if (kind === "detect") return true;
  if (status !== "applied") return false;
  return kind === "config_push" || (kind === "control" && (action === "start" || action === "push_config"));
}

/**
 * Reads the profile interface's dump (the interface and protocol the agent last operated,
 * state.json) and builds the report; null when the agent has operated no interface yet or the
 * toolchain has no dump. An interface whose dump fails (it is down: the tool cannot open it) is
 * `running: false`; an agent without privileges never gets here ({@link publishPeersReport}).
 */
export async function readPeersReport(state: AgentStateFile, toolchains: ToolchainFor, nowMs: number): Promise<WgPeersReport | null> {
  const { interface_name: iface, tunnel_protocol: protocol } = state.current;
  if (iface === null || protocol === null) return null;
  const tc = toolchains(protocol);
  if (tc.dump === undefined) return null;
  const hostTime = Math.floor(nowMs / 1000);
  const down = (p: TunnelProtocol): WgPeersReport => ({ interface_name: iface, tunnel_protocol: p, running: false, host_time: hostTime, public_key: null, listen_port: null, peers: [] });
  const out = await tc.dump(iface).catch(() => null);
  if (out === null || out.code !== 0) return down(protocol);
  const dump = parseWgDump(out.stdout);
  return { interface_name: iface, tunnel_protocol: protocol, running: true, host_time: hostTime, ...dump };
}

/**
 * Publishes the report as an `event` (spec §6.3 event payload: event `wg_peers`, the report as
 * JSON in `output`, the asking command's `request_id`). A dump that cannot be read or parsed is
 * logged and nothing is sent: a report is an observation, never a command's outcome.
 */
export async function publishPeersReport(
  d: { link: AgentLink; state: AgentStateFile; toolchains: ToolchainFor; log: (line: Record<string, unknown>) => void; isPrivileged: () => boolean },
  requestId: string,
): Promise<void> {
  // Without root the dump fails for a running interface too: no report rather than a false "down".
  if (!d.isPrivileged()) return;
  let report: WgPeersReport | null;
  try {
    report = await readPeersReport(d.state, d.toolchains, Date.now());
  } catch (err) {
    d.log({ level: "warn", msg: "peer report not sent: the dump could not be read", err: err instanceof Error ? err.message : String(err) });
    return;
  }
  if (report === null) return;
  const payload = { level: "info", event: WG_PEERS_EVENT, message: "", request_id: requestId, action: WG_PEERS_EVENT, stream: "stdout", output: JSON.stringify(report) };
  await d.link.safePublish("event", d.link.envelope("event", payload, requestId));
}
