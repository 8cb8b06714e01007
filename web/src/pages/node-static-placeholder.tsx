import { useMutation } from "@tanstack/react-query";
import { apiFetch, errorMessage } from "../api/client.js";
import { nodePath } from "../api/node-queries.js";
import type { DownloadTokenAnswer, NodeView } from "../api/types.js";

/**
 * Stand-in for the static node view (`./node-static.tsx`, written by another part of issue 12):
 * only the config download link (spec §4 rule 1), so the dispatcher typechecks and the MQTT-off
 * test can check that static features work. The lead replaces the import with the real view.
 */
export function StaticNodeView({ node }: { node: NodeView }) {
  const grant = useMutation({
    mutationFn: () => apiFetch<DownloadTokenAnswer>(`${nodePath(node.config_id, node.node_id)}/download-token`, { method: "POST" }),
  });
  return (
    <section className="card" aria-labelledby="static-config-title">
      <h2 id="static-config-title">Config</h2>
      <button type="button" onClick={() => grant.mutate()} disabled={grant.isPending}>
        Get config download link
      </button>
      {grant.data && (
        <p>
          <a href={grant.data.download_path} download>
            Download config
          </a>
        </p>
      )}
      {grant.isError && (
        <p className="form-error" role="alert">
          {errorMessage(grant.error)}
        </p>
      )}
    </section>
  );
}
