import { directionState, pairState, type DirectionSample } from "../domain/link-state.js";
import type { z } from "zod";
import type { LinkDirection, linkViewSchema, nodeDriftSchema, peerStatSchema } from "../protocol/links.schema.js";
import { wgPeerReportSchema, type WgPeerReport } from "../protocol/wg-peers.schema.js";
import type { LinkNodeRow, PeerReportRow } from "../store/links.repository.js";
import type { MeshPairView } from "./views.js";

/** The wire shapes as built here (ids unbranded; the route's response schema checks them). */
export type LinkView = z.input<typeof linkViewSchema>;
export type NodeDrift = z.input<typeof nodeDriftSchema>;
export type PeerStat = z.input<typeof peerStatSchema>;

/**
 * Builds the link matrix and drift of docs/links.md from stored peer reports: no I/O, the
 * judging moment passed in (`nowMs`, the server's clock).
 */

const isoTime = (ms: number): string => new Date(ms).toISOString();

/** A stored report's peers; a row that no longer parses (edited by hand) counts as none. */
export function reportPeers(row: PeerReportRow): WgPeerReport[] {
  try {
    const parsed = wgPeerReportSchema.array().safeParse(JSON.parse(row.peers_json));
    return parsed.success ? parsed.data : [];
  } catch {
    return [];
  }
}

/** One host's view of one peer: the sample the state is judged from, and its wire direction (null when no report or no entry). */
function direction(report: PeerReportRow | undefined, peers: Map<string, WgPeerReport> | undefined, peerKey: string): { sample: DirectionSample | null; view: LinkDirection | null } {
  if (report === undefined || peers === undefined) return { sample: null, view: null };
  const entry = report.running === 1 ? peers.get(peerKey) : undefined;
  const sample: DirectionSample = { running: report.running === 1, host_time: report.host_time, latest_handshake: entry === undefined ? undefined : entry.latest_handshake, received_at_ms: report.received_at };
  if (entry === undefined) return { sample, view: null };
  const at = entry.latest_handshake === null ? null : isoTime(entry.latest_handshake * 1000);
  return { sample, view: { latest_handshake_at: at, rx_bytes: entry.rx_bytes, tx_bytes: entry.tx_bytes, endpoint: entry.endpoint } };
}

/** Everything the matrix is built from. */
export interface MatrixInputs {
  pairs: readonly MeshPairView[];
  nodes: ReadonlyMap<string, LinkNodeRow>;
  reports: ReadonlyMap<string, PeerReportRow>;
  nowMs: number;
}

/** Every configured pair with what its two hosts measured (links.schema.ts `linkViewSchema`), in the pairs' order. */
export function linkViews(inputs: MatrixInputs): LinkView[] {
  const peersOf = new Map<string, Map<string, WgPeerReport>>();
  for (const [nodeId, row] of inputs.reports) peersOf.set(nodeId, new Map(reportPeers(row).map((p) => [p.public_key, p])));
  return inputs.pairs.map((pair) => {
    const a = inputs.nodes.get(pair.node_a);
    const b = inputs.nodes.get(pair.node_b);
    const ra = inputs.reports.get(pair.node_a);
    const rb = inputs.reports.get(pair.node_b);
    const ab = a && b ? direction(ra, peersOf.get(pair.node_a), b.public_key) : { sample: null, view: null };
    const ba = a && b ? direction(rb, peersOf.get(pair.node_b), a.public_key) : { sample: null, view: null };
    const received = [ra, rb].filter((r) => r !== undefined).map((r) => r.received_at);
    return {
      node_a: pair.node_a,
      node_b: pair.node_b,
      configured: pair.integrity.status,
      link: pairState(directionState(ab.sample, inputs.nowMs), directionState(ba.sample, inputs.nowMs)),
      a_to_b: ab.view,
      b_to_a: ba.view,
      measured_at: received.length === 0 ? null : isoTime(Math.min(...received)),
    };
  });
}

/** A host's running peers as the node peer table shows them, matched to the config's nodes by public key. */
export function peerStats(row: PeerReportRow, byKey: ReadonlyMap<string, LinkNodeRow>): PeerStat[] {
  return reportPeers(row).map((p) => {
    const node = byKey.get(p.public_key);
    return {
      public_key: p.public_key,
      node_id: node?.node_id ?? null,
      node_name: node?.name ?? null,
      endpoint: p.endpoint,
      allowed_ips: p.allowed_ips,
      latest_handshake_at: p.latest_handshake === null ? null : isoTime(p.latest_handshake * 1000),
      rx_bytes: p.rx_bytes,
      tx_bytes: p.tx_bytes,
      persistent_keepalive_s: p.persistent_keepalive_s,
    };
  });
}

/** One `[Peer]` of a staged config text: what drift compares. */
export interface StagedPeer {
  public_key: string;
  endpoint: string | null;
  allowed_ips: string[];
}

/** The `[Peer]` sections of a rendered config text (`PublicKey`, `Endpoint`, `AllowedIPs`); every other line is skipped, the private key included. */
export function stagedPeers(text: string): StagedPeer[] {
  const out: StagedPeer[] = [];
  let current: StagedPeer | null = null;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/#.*$/, "").trim();
    if (/^\[.*\]$/.test(line)) {
      current = line.toLowerCase() === "[peer]" ? { public_key: "", endpoint: null, allowed_ips: [] } : null;
      if (current !== null) out.push(current);
      continue;
    }
    const m = /^(\w+)\s*=\s*(.*)$/.exec(line);
    if (current === null || m === null) continue;
    const [, key = "", value = ""] = m;
    if (key.toLowerCase() === "publickey") current.public_key = value;
    else if (key.toLowerCase() === "endpoint") current.endpoint = value;
    else if (key.toLowerCase() === "allowedips") current.allowed_ips.push(...value.split(",").map((s) => s.trim()).filter((s) => s !== ""));
  }
  return out.filter((p) => p.public_key !== "");
}

const IP_ENDPOINT = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):\d+$/;
const ipSet = (ips: readonly string[]): string => [...ips].map((s) => s.toLowerCase()).sort().join(",");

/**
 * How a host's running peers differ from its staged config: peers missing or extra by public
 * key; for peers in both, allowed IPs compared as sets, and the endpoint only where the staged
 * one is an IP literal (WireGuard shows a resolved address, and a peer that roams updates it).
 * A report of a stopped interface has every staged peer missing.
 */
export function nodeDrift(nodeId: string, staged: readonly StagedPeer[], report: PeerReportRow): NodeDrift {
  const running = new Map(reportPeers(report).map((p) => [p.public_key, p]));
  const stagedKeys = new Set(staged.map((p) => p.public_key));
  const different: NodeDrift["different"] = [];
  for (const s of staged) {
    const r = running.get(s.public_key);
    if (r === undefined) continue;
    if (s.endpoint !== null && IP_ENDPOINT.test(s.endpoint) && r.endpoint !== s.endpoint) {
      different.push({ public_key: s.public_key, field: "endpoint", staged: s.endpoint, running: r.endpoint ?? "(none)" });
    }
    if (ipSet(s.allowed_ips) !== ipSet(r.allowed_ips)) {
      different.push({ public_key: s.public_key, field: "allowed_ips", staged: s.allowed_ips.join(","), running: r.allowed_ips.join(",") });
    }
  }
  return {
    node_id: nodeId,
    missing_peers: staged.filter((p) => !running.has(p.public_key)).map((p) => p.public_key),
    extra_peers: [...running.keys()].filter((k) => !stagedKeys.has(k)),
    different,
  };
}

/** True when a drift lists anything. */
export function hasDrift(d: NodeDrift): boolean {
  return d.missing_peers.length > 0 || d.extra_peers.length > 0 || d.different.length > 0;
}
