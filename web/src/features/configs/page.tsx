import { useState, type FormEvent } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";
import { nameSchema } from "../../../../src/protocol/fields.js";
import { RoleNote, useCan, useGate } from "../../api/roles.js";
import type { ApplyMode, ConfigView, TunnelProtocol } from "../../api/types.js";
import { DeleteDialog } from "../../components/delete-dialog.js";
import { FormError, invalidProps } from "../../components/form-error.js";
import { RelativeTime } from "../../components/relative-time.js";
import { QueryView } from "../../components/states.js";
import { ApplyModeSelect, ApplyModeWhy, EditConfigDialog } from "./apply-mode.js";
import { useCreateConfig, useDeleteConfig } from "./mutations.js";
import { useConfigs } from "./queries.js";
import { TableHead } from "../../components/table-head.js";

/**
 * Configs: the list with a search kept in the URL (`?q=`), create (name, protocol, CIDR, how
 * pushes are applied; an error names the field by its label), edit (name, how pushes are applied)
 * and delete with a confirmation. Live through
 * `config.list.updated` (spec §6.5 table: "home config cards, sidebar list"). At narrow widths
 * the table's rows are stacked cards (`stack-table`, as on the backups page).
 */
export function ConfigsPage() {
  const query = useConfigs();
  const [q, setQ] = useUrlSearch();
  const [deleting, setDeleting] = useState<ConfigView | null>(null);
  const [editing, setEditing] = useState<ConfigView | null>(null);

  return (
    <section aria-labelledby="configs-title">
      <h1 id="configs-title">Configs</h1>
      <CreateConfigForm />
      <RoleNote can={useCan("deleteConfig")} what="configs are edited and deleted by admins" />
      <section className="card" aria-labelledby="config-list-title">
        <div className="toolbar">
          <h2 id="config-list-title">All configs</h2>
          <div className="toolbar-search">
            <label htmlFor="config-search" className="visually-hidden">
              Search configs
            </label>
            <input id="config-search" type="search" placeholder="Search by name, protocol or CIDR" value={q} onChange={(e) => setQ(e.target.value)} />
          </div>
        </div>
        <QueryView query={query} isEmpty={(d) => d.configs.length === 0} empty={<p>No configs yet. Create the first one above.</p>} loadingLabel="Loading configs…">
          {(data) => {
            const rows = matchingConfigs(data.configs, q);
            if (rows.length === 0) return <p className="state state-empty">No config matches “{q}”.</p>;
            return <ConfigsTable rows={rows} onEdit={setEditing} onDelete={setDeleting} />;
          }}
        </QueryView>
      </section>
      <DeleteConfigDialog config={deleting} onClose={() => setDeleting(null)} />
      <EditConfigDialog config={editing} onClose={() => setEditing(null)} />
    </section>
  );
}

/** The search text, kept in the URL (`?q=`) so a filtered list can be shared and survives a reload. */
function useUrlSearch(): [string, (q: string) => void] {
  const [params, setParams] = useSearchParams();
  const [q, setQ] = useState(() => params.get("q") ?? "");
  const update = (value: string) => {
    setQ(value);
    setParams(value === "" ? {} : { q: value }, { replace: true });
  };
  return [q, update];
}

/** The configs whose name (any case), protocol or CIDR contains the search text. */
function matchingConfigs(configs: ConfigView[], q: string): ConfigView[] {
  const needle = q.trim().toLowerCase();
  return configs.filter(
    (c) => needle === "" || c.name.toLowerCase().includes(needle) || c.tunnel_protocol.includes(needle) || c.network_cidr.includes(needle),
  );
}

function ConfigsTable({ rows, onEdit, onDelete }: { rows: ConfigView[]; onEdit: (config: ConfigView) => void; onDelete: (config: ConfigView) => void }) {
  const canDelete = useCan("deleteConfig").allowed;
  const canEdit = useCan("updateConfig").allowed;
  return (
    <div className="table-wrap">
      <table className="table stack-table">
        <caption className="visually-hidden">Configs</caption>
        <TableHead columns={["Name", "Protocol", "Network", "Pushes", "Updated"]} hidden="Actions" />
        <tbody>
          {rows.map((c) => (
            <tr key={c.config_id}>
              <th scope="row">
                <Link to={`/configs/${encodeURIComponent(c.config_id)}`}>{c.name}</Link>
              </th>
              <td data-label="Protocol">{c.tunnel_protocol}</td>
              <td data-label="Network" className="mono">
                {c.network_cidr}
              </td>
              <td data-label="Pushes">{c.apply_mode}</td>
              <td data-label="Updated">
                <RelativeTime iso={c.updated_at} />
              </td>
              <td className="actions">
                {canEdit && (
                  <button type="button" data-op="updateConfig" aria-label={`Edit config ${c.name}`} onClick={() => onEdit(c)}>
                    Edit
                  </button>
                )}
                {canDelete && (
                  <button type="button" className="danger-outline" data-op="deleteConfig" aria-label={`Delete config ${c.name}`} onClick={() => onDelete(c)}>
                    Delete
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Confirms deleting `config` (open while it is set); the API's error stays in the dialog. */
function DeleteConfigDialog({ config, onClose }: { config: ConfigView | null; onClose: () => void }) {
  return (
    <DeleteDialog item={config} what="config" nameOf={(c) => c.name} remove={useDeleteConfig()} onClose={onClose}>
      <p>Its nodes, pairs and port forwards are deleted with it. Bound clients lose their access.</p>
    </DeleteDialog>
  );
}

/** The create form's labels by wire field: how an error names the field. */
const CONFIG_LABELS = { name: "Name", tunnel_protocol: "Protocol", network_cidr: "Network CIDR", apply_mode: "Apply pushes" } as const;

/**
 * What the mesh page is told after a create whose network the service normalised (a host
 * address such as `10.10.0.5/24` is kept as its network, `10.10.0.0/24`; spec §2.2).
 */
export interface NetworkNormalised {
  networkAsked: string;
  networkSaved: string;
}

/**
 * New config: name (at most the protocol's length), protocol, network, how pushes are applied
 * (restart, the spec's default, unless chosen otherwise). An edit clears the error
 * of the last try (it no longer describes the form); on success the mesh page opens, told when
 * the network was saved other than as typed.
 */
function CreateConfigForm() {
  const [name, setName] = useState("");
  const [protocol, setProtocol] = useState<TunnelProtocol>("wireguard");
  const [cidr, setCidr] = useState("10.0.0.0/24");
  const [applyMode, setApplyMode] = useState<ApplyMode>("restart");
  const navigate = useNavigate();
  const create = useCreateConfig();
  const edited = <T,>(set: (v: T) => void) => (v: T) => {
    if (create.isError) create.reset();
    set(v);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const asked = cidr.trim();
    create.mutate(
      { name: name.trim(), tunnel_protocol: protocol, network_cidr: asked, apply_mode: applyMode },
      {
        onSuccess: (config) => {
          setName("");
          const state: NetworkNormalised | undefined = config.network_cidr === asked ? undefined : { networkAsked: asked, networkSaved: config.network_cidr };
          void navigate(`/configs/${encodeURIComponent(config.config_id)}`, { state });
        },
      },
    );
  };
  const invalid = (field: keyof typeof CONFIG_LABELS) => invalidProps(create.error, CONFIG_LABELS, field, "create-config-error");
  const gate = useGate("createConfig");
  return (
    <form className="card form form-inline" onSubmit={submit} aria-labelledby="create-config-title">
      <h2 id="create-config-title">New config</h2>
      <fieldset className="form-row" disabled={gate.disabled}>
        <div>
          <label htmlFor="config-name">Name</label>
          <input id="config-name" value={name} maxLength={nameSchema.maxLength ?? undefined} onChange={(e) => edited(setName)(e.target.value)} required {...invalid("name")} />
        </div>
        <div>
          <label htmlFor="config-protocol">Protocol</label>
          <select id="config-protocol" value={protocol} onChange={(e) => edited(setProtocol)(e.target.value as TunnelProtocol)}>
            <option value="wireguard">wireguard</option>
            <option value="awg_2">awg_2</option>
          </select>
        </div>
        <div>
          <label htmlFor="config-cidr">Network CIDR</label>
          <input id="config-cidr" className="mono" value={cidr} onChange={(e) => edited(setCidr)(e.target.value)} required {...invalid("network_cidr")} />
        </div>
        <ApplyModeSelect value={applyMode} onChange={edited(setApplyMode)} whyId="create-config-why" />
        <div className="form-row-action">
          <button type="submit" className="primary" {...gate.props} disabled={gate.disabled || create.isPending || name.trim() === ""}>
            Create config
          </button>
          {gate.reason}
        </div>
        <ApplyModeWhy mode={applyMode} id="create-config-why" className="form-row-note" />
      </fieldset>
      <FormError error={create.error} labels={CONFIG_LABELS} id="create-config-error" />
    </form>
  );
}
