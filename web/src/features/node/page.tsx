import { Link, useParams } from "react-router";
import type { NodeView } from "../../api/types.js";
import { QueryView } from "../../components/states.js";
import { useSystemStatus } from "../system/queries.js";
import { NodeControlView } from "./control.js";
import { NodeInitView } from "./init.js";
import { useNode } from "./queries.js";
import { NodeSettings } from "./settings.js";
import { StaticNodeView } from "./static.js";
import { NodeTabs } from "./tabs.js";

/** What the console says instead of the control and client-download pages while MQTT is off (spec §1.7 bullet 7). */
export const MQTT_OFF_NOTICE =
  "MQTT services are disabled (SVC_ENABLE_MQTT_SERVICES=false): binding and endpoint control are unavailable, so the client-download and control pages cannot be opened. This node is treated as static.";

/**
 * Node page, `/configs/:configId/nodes/:nodeId`. Dispatches on what the
 * backend says, never on a guess (spec §3.2):
 * - a static node (or any node while MQTT is off, spec §1.7 bullet 7: treated as static, with a
 *   notice) → the static view;
 * - a dynamic node with `client_initialized=false` → the initialization page (download, bind);
 * - `client_initialized=true` → the control page; a drop or offline keeps it there.
 * The node is refreshed from `node.workspace.updated` (its view) and `endpoint.status.updated`
 * (its client fields) through the SSE cache table, so binding or a reset switch the page without
 * a reload.
 */
export function NodePage() {
  const { configId = "", nodeId = "" } = useParams();
  const query = useNode(configId, nodeId);
  const status = useSystemStatus();

  // A static node, or any node while MQTT is off (treated as static, spec §1.7 bullet 7, with the
  // notice and the MQTT controls disabled): the static node page (static.tsx).
  const node = query.data;
  const mqttEnabled = status.data?.services.mqtt.enabled;
  if (node !== undefined && (node.mode === "static" || mqttEnabled === false)) {
    return <StaticNodeView configId={configId} nodeId={nodeId} before={node.mode === "static" ? undefined : <MqttOffControls />} />;
  }

  return (
    <section aria-labelledby="node-title" className="node-page">
      <p className="breadcrumb">
        <Link to={`/configs/${encodeURIComponent(configId)}`}>Back to the config</Link>
      </p>
      <QueryView query={query} loadingLabel="Loading the node…">
        {(node) => {
          return (
            <>
              <NodeHeader node={node} />
              {mqttEnabled === undefined ? (
                <QueryView query={status}>{() => null}</QueryView>
              ) : (
                <NodeTabs node={node}>{node.client.client_initialized ? <NodeControlView node={node} /> : <NodeInitView node={node} />}</NodeTabs>
              )}
              <NodeSettings node={node} />
            </>
          );
        }}
      </QueryView>
    </section>
  );
}

function NodeHeader({ node }: { node: NodeView }) {
  return (
    <header className="node-header">
      <h1 id="node-title">{node.name}</h1>
      <dl className="facts">
        <div>
          <dt>Mode</dt>
          <dd>
            {node.mode}
            {node.effective_mode !== node.mode && <span className="muted"> (treated as {node.effective_mode})</span>}
          </dd>
        </div>
        <div>
          <dt>Tunnel address</dt>
          <dd>{node.address}</dd>
        </div>
        <div>
          <dt>Public endpoint</dt>
          <dd>{node.public_address === null ? "—" : `${node.public_address}${node.listen_port === null ? "" : `:${node.listen_port}`}`}</dd>
        </div>
        <div>
          <dt>Interface</dt>
          <dd>{node.interface_name}</dd>
        </div>
      </dl>
    </header>
  );
}

/**
 * MQTT switched off (spec §1.7 bullet 7): instead of the control or client-download page, a
 * notice; the MQTT controls keep their place, disabled, the reason in `title` and pointed to by
 * `aria-describedby` (docs/console.md, the pattern of settings.tsx).
 */
function MqttOffControls() {
  // While MQTT is off the backend projects every node as static (client_initialized=false), so
  // the page cannot tell a bound node from an unbound one: every MQTT control is shown, disabled.
  const reason = { title: MQTT_OFF_NOTICE, "aria-describedby": "mqtt-off-notice", disabled: true };
  const controls = ["Get download link", "Generate bind command", "Push config", "Start", "Stop", "Run wg show", "Reset client"];
  return (
    <section className="card" aria-labelledby="mqtt-off-title">
      <h2 id="mqtt-off-title">Client download and endpoint control</h2>
      <p className="notice" id="mqtt-off-notice">
        {MQTT_OFF_NOTICE}
      </p>
      <div className="actions">
        {controls.map((label) => (
          <button key={label} type="button" {...reason}>
            {label}
          </button>
        ))}
      </div>
    </section>
  );
}
