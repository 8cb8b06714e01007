import { z } from "zod";
import { tunnelProtocolSchema } from "./enums.js";

/**
 * The agent's report of its profile interface's peers: the `output` of an `event` (spec §6.3
 * event envelope) named {@link WG_PEERS_EVENT}, as JSON. Built from `wg show IFACE dump` /
 * `awg show IFACE dump` (src/protocol/wg-dump.ts); the interface's private key and the peers'
 * preshared keys are never in it (docs/links.md).
 */

/** Event name of the report (spec §6.3 event payload `event`). */
export const WG_PEERS_EVENT = "wg_peers";

/** One peer line of the dump. Times are the host's unix seconds; 0 never appears (null: never). */
export const wgPeerReportSchema = z.object({
  public_key: z.string().min(1).max(64),
  /** `host:port` or `[v6]:port`; null: "(none)", never heard from and none configured. */
  endpoint: z.string().max(300).nullable(),
  allowed_ips: z.array(z.string().max(64)).max(4096),
  /** Host unix seconds of the latest completed handshake; null: never. */
  latest_handshake: z.number().int().positive().nullable(),
  rx_bytes: z.number().int().nonnegative(),
  tx_bytes: z.number().int().nonnegative(),
  /** Seconds; null: "off". */
  persistent_keepalive_s: z.number().int().positive().max(65535).nullable(),
});
export type WgPeerReport = z.output<typeof wgPeerReportSchema>;

/** The whole report: `running: false` (interface down or unreadable) carries no peers. */
export const wgPeersReportSchema = z.object({
  interface_name: z.string().min(1).max(32),
  tunnel_protocol: tunnelProtocolSchema,
  running: z.boolean(),
  /** The host's clock when the dump was read, unix seconds: handshake ages are measured against it, so host clock skew does not matter. */
  host_time: z.number().int().nonnegative(),
  /** The interface's own public key; null when not running. */
  public_key: z.string().max(64).nullable(),
  listen_port: z.number().int().min(0).max(65535).nullable(),
  peers: z.array(wgPeerReportSchema).max(4096),
});
export type WgPeersReport = z.output<typeof wgPeersReportSchema>;
