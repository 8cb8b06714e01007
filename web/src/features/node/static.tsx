import { useEffect, useState, type FormEvent, type ReactNode } from "react";
import { Link } from "react-router";
import { RoleNote, useCan, useGate } from "../../api/roles.js";
import type { ConfigDetailView, NodeView, PortForwardView, StagedConfigAnswer, TunnelProtocol } from "../../api/types.js";
import { CopyButton } from "../../components/copy-button.js";
import { useFocusOnArrival } from "../../components/focus-on-arrival.js";
import { NodePresence } from "../../components/presence-badge.js";
import { RelativeTime } from "../../components/relative-time.js";
import { PublicUrlWarning } from "../../components/public-url-warning.js";
import { QueryView } from "../../components/states.js";
import { useConfigDetail } from "../mesh/queries.js";
import { useServerSettings } from "../settings/queries.js";
import { useConfigDownload, usePortForwardWrites, useSaveTags } from "./mutations.js";
import { AppQrCodes, CLIENT_APPS } from "./app-qr.js";
import { useAppConfigs, usePortForwards, useStagedConfig } from "./queries.js";
import { NodeSettings } from "./settings.js";
import { FormError } from "../../components/form-error.js";

/**
 * The node page of a static node: the staged config text, a
 * download-token link with a copy-paste `curl` command and the files for the Amnezia apps, a QR
 * code per client app (app-qr.tsx), the node's tags and port forwards. Live through the SSE
 * cache table (the staged text refetches on `node.apply.updated` of this node). `before` is shown under
 * the heading: the MQTT-off notice and disabled controls of a dynamic node (spec §1.7 bullet 7).
 */
export function StaticNodeView({ configId, nodeId, before }: { configId: string; nodeId: string; before?: ReactNode }) {
  const detail = useConfigDetail(configId);
  const node = detail.data?.nodes.find((n) => n.node_id === nodeId);
  return (
    <section aria-labelledby="node-title">
      <p className="breadcrumb">
        <Link to="/configs">Configs</Link> / <Link to={`/configs/${encodeURIComponent(configId)}`}>{detail.data?.name ?? "config"}</Link> /
      </p>
      <h1 id="node-title">{node?.name ?? "Node"}</h1>
      {before}
      <QueryView query={detail} loadingLabel="Loading the node…">
        {(config) =>
          node === undefined ? (
            <p className="state state-error" role="alert">
              This node does not exist (any more) in {config.name}.
            </p>
          ) : (
            <StaticNodeBody config={config} node={node} />
          )
        }
      </QueryView>
    </section>
  );
}

function StaticNodeBody({ config, node }: { config: ConfigDetailView; node: NodeView }) {
  // The config text holds the private key: read only by a role that may (operator and above).
  const canRead = useCan("getStagedConfig");
  const staged = useStagedConfig(config.config_id, node.node_id, canRead.allowed);
  return (
    <>
      <StaticFacts config={config} node={node} staged={staged.data} />
      <div className="node-grid">
        <section className="card" aria-labelledby="staged-title">
          <h2 id="staged-title">Staged config</h2>
          {canRead.reason !== null ? (
            <RoleNote can={canRead} what="the config text holds the node's private key" />
          ) : (
            <QueryView query={staged} loadingLabel="Loading the config text…">
              {(s) => <StagedText staged={s} />}
            </QueryView>
          )}
        </section>
        <div>
          <DownloadLink configId={config.config_id} node={node} protocol={config.tunnel_protocol} filename={staged.data?.filename} />
          <section className="card" aria-labelledby="qr-title">
            <h2 id="qr-title">QR codes for the apps</h2>
            <AppQrCodes configId={config.config_id} nodeId={node.node_id} nodeName={node.name} />
          </section>
        </div>
      </div>
      <TagsEditor config={config} node={node} />
      <PortForwards configId={config.config_id} nodeId={node.node_id} />
      <NodeSettings node={node} />
    </>
  );
}

/** The node's facts: mode, agent (none), addresses, interface, staged version, protocol and its last download. */
function StaticFacts({ config, node, staged }: { config: ConfigDetailView; node: NodeView; staged: StagedConfigAnswer | undefined }) {
  return (
  <dl className="facts card">
    <div>
      <dt>Mode</dt>
      <dd>{node.mode}</dd>
    </div>
    <div>
      <dt>Agent</dt>
      <dd>
        <NodePresence node={node} />
      </dd>
    </div>
    <div>
      <dt>Tunnel address</dt>
      <dd className="mono">{node.address}</dd>
    </div>
    <div>
      <dt>Endpoint</dt>
      <dd className="mono">{node.public_address === null ? "none" : `${node.public_address}:${node.listen_port ?? "?"}`}</dd>
    </div>
    <div>
      <dt>Interface</dt>
      <dd className="mono">{node.interface_name}</dd>
    </div>
    <div>
      <dt>Staged config</dt>
      <dd>v{node.staged_config.config_version}</dd>
    </div>
    <div>
      <dt>Protocol</dt>
      <dd>{config.tunnel_protocol}</dd>
    </div>
    <div>
      <dt>Last download</dt>
      <dd>{staged === undefined ? <span className="muted">not shown</span> : <LastDownload staged={staged} />}</dd>
    </div>
  </dl>
  );
}

/**
 * When the node's config was last downloaded, and whether the staged config changed since: a
 * static node has no agent to confirm what it runs, so this is the only hint that the copy on
 * its host is stale.
 */
function LastDownload({ staged }: { staged: StagedConfigAnswer }) {
  const last = staged.last_download;
  if (last === null) return <>never</>;
  const changed = last.config_sha256 !== staged.config_sha256;
  return (
    <>
      v{last.config_version}, <RelativeTime iso={last.downloaded_at} />
      {changed && (
        <strong className="stale-download" role="status">
          {" "}
          Changed since last download: staged v{staged.config_version}, downloaded v{last.config_version}. Download it again.
        </strong>
      )}
    </>
  );
}

/** `PrivateKey = …` lines of a config text. */
const PRIVATE_KEY_LINE = /^(PrivateKey\s*=\s*)(\S+)\s*$/gm;

/** The text with every private key replaced by dots (what the page shows until asked). */
export function maskPrivateKey(text: string): string {
  return text.replace(PRIVATE_KEY_LINE, (_m, head: string) => `${head}${"•".repeat(12)} (hidden)`);
}

/**
 * The staged config text, its private key hidden until "Show private key" (a screen being shared
 * or watched must not hand the key out); the copy button copies the whole text.
 */
function StagedText({ staged: s }: { staged: StagedConfigAnswer }) {
  const [reveal, setReveal] = useState(false);
  return (
    <>
      <p className="muted">
        Version {s.config_version} · sha256 <span className="mono">{s.config_sha256.slice(0, 12)}</span>
      </p>
      <pre className="config-text" tabIndex={0} aria-label="Config text">
        {reveal ? s.config_text : maskPrivateKey(s.config_text)}
      </pre>
      <div className="actions">
        <button type="button" aria-pressed={reveal} onClick={() => setReveal(!reveal)}>
          {reveal ? "Hide private key" : "Show private key"}
        </button>
        <CopyButton text={s.config_text} label="config text" />
      </div>
    </>
  );
}

/** Where wg-quick / awg-quick look for `<interface>.conf` on Linux and macOS (their first search path). */
const QUICK_DIR: Record<TunnelProtocol, { dir: string; quick: string; app: string }> = {
  wireguard: { dir: "/etc/wireguard", quick: "wg-quick", app: "WireGuard" },
  awg_2: { dir: "/etc/amnezia/amneziawg", quick: "awg-quick", app: "AmneziaVPN / AmneziaWG" },
};

/**
 * The commands that bring the downloaded config up on a Linux or macOS host: wg-quick names the
 * interface after the file, which must match `^[a-zA-Z0-9_=+.-]{1,15}$`, so the download
 * (`<config>-<node>.conf`) is installed as `<interface_name>.conf` in the toolchain's directory
 * first (root-only, mode 0600: it holds the private key).
 */
export function quickUpCommand(protocol: TunnelProtocol, filename: string, iface: string): string {
  const { dir, quick } = QUICK_DIR[protocol];
  return `sudo mkdir -p ${dir} && sudo install -m 600 ${filename} ${dir}/${iface}.conf && sudo ${quick} up ${iface}`;
}

/** A 5-minute download link (`POST …/download-token`), the curl command that fetches it, and how to bring it up. */
function DownloadLink({ configId, node, protocol, filename }: { configId: string; node: NodeView; protocol: TunnelProtocol; filename: string | undefined }) {
  const issue = useConfigDownload(configId, node.node_id);
  const linkRef = useFocusOnArrival<HTMLAnchorElement>(issue.data);
  const file = filename ?? `${node.interface_name}.conf`;
  // The command runs on another host: it names the public URL hosts are given, not this browser's address.
  const publicUrl = useServerSettings().data?.public_url ?? window.location.origin;
  const url = issue.data === undefined ? "" : new URL(issue.data.download_path, publicUrl).toString();
  const curl = `curl -fsSL -o ${file} '${url}'`;
  const up = quickUpCommand(protocol, file, node.interface_name);
  const gate = useGate("grantNodeConfigDownload");
  return (
    <section className="card" aria-labelledby="download-title">
      <h2 id="download-title">Download</h2>
      <p className="muted">A link valid for a few minutes, usable without logging in (for the endpoint host).</p>
      <PublicUrlWarning />
      <button type="button" {...gate.props} onClick={() => issue.mutate()} disabled={gate.disabled || issue.isPending}>
        {issue.isSuccess ? "New download link" : "Create download link"}
      </button>
      {gate.reason}
      <FormError error={issue.error} />
      {issue.isSuccess && (
        <div className="download">
          <p>
            <a ref={linkRef} href={issue.data.download_path} download={file}>
              Download {file}
            </a>{" "}
            <span className="muted">(valid until {new Date(issue.data.download_token_expires_at).toLocaleTimeString()})</span>
          </p>
          <label htmlFor="curl-command">curl command</label>
          <div className="command">
            <input id="curl-command" className="mono" readOnly value={curl} onFocus={(e) => e.currentTarget.select()} />
            <CopyButton text={curl} label="curl command" />
          </div>
          <AppDownloads configId={configId} nodeId={node.node_id} downloadPath={issue.data.download_path} />
        </div>
      )}
      <h3 className="subhead">Bring it up</h3>
      <p className="muted">
        On Linux or macOS, with {QUICK_DIR[protocol].quick} installed, in the directory holding {file}:
      </p>
      <div className="command">
        <pre aria-label={`${QUICK_DIR[protocol].quick} command`}>
          <code>{up}</code>
        </pre>
        <CopyButton text={up} label={`${QUICK_DIR[protocol].quick} command`} />
      </div>
      <p className="muted">
        {QUICK_DIR[protocol].quick} names the interface after the file ({node.interface_name}); stop it with <code>sudo {QUICK_DIR[protocol].quick} down {node.interface_name}</code>. On Windows, import {file}{" "}
        in the {QUICK_DIR[protocol].app} app; on phones and tablets, scan the app&apos;s QR code below.
      </p>
    </section>
  );
}

/**
 * The same download token's files for the Amnezia apps (`format=amneziawg|amneziavpn`), for the
 * apps that can take this config (the WireGuard app takes the file above).
 */
function AppDownloads({ configId, nodeId, downloadPath }: { configId: string; nodeId: string; downloadPath: string }) {
  const apps = useAppConfigs(configId, nodeId);
  const offered = (apps.data?.apps ?? []).filter((a) => a.app !== "wireguard" && a.text !== null);
  if (offered.length === 0) return null;
  return (
    <ul className="app-downloads" aria-label="Files for the Amnezia apps">
      {offered.map((a) => (
        <li key={a.app}>
          <a href={`${downloadPath}&format=${a.app}`} download={a.filename}>
            Download {a.filename} for the {CLIENT_APPS[a.app].name}
          </a>
        </li>
      ))}
    </ul>
  );
}

/** The node's tags (`PATCH …/nodes/{id}` `tags`), comma or space separated. */
function TagsEditor({ config, node }: { config: ConfigDetailView; node: NodeView }) {
  const [value, setValue] = useState(node.tags.join(", "));
  useEffect(() => setValue(node.tags.join(", ")), [node.tags]);
  const save = useSaveTags(config.config_id, node.node_id);
  const gate = useGate("updateNode");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate(value.split(/[\s,]+/).filter((t) => t !== ""));
  };
  return (
    <form className="card form" onSubmit={submit} aria-labelledby="tags-edit-title">
      <h2 id="tags-edit-title">Tags</h2>
      <label htmlFor="node-tags">Tags of this node</label>
      <div className="command">
        <input id="node-tags" value={value} placeholder="e.g. office, eu-west" disabled={gate.disabled} onChange={(e) => setValue(e.target.value)} />
        <button type="submit" {...gate.props} disabled={gate.disabled || save.isPending}>
          Save tags
        </button>
      </div>
      {gate.reason}
      <FormError error={save.error} />
    </form>
  );
}

/** Port forwards of the node: list, create, enable/disable, delete (each write re-stages the node). */
function PortForwards({ configId, nodeId }: { configId: string; nodeId: string }) {
  const query = usePortForwards(configId, nodeId);
  const writes = usePortForwardWrites(configId, nodeId);
  const { create, toggle: update, remove } = writes;
  const error = create.error ?? update.error ?? remove.error;
  const canWrite = useCan("createPortForward");
  return (
    <section className="card" aria-labelledby="pf-title">
      <h2 id="pf-title">Port forwards</h2>
      <QueryView query={query} isEmpty={(d) => d.port_forwards.length === 0} empty={<p>No port forwards.</p>}>
        {(d) => <PortForwardList forwards={d.port_forwards} writes={writes} />}
      </QueryView>
      <RoleNote can={canWrite} what="port forwards are added, changed and deleted by admins" />
      {canWrite.allowed && <AddPortForwardForm create={create} />}
      <FormError error={error} />
    </section>
  );
}

type PortForwardWrites = ReturnType<typeof usePortForwardWrites>;

/** One line per forward (`tcp 8080 → 10.0.0.5:80`) with its state and Enable/Disable and Delete buttons. */
function PortForwardList({ forwards, writes }: { forwards: PortForwardView[]; writes: PortForwardWrites }) {
  const canToggle = useCan("updatePortForward").allowed;
  const canDelete = useCan("deletePortForward").allowed;
  return (
    <ul className="pair-list" aria-label="Port forwards">
      {forwards.map((pf) => {
        const label = `${pf.protocol} ${pf.listen_port} → ${pf.target_address}:${pf.target_port}`;
        return (
          <li key={pf.forward_id} className="pair">
            <span className="mono">{label}</span>
            <span className="badge">{pf.enabled ? "enabled" : "disabled"}</span>
            <span className="pair-actions">
              {canToggle && (
                <button type="button" data-op="updatePortForward" aria-label={`${pf.enabled ? "Disable" : "Enable"} forward ${label}`} onClick={() => writes.toggle.mutate(pf)}>
                  {pf.enabled ? "Disable" : "Enable"}
                </button>
              )}
              {canDelete && (
                <button type="button" className="danger-outline" data-op="deletePortForward" aria-label={`Delete forward ${label}`} onClick={() => writes.remove.mutate(pf)}>
                  Delete
                </button>
              )}
            </span>
          </li>
        );
      })}
    </ul>
  );
}

/** Protocol, listen port, target address and port; on success the ports are cleared (protocol and address stay, for the next one). */
function AddPortForwardForm({ create }: { create: PortForwardWrites["create"] }) {
  const [proto, setProto] = useState<"tcp" | "udp">("tcp");
  const [listen, setListen] = useState("");
  const [target, setTarget] = useState("");
  const [targetPort, setTargetPort] = useState("");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(
      { protocol: proto, listen_port: Number(listen), target_address: target.trim(), target_port: Number(targetPort) },
      {
        onSuccess: () => {
          setListen("");
          setTargetPort("");
        },
      },
    );
  };
  return (
    <form className="form-row" onSubmit={submit} aria-label="Add a port forward">
      <div>
        <label htmlFor="pf-proto">Protocol</label>
        <select id="pf-proto" value={proto} onChange={(e) => setProto(e.target.value as "tcp" | "udp")}>
          <option value="tcp">tcp</option>
          <option value="udp">udp</option>
        </select>
      </div>
      <div>
        <label htmlFor="pf-listen">Listen port</label>
        <input id="pf-listen" type="number" min={1} max={65535} value={listen} onChange={(e) => setListen(e.target.value)} required />
      </div>
      <div>
        <label htmlFor="pf-target">Target address</label>
        <input id="pf-target" className="mono" value={target} onChange={(e) => setTarget(e.target.value)} required placeholder="10.0.0.5" />
      </div>
      <div>
        <label htmlFor="pf-target-port">Target port</label>
        <input id="pf-target-port" type="number" min={1} max={65535} value={targetPort} onChange={(e) => setTargetPort(e.target.value)} required />
      </div>
      <div className="form-row-action">
        <button type="submit" data-op="createPortForward" disabled={create.isPending}>
          Add port forward
        </button>
      </div>
    </form>
  );
}
