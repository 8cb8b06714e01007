import { useState, type FormEvent } from "react";
import { nameSchema } from "../../../../src/protocol/fields.js";
import { errorMessage } from "../../api/client.js";
import { useGate } from "../../api/roles.js";
import type { ConfigDetailView, NodeMode, TunnelProtocol } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { useFocusOnArrival } from "../../components/focus-on-arrival.js";
import { FormError, invalidProps } from "../../components/form-error.js";
import { PublicUrlWarning } from "../../components/public-url-warning.js";
import { useSystemStatus } from "../system/queries.js";
import { useConfigPackage, useCreateNode, useSwitchProtocol } from "./mutations.js";

const MQTT_OFF = "MQTT services are disabled (SVC_ENABLE_MQTT_SERVICES=false): only static nodes can be created.";

/**
 * Add a node (`POST /api/v1/configs/{id}/nodes`): name, static/dynamic, public address, listen
 * port, auto-pair (on: paired with every node already there), hub (forwards for nodes behind NAT).
 * With MQTT off (spec §1.7 bullet 7) the dynamic choice stays, disabled, with the reason. Open from
 * the start on a config with no node (its empty state points here); an error names the field by its label.
 */
export function AddNodeForm({ config }: { config: ConfigDetailView }) {
  const status = useSystemStatus();
  const mqttOff = status.data?.services.mqtt.enabled === false;
  const { draft, edit, added, create, submit } = useAddNode(config.config_id);
  const [open, setOpen] = useState(config.nodes.length === 0);
  const gate = useGate("createNode");
  return (
    <details className="card add-node" open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>
        <h2>Add a node</h2>
      </summary>
      <form className="form" onSubmit={submit} aria-label="Add a node">
        <fieldset disabled={gate.disabled}>
        <NodeDraftFields draft={draft} edit={edit} mqttOff={mqttOff} error={create.error} />
        <div className="form-row">
          <label className="checkbox" htmlFor="node-auto-pair">
            <input id="node-auto-pair" type="checkbox" checked={draft.autoPair} onChange={(e) => edit({ autoPair: e.target.checked })} />
            Pair with every existing node ({config.nodes.length})
          </label>
          <label className="checkbox" htmlFor="node-hub">
            <input id="node-hub" type="checkbox" checked={draft.hub} onChange={(e) => edit({ hub: e.target.checked })} />
            Hub: forwards between nodes behind NAT (must be reachable: give it an address above)
          </label>
          <div className="form-row-action">
            <button type="submit" className="primary" {...gate.props} disabled={gate.disabled || create.isPending || draft.name.trim() === ""}>
              Add node
            </button>
            {gate.reason}
          </div>
        </div>
        </fieldset>
        {mqttOff && <p className="notice">{MQTT_OFF}</p>}
        <FormError error={create.error} labels={NODE_LABELS} id="add-node-error" />
        {added !== null && !create.isPending && (
          <p className="form-ok" role="status">
            Node {added} added.
          </p>
        )}
      </form>
    </details>
  );
}

/** The add-node form's fields as typed (the listen port as text: empty means the default). */
interface NodeDraft {
  name: string;
  mode: NodeMode;
  publicAddress: string;
  listenPort: string;
  autoPair: boolean;
  hub: boolean;
}
const EMPTY_DRAFT: NodeDraft = { name: "", mode: "static", publicAddress: "", listenPort: "", autoPair: true, hub: false };
/** The add-node form's labels by wire field: how an error names the field. */
const NODE_LABELS = { name: "Node name", mode: "Node mode", public_address: "Public address", listen_port: "Listen port", auto_pair: "Pair with every existing node", hub: "Hub" } as const;

/**
 * The add-node form's state and its submit: the draft becomes the create body (blank address →
 * `null`, blank port → left out); on success the name of the added node is kept for the
 * confirmation and the text fields are cleared (mode and auto-pair stay, for the next node). An
 * edit clears the error of the last try: it no longer describes the form.
 */
function useAddNode(configId: string) {
  const [draft, setDraft] = useState<NodeDraft>(EMPTY_DRAFT);
  const [added, setAdded] = useState<string | null>(null);
  const create = useCreateNode(configId);
  const edit = (patch: Partial<NodeDraft>) => {
    if (create.isError) create.reset();
    setDraft((d) => ({ ...d, ...patch }));
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setAdded(null);
    create.mutate({
      name: draft.name.trim(),
      mode: draft.mode,
      public_address: draft.publicAddress.trim() === "" ? null : draft.publicAddress.trim(),
      ...(draft.listenPort.trim() === "" ? {} : { listen_port: Number(draft.listenPort) }),
      auto_pair: draft.autoPair,
      hub: draft.hub,
    }, {
      onSuccess: (node: { name: string }) => {
        setAdded(node.name);
        edit({ name: "", publicAddress: "", listenPort: "", hub: false });
      },
    });
  };
  return { draft, edit, added, create, submit };
}

/**
 * Name (at most the protocol's length), mode (dynamic disabled, with the reason, while MQTT is
 * off), public address and listen port; the field `error` is about is marked invalid.
 */
function NodeDraftFields({ draft, edit, mqttOff, error }: { draft: NodeDraft; edit: (patch: Partial<NodeDraft>) => void; mqttOff: boolean; error: unknown }) {
  const invalid = (field: keyof typeof NODE_LABELS) => invalidProps(error, NODE_LABELS, field, "add-node-error");
  return (
    <div className="form-row">
      <div>
        <label htmlFor="node-name">Node name</label>
        <input id="node-name" value={draft.name} maxLength={nameSchema.maxLength ?? undefined} onChange={(e) => edit({ name: e.target.value })} required {...invalid("name")} />
      </div>
      <div>
        <label htmlFor="node-mode">Node mode</label>
        <select id="node-mode" value={draft.mode} onChange={(e) => edit({ mode: e.target.value as NodeMode })}>
          <option value="static">static</option>
          <option value="dynamic" disabled={mqttOff} title={mqttOff ? MQTT_OFF : undefined}>
            dynamic
          </option>
        </select>
      </div>
      <div>
        <label htmlFor="node-public-address">Public address</label>
        <input id="node-public-address" placeholder="optional: host or IP" value={draft.publicAddress} onChange={(e) => edit({ publicAddress: e.target.value })} {...invalid("public_address")} />
      </div>
      <div>
        <label htmlFor="node-listen-port">Listen port</label>
        <input id="node-listen-port" type="number" min={1} max={65535} placeholder="51820" value={draft.listenPort} onChange={(e) => edit({ listenPort: e.target.value })} {...invalid("listen_port")} />
      </div>
    </div>
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
  const gate = useGate("updateConfig");
  return (
    <>
      <button type="button" {...gate.props} disabled={gate.disabled} onClick={() => { patch.reset(); setOpen(true); }}>
        Switch to {target}
      </button>
      {gate.reason}
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
        <FormError error={patch.error} />
      </ConfirmDialog>
    </>
  );
}

/**
 * The bulk config package of this config (spec §2.3, `POST /api/v1/tools/download/config-bulk/package`):
 * a zip of every node's config behind a short-lived token link, which takes the focus when it
 * arrives.
 */
export function PackageDownload({ configId }: { configId: string }) {
  const make = useConfigPackage(configId);
  const linkRef = useFocusOnArrival<HTMLAnchorElement>(make.data);
  const gate = useGate("buildConfigPackage");
  return (
    <div className="package">
      <PublicUrlWarning />
      <button type="button" {...gate.props} onClick={() => make.mutate()} disabled={gate.disabled || make.isPending}>
        Prepare config package
      </button>
      {gate.reason}
      {make.isSuccess && (
        <span className="package-link">
          <a ref={linkRef} href={make.data.download_path} download={make.data.filename}>
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
