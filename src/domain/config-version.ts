import type { ConfigVersionState } from "../protocol/enums.js";

/**
 * The WG config version state of a dynamic node (spec §3.5): `latest` when the client's
 * confirmed config is the server's staged one (compared by SHA-256), `pending` otherwise — not
 * staged yet, never pushed, or confirmed behind. The one statement of the rule: the node
 * machine's `sync` region moves by it, the node views answer it, and the store's `SYNC_SQL`
 * (src/store/node-list.repository.ts) is its SQL twin, checked against the views.
 * @param stagedSha the staged config's SHA-256 (hex), null while nothing is staged
 * @param confirmedSha the SHA-256 the client last confirmed with an `applied` push ACK, null if none
 */
export function configVersionState(stagedSha: string | null, confirmedSha: string | null): ConfigVersionState {
  return stagedSha !== null && confirmedSha === stagedSha ? "latest" : "pending";
}
