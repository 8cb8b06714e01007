/**
 * A bound node's running peers, as its host last reported them from `wg show IFACE dump` (or
 * `awg show`): one row per peer with its node (or key), endpoint, allowed IPs, last handshake,
 * transfer and keepalive, like wg-easy's client list; and its drift, the ways the running
 * interface differs from the staged config, said in a sentence. Stacked cards at narrow widths.
 * Kept current by `config.links.updated` (the SSE cache table invalidates the node's peers).
 */
import type { NodeDrift, NodePeersAnswer, PeerStat } from "../../api/types.js";
import { RelativeTime } from "../../components/relative-time.js";
import { QueryView } from "../../components/states.js";
import { useServerOffset } from "../../sse/provider.js";
import { ageText, bytesText } from "../mesh/link-text.js";
import { useConfigDetail } from "../mesh/queries.js";
import { useNodePeers } from "./queries.js";
import { TableHead } from "../../components/table-head.js";

/** A key as people compare them: its first 8 characters and an ellipsis. */
function shortKey(key: string): string {
  return key.length > 12 ? `${key.slice(0, 8)}…` : key;
}

/** Names of the config's nodes by public key, for the drift sentence (a missing peer is not in the running list). */
function useKeyNames(configId: string): ReadonlyMap<string, string> {
  const detail = useConfigDetail(configId);
  return new Map((detail.data?.nodes ?? []).map((n) => [n.public_key, n.name]));
}

/**
 * What differs, in words: "Running peers differ from the staged config: missing gate; extra
 * peer 9xQ2…; edge's endpoint is 192.0.2.9:51820 (staged 192.0.2.1:51820)." Null when they agree.
 */
export function driftSentence(drift: NodeDrift | null, names: ReadonlyMap<string, string>): string | null {
  if (drift === null) return null;
  const who = (key: string) => names.get(key) ?? `peer ${shortKey(key)}`;
  const parts: string[] = [];
  if (drift.missing_peers.length > 0) parts.push(`missing ${drift.missing_peers.map(who).join(", ")} (staged, not running)`);
  if (drift.extra_peers.length > 0) parts.push(`extra ${drift.extra_peers.map(who).join(", ")} (running, not staged)`);
  for (const d of drift.different) {
    const field = d.field === "endpoint" ? "endpoint" : "allowed IPs";
    parts.push(`${who(d.public_key)}'s ${field} is ${d.running || "none"} (staged ${d.staged || "none"})`);
  }
  return parts.length === 0 ? null : `Running peers differ from the staged config: ${parts.join("; ")}.`;
}

/** The "Peers" card of a bound node's control page. */
export function PeersSection({ configId, nodeId }: { configId: string; nodeId: string }) {
  const peers = useNodePeers(configId, nodeId);
  const names = useKeyNames(configId);
  return (
    <section className="card" aria-labelledby="peers-title">
      <h2 id="peers-title">Peers</h2>
      <QueryView query={peers} loadingLabel="Loading the peers…">
        {(answer) => <PeersBody answer={answer} names={names} />}
      </QueryView>
    </section>
  );
}

function PeersBody({ answer, names }: { answer: NodePeersAnswer; names: ReadonlyMap<string, string> }) {
  const drift = driftSentence(answer.drift, names);
  if (answer.measured_at === null) return <p className="muted">The host has not reported its peers yet: use Check links on the mesh page's topology.</p>;
  return (
    <>
      <p className="muted">
        As the host reported them <RelativeTime iso={answer.measured_at} />.
      </p>
      {drift === null ? (
        <p className="drift drift-none">The running peers match the staged config.</p>
      ) : (
        <p className="drift drift-some" role="note">
          <strong>Drift.</strong> {drift}
        </p>
      )}
      {answer.peers.length === 0 ? <p className="muted">The interface has no peers.</p> : <PeerTable peers={answer.peers} />}
    </>
  );
}

function PeerTable({ peers }: { peers: PeerStat[] }) {
  const now = Date.now() + useServerOffset();
  return (
    <div className="table-wrap">
      <table className="table stack-table peer-table">
        <caption className="visually-hidden">Running peers</caption>
        <TableHead columns={["Peer", "Endpoint", "Allowed IPs", "Last handshake", "Received", "Sent", "Keepalive"]} />
        <tbody>
          {peers.map((p) => (
            <tr key={p.public_key}>
              <th scope="row" data-label="Peer">
                {p.node_name ?? (
                  <>
                    <span className="mono" title={p.public_key}>{shortKey(p.public_key)}</span> (not a node of this config)
                  </>
                )}
              </th>
              <td data-label="Endpoint" className="mono">{p.endpoint ?? "—"}</td>
              <td data-label="Allowed IPs" className="mono">{p.allowed_ips.length === 0 ? "none" : p.allowed_ips.join(", ")}</td>
              <td data-label="Last handshake">{ageText(p.latest_handshake_at, now)}</td>
              <td data-label="Received">{bytesText(p.rx_bytes)}</td>
              <td data-label="Sent">{bytesText(p.tx_bytes)}</td>
              <td data-label="Keepalive">{p.persistent_keepalive_s === null ? "off" : `every ${p.persistent_keepalive_s} s`}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
