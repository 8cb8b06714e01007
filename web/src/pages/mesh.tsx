import { Link, useParams } from "react-router";
import { Placeholder } from "../components/placeholder.js";

/** Mesh page of a config, `/configs/:configId` (issue 12 "Mesh page"). Placeholder until built. */
export function MeshPage() {
  const { configId = "" } = useParams();
  return (
    <Placeholder title={`Config ${configId}`}>
      <Link to="/configs">All configs</Link>
    </Placeholder>
  );
}
