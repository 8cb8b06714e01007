import { Link, useParams } from "react-router";
import { Placeholder } from "../components/placeholder.js";

/** Node page, `/configs/:configId/nodes/:nodeId` (issue 12 "Node page"). Placeholder until built. */
export function NodePage() {
  const { configId = "", nodeId = "" } = useParams();
  return (
    <Placeholder title={`Node ${nodeId}`}>
      <Link to={`/configs/${encodeURIComponent(configId)}`}>Back to the config</Link>
    </Placeholder>
  );
}
