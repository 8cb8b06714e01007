import { z } from "zod";
import { configIdSchema, nodeIdSchema } from "./ids.js";

/**
 * Wire shapes of measured link health (docs/links.md): what each host's WireGuard (or
 * AmneziaWG) interface reports about its peers, the config's link matrix built from those
 * reports, and drift between a host's running peers and its staged config.
 */

/** Measured state of one configured pair, from WireGuard's own timers (docs/decisions.md "Link health"). */
export const LINK_STATES = ["up", "stale", "down", "unknown"] as const;
export const linkStateSchema = z.enum(LINK_STATES);
export type LinkState = z.output<typeof linkStateSchema>;

/** The configured state of a pair (spec §2.3 integrity). */
export const configuredStateSchema = z.enum(["ok", "broken", "disabled"]);

/** What one side of a pair measured about the other: its peer entry in the side's interface dump. Null fields: never seen. */
export const linkDirectionSchema = z.object({
  latest_handshake_at: z.iso.datetime().nullable(),
  rx_bytes: z.number().int().nonnegative(),
  tx_bytes: z.number().int().nonnegative(),
  endpoint: z.string().nullable(),
});
export type LinkDirection = z.output<typeof linkDirectionSchema>;

/** One configured pair of a config with what its two hosts measured; a direction is null when that host has not reported (or has no such peer). */
export const linkViewSchema = z.object({
  node_a: nodeIdSchema,
  node_b: nodeIdSchema,
  configured: configuredStateSchema,
  link: linkStateSchema,
  /** node_a's view of node_b. */
  a_to_b: linkDirectionSchema.nullable(),
  /** node_b's view of node_a. */
  b_to_a: linkDirectionSchema.nullable(),
  /** The older of the two reports the link state was judged from; null when neither host reported. */
  measured_at: z.iso.datetime().nullable(),
});
export type LinkView = z.output<typeof linkViewSchema>;

/** One running peer of a host's interface, as its dump shows it, matched to a node of the config by public key where one has it. */
export const peerStatSchema = z.object({
  public_key: z.string(),
  node_id: nodeIdSchema.nullable(),
  node_name: z.string().nullable(),
  endpoint: z.string().nullable(),
  allowed_ips: z.array(z.string()),
  latest_handshake_at: z.iso.datetime().nullable(),
  rx_bytes: z.number().int().nonnegative(),
  tx_bytes: z.number().int().nonnegative(),
  /** Seconds; null when off. */
  persistent_keepalive_s: z.number().int().nullable(),
});
export type PeerStat = z.output<typeof peerStatSchema>;

/** How a host's running peers differ from its staged config: empty lists mean none. */
export const nodeDriftSchema = z.object({
  node_id: nodeIdSchema,
  /** Public keys the staged config has and the interface does not. */
  missing_peers: z.array(z.string()),
  /** Public keys the interface has and the staged config does not. */
  extra_peers: z.array(z.string()),
  /** Peers in both whose endpoint or allowed IPs differ, with what each side says. */
  different: z.array(z.object({ public_key: z.string(), field: z.enum(["endpoint", "allowed_ips"]), staged: z.string(), running: z.string() })),
});
export type NodeDrift = z.output<typeof nodeDriftSchema>;

/** `GET /api/v1/configs/{config_id}/links` and the refresh's answer. */
export const linkMatrixAnswer = z.object({
  config_id: configIdSchema,
  links: z.array(linkViewSchema),
  /** Only hosts whose running peers differ from their staged config. */
  drift: z.array(nodeDriftSchema),
});
export type LinkMatrixAnswer = z.output<typeof linkMatrixAnswer>;

/** `POST /api/v1/configs/{config_id}/links/refresh`: the matrix after every asked host reported or timed out. */
export const linkRefreshAnswer = linkMatrixAnswer.extend({
  asked: z.array(nodeIdSchema),
  reported: z.array(nodeIdSchema),
  timed_out: z.array(nodeIdSchema),
});
export type LinkRefreshAnswer = z.output<typeof linkRefreshAnswer>;

/** `GET /api/v1/configs/{config_id}/nodes/{node_id}/peers`: one host's running peers and its drift (null: no report yet). */
export const nodePeersAnswer = z.object({
  node_id: nodeIdSchema,
  measured_at: z.iso.datetime().nullable(),
  peers: z.array(peerStatSchema),
  drift: nodeDriftSchema.nullable(),
});
export type NodePeersAnswer = z.output<typeof nodePeersAnswer>;
