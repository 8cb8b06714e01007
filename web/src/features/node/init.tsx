import { useQuery } from "@tanstack/react-query";
import { useId, useRef, useState, type KeyboardEvent } from "react";
import {
  CLIENT_GOOS,
  CLIENT_NODE_REQUIREMENT,
  CLIENT_TARGETS,
  CLIENT_UNZIP_DIR,
  artifactFilename,
  downloadCommand,
  releaseAssetUrl,
  type ClientGoarch,
  type ClientGoos,
} from "../../../../src/protocol/client-targets.js";
import { ApiError, api, errorMessage } from "../../api/client.js";
import { RoleNote, useCan, useGate } from "../../api/roles.js";
import type { ArtifactRequestBody, NodeView, SystemStatus, TunnelProtocol } from "../../api/types.js";
import { CopyButton } from "../../components/copy-button.js";
import { Countdown } from "../../components/countdown.js";
import { PublicUrlWarning } from "../../components/public-url-warning.js";
import { QueryView } from "../../components/states.js";
import { useUrlState } from "../../url-state.js";
import { useConfigDetail } from "../mesh/queries.js";
import { useSystemStatus } from "../system/queries.js";
import { useBindCommand, useClientDownload } from "./mutations.js";
import { PREREQUISITES, bindCommandFor, type Step } from "./setup-steps.js";
import { FormError } from "../../components/form-error.js";

const OS_LABEL: Record<ClientGoos, string> = { linux: "Linux", darwin: "macOS", windows: "Windows" };

/** The toolchain of each protocol as the host's OS has it (spec §6.3 "Toolchains by tunnel_protocol"). */
const TOOLCHAIN: Record<"unix" | "windows", Record<TunnelProtocol, string>> = {
  unix: { wireguard: "WireGuard (wg, wg-quick)", awg_2: "AmneziaWG (awg, awg-quick)" },
  windows: { wireguard: "WireGuard for Windows (wireguard.exe)", awg_2: "AmneziaWG for Windows (amneziawg.exe)" },
};

/**
 * The initialization page of a dynamic node with `client_initialized=false` (spec §3.2): the whole
 * setup of its host, per operating system (the client's targets: Linux, macOS, Windows), in tabs —
 * install the prerequisites, download and unpack the client, bind it as root, and what "bound"
 * looks like. Binding flips the node to `client_initialized=true`, and the dispatcher (`page.tsx`)
 * shows the control page as soon as the stream says so.
 */
export function NodeInitView({ node }: { node: NodeView }) {
  const [param, setParam] = useUrlState("os");
  const os: ClientGoos = (CLIENT_GOOS as readonly string[]).includes(param) ? (param as ClientGoos) : "linux";
  const detail = useConfigDetail(node.config_id);
  const protocol = detail.data?.tunnel_protocol ?? "wireguard";
  return (
    <div className="node-init">
      <p className="muted">
        This dynamic node has no bound client yet. On the node&apos;s host, follow the four steps for its operating system; this page switches to
        the control page by itself once the agent is bound.
      </p>
      <PublicUrlWarning />
      <OsTabs os={os} onChange={(next) => setParam(next === "linux" ? "" : next)} />
      <div role="tabpanel" id="setup-os-panel" aria-labelledby={`setup-os-${os}`}>
        <Prerequisites os={os} protocol={protocol} />
        <ClientDownload os={os} />
        <BindCommand node={node} os={os} />
        <BoundCheck os={os} />
      </div>
    </div>
  );
}

/** WAI-ARIA tabs for the host's operating system: one tab in the tab order, arrow keys and Home/End move. */
function OsTabs({ os, onChange }: { os: ClientGoos; onChange: (os: ClientGoos) => void }) {
  const refs = useRef<Partial<Record<ClientGoos, HTMLButtonElement | null>>>({});
  const onKey = (e: KeyboardEvent<HTMLDivElement>) => {
    const i = CLIENT_GOOS.indexOf(os);
    const n = CLIENT_GOOS.length;
    const next = e.key === "ArrowRight" ? (i + 1) % n : e.key === "ArrowLeft" ? (i - 1 + n) % n : e.key === "Home" ? 0 : e.key === "End" ? n - 1 : -1;
    const target = CLIENT_GOOS[next];
    if (target === undefined) return;
    e.preventDefault();
    onChange(target);
    refs.current[target]?.focus();
  };
  return (
    <div role="tablist" aria-label="Operating system of the node's host" className="tablist os-tabs" onKeyDown={onKey}>
      {CLIENT_GOOS.map((g) => (
        <button
          key={g}
          ref={(el) => {
            refs.current[g] = el;
          }}
          type="button"
          role="tab"
          id={`setup-os-${g}`}
          aria-selected={os === g}
          aria-controls="setup-os-panel"
          tabIndex={os === g ? 0 : -1}
          onClick={() => onChange(g)}
        >
          {OS_LABEL[g]}
        </button>
      ))}
    </div>
  );
}

/** One command with its copy button; `label` names both. */
function CommandBox({ label, command }: { label: string; command: string }) {
  return (
    <div className="command">
      <pre aria-label={label}>
        <code>{command}</code>
      </pre>
      <CopyButton text={command} label={label} />
    </div>
  );
}

function StepList({ steps }: { steps: readonly Step[] }) {
  return (
    <ul className="setup-steps">
      {steps.map((s) => (
        <li key={s.what}>
          <p>{s.what}</p>
          {s.command !== undefined && <CommandBox label={s.label ?? s.what} command={s.command} />}
        </li>
      ))}
    </ul>
  );
}

/** Step 1: Node.js and the tunnel toolchain of the config's protocol (wg/wg-quick or awg/awg-quick). */
function Prerequisites({ os, protocol }: { os: ClientGoos; protocol: TunnelProtocol }) {
  return (
    <section className="card" aria-labelledby="prereq-title">
      <h2 id="prereq-title">1. Install the prerequisites</h2>
      <p className="muted">
        The client runs on {CLIENT_NODE_REQUIREMENT}. The tunnel itself is brought up by {TOOLCHAIN[os === "windows" ? "windows" : "unix"][protocol]}, the
        config&apos;s protocol.
      </p>
      <StepList steps={PREREQUISITES[os](protocol)} />
    </section>
  );
}

type Source = ArtifactRequestBody["source"];

/**
 * Step 2: the client zip for the tab's OS and a chosen architecture. `remote_release`: the backend
 * first asks the release host whether the asset of this version exists (`build`, spec §4 rules
 * 2–3); only then is the link shown, built in the browser from the server version and
 * `update.release_download_url` (rule 5). `local_build`: download-grant gives a 5-minute
 * file-token link (rule 6); the copied command carries only that token.
 */
function ClientDownload({ os }: { os: ClientGoos }) {
  const status = useSystemStatus();
  const grant = useClientDownload();
  const [source, setSource] = useState<Source>("remote_release");
  const [arch, setArch] = useState<ClientGoarch>("amd64");
  const goarch = (CLIENT_TARGETS[os] as readonly string[]).includes(arch) ? arch : CLIENT_TARGETS[os][0];
  const granted = grant.data !== undefined && grant.variables?.goos === os && grant.variables.goarch === goarch ? grant.data : undefined;
  // Asking the release host and the local build's link both go through the artifact routes (operator and above).
  const canAsk = useCan("buildClientArtifact");
  const gate = useGate("grantClientArtifactDownload");
  return (
    <section className="card" aria-labelledby="client-download-title">
      <h2 id="client-download-title">2. Download and unpack the client</h2>
      <ClientPicker os={os} source={source} goarch={goarch} onSource={setSource} onArch={setArch} />
      {canAsk.reason !== null && <RoleNote can={canAsk} what="client download links are handed out to operators" />}
      <QueryView query={status}>
        {(s) =>
          source === "remote_release" ? (
            canAsk.allowed && <ReleaseDownload status={s} os={os} goarch={goarch} onUseLocal={() => setSource("local_build")} />
          ) : (
            <>
              <button type="button" {...gate.props} onClick={() => grant.mutate({ source: "local_build", goos: os, goarch })} disabled={gate.disabled || grant.isPending}>
                {grant.isPending ? "Preparing the client…" : "Get download link"}
              </button>
              {gate.reason}
              {granted !== undefined && (
                <DownloadBlock os={os} filename={granted.filename} url={granted.download_path} command={granted.command} expiresAt={granted.download_token_expires_at} />
              )}
              <FormError error={grant.error} />
            </>
          )
        }
      </QueryView>
    </section>
  );
}

/** Source radios and the architecture select of the tab's OS. */
function ClientPicker(p: { os: ClientGoos; source: Source; goarch: ClientGoarch; onSource: (s: Source) => void; onArch: (a: ClientGoarch) => void }) {
  const archId = useId();
  return (
    <div className="picker">
      <fieldset className="radios">
        <legend>Source</legend>
        <label>
          <input type="radio" name="client-source" value="remote_release" checked={p.source === "remote_release"} onChange={() => p.onSource("remote_release")} />
          Release host
        </label>
        <label>
          <input type="radio" name="client-source" value="local_build" checked={p.source === "local_build"} onChange={() => p.onSource("local_build")} />
          Built by this server
        </label>
      </fieldset>
      <div className="field">
        <label htmlFor={archId}>Architecture</label>
        <select id={archId} value={p.goarch} onChange={(e) => p.onArch(e.target.value as ClientGoarch)}>
          {CLIENT_TARGETS[p.os].map((a) => (
            <option key={a} value={a}>
              {a}
            </option>
          ))}
        </select>
      </div>
    </div>
  );
}

/**
 * `POST …/client-artifacts/build` with `remote_release`: whether the release host has the asset of
 * this version (the backend asks it; nothing is cached there). Read once per target and version.
 */
function useReleaseAsset(goos: ClientGoos, goarch: ClientGoarch, version: string) {
  return useQuery({
    queryKey: ["client-release", version, goos, goarch],
    queryFn: ({ signal }) => api.buildClientArtifact({ body: { source: "remote_release", goos, goarch }, signal }),
    retry: false,
    staleTime: 5 * 60_000,
  });
}

/** The release asset's link and command once the backend found it; otherwise why not, and the local build as the way out. */
function ReleaseDownload({ status, os, goarch, onUseLocal }: { status: SystemStatus; os: ClientGoos; goarch: ClientGoarch; onUseLocal: () => void }) {
  const version = status.update.version;
  const asset = useReleaseAsset(os, goarch, version);
  const target = { goos: os, goarch };
  const filename = artifactFilename(target, version);
  if (asset.isPending) {
    return (
      <p className="muted" role="status">
        Asking the release host for {filename}…
      </p>
    );
  }
  if (asset.isError) {
    const missing = asset.error instanceof ApiError && asset.error.code === "RELEASE_NOT_FOUND";
    return (
      <div className="notice" role="alert">
        <p>
          {missing
            ? `The release host has no ${filename}: release v${version} of this server is not published there (no other version is offered).`
            : `The release host could not be asked for ${filename}: ${errorMessage(asset.error)}`}
        </p>
        <div className="actions">
          <button type="button" onClick={onUseLocal}>
            Use the client built by this server
          </button>
          {!missing && (
            <button type="button" onClick={() => void asset.refetch()}>
              Ask again
            </button>
          )}
        </div>
      </div>
    );
  }
  const url = releaseAssetUrl(status.update.release_download_url, target, version);
  return <DownloadBlock os={os} filename={filename} url={url} command={downloadCommand(filename, url)} found />;
}

function DownloadBlock({ os, filename, url, command, expiresAt, found = false }: { os: ClientGoos; filename: string; url: string; command: string; expiresAt?: string; found?: boolean }) {
  return (
    <div className="download-block">
      {found && (
        <p className="form-ok" role="status">
          The release host has {filename}.
        </p>
      )}
      <p>
        <a href={url} download={filename}>
          Download {filename}
        </a>
        {expiresAt !== undefined && (
          <>
            {" "}
            (link <Countdown iso={expiresAt} />)
          </>
        )}
      </p>
      <p className="muted">Or on the node&apos;s host, which unpacks it into {CLIENT_UNZIP_DIR}/:</p>
      <CommandBox label="Download command" command={command} />
      {os === "windows" && (
        <p className="muted">
          Windows has no <code>unzip</code>: in PowerShell run <code>{`curl.exe -fL -o ${filename} "${url}"; Expand-Archive ${filename} -DestinationPath ${CLIENT_UNZIP_DIR} -Force`}</code>.
        </p>
      )}
    </div>
  );
}

/** Step 3: the one-time bind command (spec §4 rule 10, §3.6: valid 5 minutes), as run from the unpacked directory with root rights. */
function BindCommand({ node, os }: { node: NodeView; os: ClientGoos }) {
  const issue = useBindCommand(node.config_id, node.node_id);
  const command = issue.data === undefined ? undefined : bindCommandFor(os, issue.data.command);
  const gate = useGate("issueBindCommand");
  return (
    <section className="card" aria-labelledby="bind-title">
      <h2 id="bind-title">3. Bind the client</h2>
      <p className="muted">
        {os === "windows"
          ? "In an elevated Command Prompt (Run as administrator), in the folder holding svc-client:"
          : "In the directory holding svc-client/, as root (bind installs the agent's system service):"}{" "}
        the command works once, for 5 minutes; a new one invalidates the old. The service runs the client from this {CLIENT_UNZIP_DIR} directory: keep it where it is.
      </p>
      <button type="button" className="primary" {...gate.props} onClick={() => issue.mutate()} disabled={gate.disabled || issue.isPending}>
        {issue.data ? "Generate a new bind command" : "Generate bind command"}
      </button>
      {gate.reason}
      {issue.data !== undefined && command !== undefined && (
        <>
          <CommandBox label="Bind command" command={command} />
          <p className="muted">
            Bind command <Countdown iso={issue.data.expires_at} />
          </p>
        </>
      )}
      <FormError error={issue.error} />
    </section>
  );
}

/** Step 4: what a successful bind prints, how to check the service, and what this page does then. */
function BoundCheck({ os }: { os: ClientGoos }) {
  const service = os === "linux" ? "svc-agent.service" : os === "darwin" ? "com.svc.agent" : "SvcAgent";
  const status = os === "windows" ? "svcctl.cmd status" : "sudo ./svcctl status";
  return (
    <section className="card" aria-labelledby="bound-title">
      <h2 id="bound-title">4. Check that it is bound</h2>
      <p>
        A successful bind prints <code>bound node … of config …</code> and <code>service: {service} installed and started</code>. To look again later, in{" "}
        {CLIENT_UNZIP_DIR}:
      </p>
      <CommandBox label="Status command" command={status} />
      <p>
        Within seconds this page turns into the node&apos;s control page on its own: presence <strong>online</strong>, runtime and sync state, the control log. If it
        stays here, the bind did not reach this server: check the <code>--server</code> address from the node&apos;s host.
      </p>
      <p className="muted" role="status">
        Waiting for the agent: not bound yet.
      </p>
    </section>
  );
}
