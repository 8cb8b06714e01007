import { useId, type ReactNode } from "react";
import { Link } from "react-router";
import type { ConfigView, SystemStatus } from "../../api/types.js";
import { RelativeTime } from "../../components/relative-time.js";
import { QueryView } from "../../components/states.js";
import { usePageTitle } from "../../page-title.js";
import { useConfigs } from "../configs/queries.js";
import { useSystemStatus } from "../system/queries.js";

/**
 * Home / system: the cards of `GET /api/v1/system/status` (DESIGN §5), patched in place by each
 * `system.status.updated` frame (its payload is the same body, spec §6.5 table), applied by the
 * SSE cache table (`sse/cache-effects.ts`) whatever page is open, so it is current whenever this page opens.
 */
export function HomePage() {
  usePageTitle("System");
  const query = useSystemStatus();
  const configs = useConfigs();
  return (
    <>
      <section aria-labelledby="home-title">
        <h1 id="home-title">System</h1>
        <QueryView query={query}>{(status) => <StatusCards status={status} />}</QueryView>
      </section>
      <section className="home-configs" aria-labelledby="home-configs-title">
        <h2 id="home-configs-title">Configs</h2>
        <QueryView
          query={configs}
          isEmpty={(data) => data.configs.length === 0}
          empty={
            <p>
              No configs yet. <Link to="/configs">Create one on the Configs page</Link>.
            </p>
          }
        >
          {(data) => (
            <ul className="config-cards">
              {data.configs.map((c) => (
                <li key={c.config_id}>
                  <ConfigCard config={c} />
                </li>
              ))}
            </ul>
          )}
        </QueryView>
      </section>
    </>
  );
}

/** One config: its name links to its mesh page. */
function ConfigCard({ config }: { config: ConfigView }) {
  return (
    <article className="card config-card" aria-label={config.name}>
      <h3>
        <Link to={`/configs/${encodeURIComponent(config.config_id)}`}>{config.name}</Link>
      </h3>
      <p className="muted">
        {config.tunnel_protocol === "awg_2" ? "AmneziaWG 2.0" : "WireGuard"} · <span className="mono">{config.network_cidr}</span>
      </p>
      <p className="muted small">
        Updated <RelativeTime iso={config.updated_at} />
      </p>
    </article>
  );
}

function Card({ title, children }: { title: string; children: ReactNode }) {
  const id = `card-${title.toLowerCase().replace(/\W+/g, "-")}`;
  return (
    <section className="card" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}

/**
 * One figure: a group named by its label, holding the label and the value, so tests find it as
 * `getByRole("group", { name: "Configs" })` (harness `expectFigure`).
 */
function Figure({ label, value }: { label: string; value: number | string }) {
  const id = useId();
  return (
    <div className="figure" role="group" aria-labelledby={id}>
      <span id={id} className="figure-label">
        {label}
      </span>
      <span className="figure-value">{value}</span>
    </div>
  );
}

function StatusCards({ status }: { status: SystemStatus }) {
  const mqtt = status.services.mqtt;
  return (
    <div className="cards">
      <Card title="Inventory">
        <div className="figures">
          <Figure label="Configs" value={status.summary.configs} />
          <Figure label="Nodes" value={status.summary.nodes} />
          <Figure label="Mesh pairs" value={status.topology.mesh_pairs} />
        </div>
        <Link to="/configs">All configs</Link>
      </Card>
      <Card title="Presence">
        <div className="figures">
          <Figure label="Dynamic nodes" value={status.summary.dynamic_nodes} />
          <Figure label="Online" value={status.summary.online} />
          <Figure label="Dropped" value={status.summary.dropped} />
        </div>
      </Card>
      <Card title="Sync">
        <div className="figures">
          <Figure label="Latest" value={status.sync.latest} />
          <Figure label="Pending syncs" value={status.sync.pending} />
        </div>
      </Card>
      <Card title="MQTT">
        <div className="figures">
          <Figure label="MQTT service" value={mqtt.enabled ? "enabled" : "disabled"} />
          <Figure label="Broker" value={mqtt.broker} />
          <Figure label="Broker connection" value={mqtt.enabled ? (mqtt.connected ? "connected" : "disconnected") : "—"} />
        </div>
      </Card>
      <Card title="Version">
        <div className="figures">
          <Figure label="Server version" value={status.update.version} />
        </div>
      </Card>
    </div>
  );
}
