import type { MeshPairView } from "../api/types.js";

/**
 * A pair's connection integrity exactly as the backend reports it (spec §6.5 emission rules:
 * broken-link indicators come from `workspace.connections[*]` directly): `ok`, `broken` with
 * its reason, `disabled`. Text, not only colour.
 */
export function IntegrityBadge({ integrity }: { integrity: MeshPairView["integrity"] }) {
  return (
    <span className={`badge integrity-${integrity.status}`}>
      {integrity.status}
      {integrity.status === "broken" && integrity.reason !== null ? `: ${integrity.reason}` : ""}
    </span>
  );
}
