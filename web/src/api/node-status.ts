import type { EndpointStatusView, NodeView } from "./types.js";

/**
 * A cached node with the fields `endpoint.status.updated` carries for it put in: mode, effective
 * mode, staged config and the client's state (spec §3.1, §3.2, §3.5). Copied from the backend's
 * frame, never computed in the browser (spec §6.5 rule 7).
 */
export function withEndpointStatus(n: NodeView, s: EndpointStatusView): NodeView {
  return {
    ...n,
    mode: s.mode,
    effective_mode: s.effective_mode,
    staged_config: s.staged_config,
    client: {
      client_initialized: s.client_initialized,
      client_presence_state: s.client_presence_state,
      runtime_state: s.runtime_state,
      last_reachable_at: s.last_reachable_at,
      client_version: s.client_version,
      config_version_state: s.config_version_state,
    },
  };
}
