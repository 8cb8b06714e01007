import { useId, useState } from "react";
import { CLIENT_GOOS, CLIENT_TARGETS, artifactFilename, downloadCommand, releaseAssetUrl, type ClientGoarch, type ClientGoos } from "../../../../src/protocol/client-targets.js";
import { errorMessage } from "../../api/client.js";
import type { ArtifactRequestBody, NodeView } from "../../api/types.js";
import { CopyButton } from "../../components/copy-button.js";
import { Countdown } from "../../components/countdown.js";
import { PublicUrlWarning } from "../../components/public-url-warning.js";
import { QueryView } from "../../components/states.js";
import { useSystemStatus } from "../system/queries.js";
import { useBindCommand, useClientDownload } from "./mutations.js";

/**
 * The initialization page of a dynamic node with `client_initialized=false` (spec §3.2): download
 * the client, install it, bind it. Binding flips the node to `client_initialized=true`, and the
 * dispatcher (`node.tsx`) shows the control page as soon as SSE says so.
 */
export function NodeInitView({ node }: { node: NodeView }) {
  return (
    <div className="node-init">
      <p className="muted">This dynamic node has no bound client yet: download the client on the endpoint host, then run the bind command there.</p>
      <PublicUrlWarning />
      <ClientDownload />
      <BindCommand node={node} />
    </div>
  );
}

type Source = ArtifactRequestBody["source"];

/**
 * Client download with an OS/architecture picker. `remote_release`: the console builds the release
 * asset URL itself from the server version and `update.release_download_url` and asks the backend
 * nothing (spec §4 rules 2 and 5). `local_build`: download-grant gives a 5-minute file-token link
 * (rule 6); the copied command carries only that token.
 */
function ClientDownload() {
  const status = useSystemStatus();
  const grant = useClientDownload();
  const [target, setTarget] = useState<ClientChoice>({ source: "remote_release", goos: "linux", goarch: "amd64" });
  // A link granted for another target is no longer the one asked for.
  const choose = (next: ClientChoice) => {
    setTarget(next);
    grant.reset();
  };

  return (
    <section className="card" aria-labelledby="client-download-title">
      <h2 id="client-download-title">1. Download the client</h2>
      <ClientPicker choice={target} onChange={choose} />
      <QueryView query={status}>
        {(s) => {
          if (target.source === "remote_release") {
            const t = { goos: target.goos, goarch: target.goarch };
            const filename = artifactFilename(t, s.update.version);
            const url = releaseAssetUrl(s.update.release_download_url, t, s.update.version);
            return <DownloadBlock filename={filename} url={url} command={downloadCommand(filename, url)} />;
          }
          return <LocalBuildDownload grant={grant} goos={target.goos} goarch={target.goarch} />;
        }}
      </QueryView>
    </section>
  );
}

/** Where the client comes from and for which OS and architecture. */
interface ClientChoice {
  source: Source;
  goos: ClientGoos;
  goarch: ClientGoarch;
}

/** Source radios, OS and architecture selects; choosing an OS without the current architecture picks its first one. */
function ClientPicker({ choice, onChange }: { choice: ClientChoice; onChange: (choice: ClientChoice) => void }) {
  const ids = { os: useId(), arch: useId() };
  const arches: readonly ClientGoarch[] = CLIENT_TARGETS[choice.goos];
  const chooseOs = (os: ClientGoos) => {
    const goarch = (CLIENT_TARGETS[os] as readonly string[]).includes(choice.goarch) ? choice.goarch : CLIENT_TARGETS[os][0];
    onChange({ ...choice, goos: os, goarch });
  };
  return (
    <div className="picker">
      <fieldset className="radios">
        <legend>Source</legend>
        <label>
          <input type="radio" name="client-source" value="remote_release" checked={choice.source === "remote_release"} onChange={() => onChange({ ...choice, source: "remote_release" })} />
          Release host
        </label>
        <label>
          <input type="radio" name="client-source" value="local_build" checked={choice.source === "local_build"} onChange={() => onChange({ ...choice, source: "local_build" })} />
          Built by this server
        </label>
      </fieldset>
      <div className="field">
        <label htmlFor={ids.os}>Operating system</label>
        <select id={ids.os} value={choice.goos} onChange={(e) => chooseOs(e.target.value as ClientGoos)}>
          {CLIENT_GOOS.map((os) => (
            <option key={os} value={os}>
              {os}
            </option>
          ))}
        </select>
      </div>
      <div className="field">
        <label htmlFor={ids.arch}>Architecture</label>
        <select id={ids.arch} value={choice.goarch} onChange={(e) => onChange({ ...choice, goarch: e.target.value as ClientGoarch })}>
          {arches.map((a) => (
            <option key={a} value={a}>
              {a}
            </option>
          ))}
        </select>
      </div>
    </div>
  );
}

/** `local_build`: asks the backend for a short-lived download link to the client it builds. */
function LocalBuildDownload({ grant, goos, goarch }: { grant: ReturnType<typeof useClientDownload>; goos: ClientGoos; goarch: ClientGoarch }) {
  return (
    <>
      <button type="button" onClick={() => grant.mutate({ source: "local_build", goos, goarch })} disabled={grant.isPending}>
        {grant.isPending ? "Preparing the client…" : "Get download link"}
      </button>
      {grant.data && (
        <DownloadBlock
          filename={grant.data.filename}
          url={grant.data.download_path}
          command={grant.data.command}
          expiresAt={grant.data.download_token_expires_at}
        />
      )}
      {grant.isError && (
        <p className="form-error" role="alert">
          {errorMessage(grant.error)}
        </p>
      )}
    </>
  );
}

function DownloadBlock({ filename, url, command, expiresAt }: { filename: string; url: string; command: string; expiresAt?: string }) {
  return (
    <div className="download-block">
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
      <p className="muted">Or on the endpoint host:</p>
      <div className="command">
        <pre aria-label="Download command">
          <code>{command}</code>
        </pre>
        <CopyButton text={command} label="download command" />
      </div>
    </div>
  );
}

/** The one-time bind command (spec §4 rule 10, §3.6: valid 5 minutes) with its countdown and a copy button. */
function BindCommand({ node }: { node: NodeView }) {
  const issue = useBindCommand(node.config_id, node.node_id);
  return (
    <section className="card" aria-labelledby="bind-title">
      <h2 id="bind-title">2. Bind the client</h2>
      <p className="muted">Run this on the endpoint host after unpacking the client. It works once, for 5 minutes; a new one invalidates the old.</p>
      <button type="button" className="primary" onClick={() => issue.mutate()} disabled={issue.isPending}>
        {issue.data ? "Generate a new bind command" : "Generate bind command"}
      </button>
      {issue.data && (
        <div className="command">
          <pre aria-label="Bind command">
            <code>{issue.data.command}</code>
          </pre>
          <CopyButton text={issue.data.command} label="bind command" />
          <p className="muted">
            Bind command <Countdown iso={issue.data.expires_at} />
          </p>
        </div>
      )}
      {issue.isError && (
        <p className="form-error" role="alert">
          {errorMessage(issue.error)}
        </p>
      )}
    </section>
  );
}
