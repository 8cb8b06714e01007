import { useEffect, useId, useState, type FormEvent } from "react";
import { useNavigate } from "react-router";
import { useGate } from "../../api/roles.js";
import type { NodeView, UpdateNodeBody } from "../../api/types.js";
import { ConfirmDialog } from "../../components/confirm-dialog.js";
import { FormError, invalidProps } from "../../components/form-error.js";
import { useDeleteNode, useUpdateNode } from "./mutations.js";

/** The form's fields, as typed. */
interface Draft {
  name: string;
  address: string;
  public_address: string;
  listen_port: string;
  interface_name: string;
  hub: boolean;
}

/** The form's labels by wire field: how an error names the field. */
const LABELS = { name: "Name", address: "Tunnel address", public_address: "Public address", listen_port: "Listen port", interface_name: "Interface name", hub: "Hub" } as const;

function draftOf(node: NodeView): Draft {
  return {
    name: node.name,
    address: node.address,
    public_address: node.public_address ?? "",
    listen_port: node.listen_port === null ? "" : String(node.listen_port),
    interface_name: node.interface_name,
    hub: node.hub,
  };
}

/**
 * What changed between the node and the draft, as a `PATCH …/nodes/{node_id}` body: an empty
 * public address or port clears it (`null`); unchanged fields are left out.
 */
export function changedFields(node: NodeView, d: Draft): UpdateNodeBody {
  const body: UpdateNodeBody = {};
  const name = d.name.trim();
  if (name !== node.name) body.name = name;
  const tunnel = d.address.trim();
  if (tunnel !== node.address) body.address = tunnel;
  if (d.hub !== node.hub) body.hub = d.hub;
  const address = d.public_address.trim() === "" ? null : d.public_address.trim();
  if (address !== node.public_address) body.public_address = address;
  const port = d.listen_port.trim() === "" ? null : Number(d.listen_port);
  if (port !== node.listen_port) body.listen_port = port;
  const iface = d.interface_name.trim();
  if (iface !== node.interface_name) body.interface_name = iface;
  return body;
}

/**
 * The node's own settings on its page: rename, tunnel address, public endpoint (address and listen
 * port), interface name and hub (`PATCH …/nodes/{node_id}`), and deleting the node (`DELETE`,
 * confirmed, then back to the config's mesh page). A changed address, endpoint or name re-stages
 * the node and its peers.
 */
export function NodeSettings({ node }: { node: NodeView }) {
  return (
    <section className="card" aria-labelledby="node-settings-title">
      <h2 id="node-settings-title">Node settings</h2>
      <EditNodeForm node={node} />
      <DeleteNode node={node} />
    </section>
  );
}

function EditNodeForm({ node }: { node: NodeView }) {
  const [draft, setDraft] = useState<Draft>(() => draftOf(node));
  const [saved, setSaved] = useState(false);
  // A change made elsewhere (another tab, the stream) shows up in the form while nothing is typed.
  const fresh = JSON.stringify(draftOf(node));
  useEffect(() => setDraft(JSON.parse(fresh) as Draft), [fresh]);
  const update = useUpdateNode(node.config_id, node.node_id);
  const id = useId();
  const body = changedFields(node, draft);
  const dirty = Object.keys(body).length > 0;
  const change = (next: Partial<Draft>) => {
    setSaved(false);
    update.reset();
    setDraft({ ...draft, ...next });
  };
  const set = (field: Exclude<keyof Draft, "hub">) => (e: { target: { value: string } }) => change({ [field]: e.target.value });
  const errorId = `${id}-error`;
  const invalid = (field: keyof typeof LABELS) => invalidProps(update.error, LABELS, field, errorId);
  const gate = useGate("updateNode");
  const submit = (e: FormEvent) => { e.preventDefault(); update.mutate(body, { onSuccess: () => setSaved(true) }); };
  return (
    <form className="form-row" onSubmit={submit} aria-label="Edit the node">
      <fieldset className="contents" disabled={gate.disabled}>
      <div>
        <label htmlFor={`${id}-name`}>Name</label>
        <input id={`${id}-name`} value={draft.name} onChange={set("name")} required maxLength={64} {...invalid("name")} />
      </div>
      <div>
        <label htmlFor={`${id}-tunnel`}>Tunnel address</label>
        <input id={`${id}-tunnel`} className="mono" value={draft.address} onChange={set("address")} required {...invalid("address")} />
      </div>
      <div>
        <label htmlFor={`${id}-address`}>Public address</label>
        <input id={`${id}-address`} className="mono" value={draft.public_address} onChange={set("public_address")} placeholder="none (behind NAT)" aria-describedby={`${id}-endpoint-help`} {...invalid("public_address")} />
      </div>
      <div>
        <label htmlFor={`${id}-port`}>Listen port</label>
        <input id={`${id}-port`} type="number" min={1} max={65535} value={draft.listen_port} onChange={set("listen_port")} placeholder="51820" />
      </div>
      <div>
        <label htmlFor={`${id}-iface`}>Interface name</label>
        <input id={`${id}-iface`} className="mono" value={draft.interface_name} onChange={set("interface_name")} required maxLength={15} pattern="[a-zA-Z0-9_=+.\-]{1,15}" title="1 to 15 of a-z A-Z 0-9 _ = + . - (wg-quick's rule)" />
      </div>
      <label className="checkbox" htmlFor={`${id}-hub`}>
        <input id={`${id}-hub`} type="checkbox" checked={draft.hub} onChange={(e) => change({ hub: e.target.checked })} />
        Hub: forwards between nodes behind NAT (peers must reach it)
      </label>
      <div className="form-row-action">
        <button type="submit" className="primary" {...gate.props} disabled={gate.disabled || !dirty || update.isPending}>
          {update.isPending ? "Saving…" : "Save changes"}
        </button>
        {gate.reason}
      </div>
      </fieldset>
      <FormNotes helpId={`${id}-endpoint-help`} saved={saved} />
      <FormError error={update.error} labels={LABELS} id={errorId} />
    </form>
  );
}

/** The endpoint help under the form and, after a save, what it set off. */
function FormNotes({ helpId, saved }: { helpId: string; saved: boolean }) {
  return (
    <>
      <p className="muted form-row-note" id={helpId}>
        Public address and port are where peers reach this node; leave the address empty for a node behind NAT.
      </p>
      {saved && (
        <p className="form-ok" role="status">
          Saved. The node&apos;s config and its peers&apos; are staged again.
        </p>
      )}
    </>
  );
}

/** "Delete node", confirmed in a dialog that says what goes with it; afterwards the config's mesh page. */
function DeleteNode({ node }: { node: NodeView }) {
  const [confirm, setConfirm] = useState(false);
  const remove = useDeleteNode(node.config_id, node.node_id);
  const navigate = useNavigate();
  const meshPage = `/configs/${encodeURIComponent(node.config_id)}`;
  const bound = node.mode === "dynamic" && node.client.client_initialized;
  const gate = useGate("deleteNode");
  return (
    <div className="danger-zone">
      <button type="button" className="danger-outline" {...gate.props} disabled={gate.disabled} onClick={() => setConfirm(true)}>
        Delete node
      </button>
      {gate.reason}
      <ConfirmDialog
        open={confirm}
        title={`Delete ${node.name}?`}
        confirmLabel={`Delete ${node.name}`}
        danger
        busy={remove.isPending}
        onCancel={() => {
          setConfirm(false);
          remove.reset();
        }}
        // Awaited rather than an onSuccess of this call: the page may unmount this dialog as soon as
        // the config's node list no longer holds the node, and the way back must not depend on it.
        onConfirm={() => void remove.mutateAsync().then(() => navigate(meshPage), () => undefined)}
      >
        <p>
          Its mesh pairs, port forwards and download links go with it, and every peer&apos;s config is staged again without it.
          {bound ? " Its agent is left without a node: remove it on its host with svcctl service uninstall." : ""} This cannot be undone.
        </p>
        <FormError error={remove.error} />
      </ConfirmDialog>
    </div>
  );
}
