import { Link, useParams } from "react-router";
import { useConfigDetail } from "../api/mesh-queries.js";
import { Placeholder } from "../components/placeholder.js";
import { StaticNodeView } from "./node-static.js";

/** Node page, `/configs/:configId/nodes/:nodeId` (issue 12 "Node page"). Placeholder until built. */
export function NodePage() {
  const { configId = "", nodeId = "" } = useParams();
  // Static nodes: their own view (pages/node-static.tsx).
  const node = useConfigDetail(configId).data?.nodes.find((n) => n.node_id === nodeId);
  if (node?.mode === "static") return <StaticNodeView configId={configId} nodeId={nodeId} />;
  return (
    <Placeholder title={`Node ${nodeId}`}>
      <Link to={`/configs/${encodeURIComponent(configId)}`}>Back to the config</Link>
    </Placeholder>
  );
}
