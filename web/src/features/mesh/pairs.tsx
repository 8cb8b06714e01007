import { useMemo, useState, type FormEvent } from "react";
import { RoleNote, useCan } from "../../api/roles.js";
import { errorMessage } from "../../api/client.js";
import type { ConfigDetailView, MeshPairView } from "../../api/types.js";
import { IntegrityBadge } from "../../components/integrity-badge.js";
import { QueryView } from "../../components/states.js";
import { useCreatePair, useDeletePair, useTogglePair } from "./mutations.js";
import { useMeshPairs } from "./queries.js";
import { FormError } from "../../components/form-error.js";

/** How many pairs the list shows at once (a full mesh of n nodes has n(n-1)/2). */
const PAGE = 100;

/**
 * Mesh pairs of the config with their connection integrity and route as the backend reports them
 * (`integrity.status` `ok` / `broken` with `reason` / `disabled`; spec §6.5 emission rules: the
 * broken-link indicators come from `workspace.connections[*]` directly; `route` `direct` or
 * `via_hub` through `hub_node_id`, shown as "direct" / "via <hub name>"). Create a pair,
 * enable/disable it, delete it.
 */
export function PairsSection({ config }: { config: ConfigDetailView }) {
  const pairs = useMeshPairs(config.config_id);
  const names = useMemo(() => new Map(config.nodes.map((n) => [n.node_id, n.name])), [config.nodes]);
  const [filter, setFilter] = useState("");
  const [limit, setLimit] = useState(PAGE);
  const canCreate = useCan("createMeshPair");
  return (
    <section className="card" aria-labelledby="pairs-title">
      <h2 id="pairs-title">Pairs</h2>
      <RoleNote can={canCreate} what="pairs are created, enabled, disabled and deleted by admins" />
      {canCreate.allowed && <CreatePairForm config={config} />}
      <QueryView query={pairs} isEmpty={(d) => d.mesh_pairs.length === 0} empty={<p>No pairs: nodes reach no peer.</p>} loadingLabel="Loading pairs…">
        {(data) => {
          const needle = filter.trim().toLowerCase();
          const rows = data.mesh_pairs.filter(
            (p) =>
              needle === "" ||
              (names.get(p.node_a) ?? "").toLowerCase().includes(needle) ||
              (names.get(p.node_b) ?? "").toLowerCase().includes(needle) ||
              p.integrity.status === needle ||
              (routeLabel(p, names) ?? "").toLowerCase().includes(needle),
          );
          const broken = data.mesh_pairs.filter((p) => p.integrity.status === "broken").length;
          return (
            <>
              <p className="muted" role="status">
                {data.next_cursor === null
                  ? `${data.mesh_pairs.length} pairs, ${broken} broken`
                  : `the first ${data.mesh_pairs.length} pairs (${broken} broken among them); the mesh has more`}
              </p>
              <label htmlFor="pair-filter">Filter pairs</label>
              <input id="pair-filter" type="search" placeholder="Node name, ok / broken / disabled, direct / via" value={filter} onChange={(e) => setFilter(e.target.value)} />
              <ul className="pair-list" aria-label="Pairs">
                {rows.slice(0, limit).map((p) => (
                  <PairRow key={p.pair_id} pair={p} names={pairNames(p, names)} route={routeLabel(p, names)} />
                ))}
              </ul>
              {rows.length > limit && (
                <button type="button" onClick={() => setLimit((l) => l + PAGE)}>
                  Show more pairs ({rows.length - limit} more)
                </button>
              )}
            </>
          );
        }}
      </QueryView>
    </section>
  );
}

/** The two node names of a pair in alphabetical order (stable labels: `n1 – n2`, never `n2 – n1`). */
export function pairNames(p: MeshPairView, names: ReadonlyMap<string, string>): [string, string] {
  const a = names.get(p.node_a) ?? p.node_a;
  const b = names.get(p.node_b) ?? p.node_b;
  return a.localeCompare(b) <= 0 ? [a, b] : [b, a];
}

/** How the pair's packets travel, as the backend says: "direct", "via <hub name>", or null (broken, disabled). */
export function routeLabel(p: MeshPairView, names: ReadonlyMap<string, string>): string | null {
  if (p.route === "direct") return "direct";
  if (p.route === "via_hub" && p.hub_node_id !== null) return `via ${names.get(p.hub_node_id) ?? p.hub_node_id}`;
  return null;
}

function PairRow({ pair, names: [a, b], route }: { pair: MeshPairView; names: [string, string]; route: string | null }) {
  const toggle = useTogglePair(pair);
  const remove = useDeletePair(pair);
  const error = toggle.error ?? remove.error;
  const canToggle = useCan("updateMeshPair").allowed;
  const canDelete = useCan("deleteMeshPair").allowed;
  return (
    <li className="pair">
      <span className="pair-nodes">
        {a} ↔ {b}
      </span>
      <IntegrityBadge integrity={pair.integrity} />
      {route !== null && <span className={`pair-route${pair.route === "via_hub" ? " pair-route-hub" : ""}`}>{route}</span>}
      <span className="pair-actions">
        {canToggle && (
          <button type="button" data-op="updateMeshPair" aria-label={`${pair.enabled ? "Disable" : "Enable"} pair ${a} – ${b}`} disabled={toggle.isPending} onClick={() => toggle.mutate()}>
            {pair.enabled ? "Disable" : "Enable"}
          </button>
        )}
        {canDelete && (
          <button type="button" className="danger-outline" data-op="deleteMeshPair" aria-label={`Delete pair ${a} – ${b}`} disabled={remove.isPending} onClick={() => remove.mutate()}>
            Delete
          </button>
        )}
      </span>
      {error !== null && (
        <span className="form-error" role="alert">
          {errorMessage(error)}
        </span>
      )}
    </li>
  );
}

function CreatePairForm({ config }: { config: ConfigDetailView }) {
  const [a, setA] = useState("");
  const [b, setB] = useState("");
  const create = useCreatePair(config.config_id);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ node_a: a, node_b: b });
  };
  if (config.nodes.length < 2) return null;
  const options = config.nodes.slice(0, 2000);
  return (
    <form className="form-row pair-form" onSubmit={submit} aria-label="Create a pair">
      <NodeSelect id="pair-a" label="First node" nodes={options} value={a} onChange={setA} />
      <NodeSelect id="pair-b" label="Second node" nodes={options} value={b} onChange={setB} />
      <div className="form-row-action">
        <button type="submit" data-op="createMeshPair" disabled={create.isPending || a === "" || b === ""}>
          Create pair
        </button>
      </div>
      <FormError error={create.error} />
    </form>
  );
}

/** One side of a new pair: a labelled, required choice among the config's nodes. */
function NodeSelect(props: { id: string; label: string; nodes: ConfigDetailView["nodes"]; value: string; onChange: (nodeId: string) => void }) {
  const { id, label, nodes, value, onChange } = props;
  return (
    <div>
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value)} required>
        <option value="">choose…</option>
        {nodes.map((n) => (
          <option key={n.node_id} value={n.node_id}>
            {n.name}
          </option>
        ))}
      </select>
    </div>
  );
}

/** Tags of the config and how many nodes carry each (`GET /api/v1/configs/{id}` `tags`). */
export function TagsSection({ config }: { config: ConfigDetailView }) {
  return (
    <section className="card" aria-labelledby="tags-title">
      <h2 id="tags-title">Tags</h2>
      {config.tags.length === 0 ? (
        <p className="muted">No tags. Set a node's tags on its page.</p>
      ) : (
        <ul className="tag-list">
          {config.tags.map((t) => (
            <li key={t.tag}>
              <span className="tag">{t.tag}</span> <span className="muted">{t.node_ids.length} {t.node_ids.length === 1 ? "node" : "nodes"}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
