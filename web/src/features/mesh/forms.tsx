import { useState, type FormEvent } from "react";
import { errorMessage } from "../../api/client.js";
import type { ConfigDetailView, NodeMode, TunnelProtocol } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { useSystemStatus } from "../system/queries.js";
import { useConfigPackage, useCreateNode, useSwitchProtocol } from "./mutations.js";

const MQTT_OFF = "MQTT services are disabled (SVC_ENABLE_MQTT_SERVICES=false): only static nodes can be created.";

/**
 * Add a node (`POST /api/v1/configs/{id}/nodes`): name, static/dynamic, public address, listen
 * port, auto-pair (on: paired with every node already there). With MQTT off (spec §1.7 bullet 7)
 * the dynamic choice stays, disabled, with the reason.
 */
export function AddNodeForm({ config }: { config: ConfigDetailView }) {
  const status = useSystemStatus();
  const mqttOff = status.data?.services.mqtt.enabled === false;
  const [name, setName] = useState("");
  const [mode, setMode] = useState<NodeMode>("static");
  const [publicAddress, setPublicAddress] = useState("");
  const [listenPort, setListenPort] = useState("");
  const [autoPair, setAutoPair] = useState(true);
  const [added, setAdded] = useState<string | null>(null);
  const create = useCreateNode(config.config_id);
  const onAdded = {
    onSuccess: (node: { name: string }) => {
      setAdded(node.name);
      setName("");
      setPublicAddress("");
      setListenPort("");
    },
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setAdded(null);
    create.mutate({
      name: name.trim(),
      mode,
      public_address: publicAddress.trim() === "" ? null : publicAddress.trim(),
      ...(listenPort.trim() === "" ? {} : { listen_port: Number(listenPort) }),
      auto_pair: autoPair,
    }, onAdded);
  };
  return (
    <details className="card add-node">
      <summary>
        <h2>Add a node</h2>
      </summary>
      <form className="form" onSubmit={submit} aria-label="Add a node">
        <div className="form-row">
          <div>
            <label htmlFor="node-name">Node name</label>
            <input id="node-name" value={name} onChange={(e) => setName(e.target.value)} required />
          </div>
          <div>
            <label htmlFor="node-mode">Node mode</label>
            <select id="node-mode" value={mode} onChange={(e) => setMode(e.target.value as NodeMode)}>
              <option value="static">static</option>
              <option value="dynamic" disabled={mqttOff} title={mqttOff ? MQTT_OFF : undefined}>
                dynamic
              </option>
            </select>
          </div>
          <div>
            <label htmlFor="node-public-address">Public address</label>
            <input id="node-public-address" placeholder="optional: host or IP" value={publicAddress} onChange={(e) => setPublicAddress(e.target.value)} />
          </div>
          <div>
            <label htmlFor="node-listen-port">Listen port</label>
            <input id="node-listen-port" type="number" min={1} max={65535} placeholder="51820" value={listenPort} onChange={(e) => setListenPort(e.target.value)} />
          </div>
        </div>
        <div className="form-row">
          <label className="checkbox" htmlFor="node-auto-pair">
            <input id="node-auto-pair" type="checkbox" checked={autoPair} onChange={(e) => setAutoPair(e.target.checked)} />
            Pair with every existing node ({config.nodes.length})
          </label>
          <div className="form-row-action">
            <button type="submit" className="primary" disabled={create.isPending || name.trim() === ""}>
              Add node
            </button>
          </div>
        </div>
        {mqttOff && <p className="notice">{MQTT_OFF}</p>}
        {create.isError && (
          <p className="form-error" role="alert">
            {errorMessage(create.error)}
          </p>
        )}
        {added !== null && !create.isPending && (
          <p className="form-ok" role="status">
            Node {added} added.
          </p>
        )}
      </form>
    </details>
  );
}

/**
 * Switch the config's protocol `wireguard` ↔ `awg_2` (`PATCH /api/v1/configs/{id}`). Every node's
 * config is re-staged, so the confirmation says how many.
 */
export function ProtocolSwitch({ config }: { config: ConfigDetailView }) {
  const [open, setOpen] = useState(false);
  const target: TunnelProtocol = config.tunnel_protocol === "wireguard" ? "awg_2" : "wireguard";
  const n = config.nodes.length;
  const patch = useSwitchProtocol(config.config_id);
  return (
    <>
      <button type="button" onClick={() => { patch.reset(); setOpen(true); }}>
        Switch to {target}
      </button>
      <ConfirmDialog
        open={open}
        title={`Switch ${config.name} to ${target}?`}
        confirmLabel={`Switch to ${target}`}
        busy={patch.isPending}
        onConfirm={() => patch.mutate(target, { onSuccess: () => setOpen(false) })}
        onCancel={() => setOpen(false)}
      >
        <p>
          {n === 0 ? "No node is re-staged: the config has no nodes yet." : `${n} ${n === 1 ? "node is" : "nodes are"} re-staged with a new config.`} Dynamic nodes
          show <strong>pending</strong> until they apply it; static nodes need their new config file.
        </p>
        {patch.isError && (
          <p className="form-error" role="alert">
            {errorMessage(patch.error)}
          </p>
        )}
      </ConfirmDialog>
    </>
  );
}

/**
 * The bulk config package of this config (spec §2.3, `POST /api/v1/tools/download/config-bulk/package`):
 * a zip of every node's config behind a short-lived token link.
 */
export function PackageDownload({ configId }: { configId: string }) {
  const make = useConfigPackage(configId);
  return (
    <div className="package">
      <button type="button" onClick={() => make.mutate()} disabled={make.isPending}>
        Prepare config package
      </button>
      {make.isSuccess && (
        <span className="package-link">
          <a href={make.data.download_path} download={make.data.filename}>
            Download {make.data.filename}
          </a>{" "}
          <span className="muted">(link valid until {new Date(make.data.download_token_expires_at).toLocaleTimeString()})</span>
        </span>
      )}
      {make.isError && (
        <span className="form-error" role="alert">
          {errorMessage(make.error)}
        </span>
      )}
    </div>
  );
}
