import type { AwgParams } from "../domain/awg.js";
import { checkPairIntegrity, renderNodeConfig, stageConfig, type RenderPeer } from "../domain/render.js";
import { findConfig } from "./configs.repository.js";
import type { Db } from "./db.js";
import { listPairs } from "./mesh-pairs.repository.js";
import { listNodes, updateNode } from "./nodes.repository.js";
import { listPortForwardsOfConfig } from "./port-forwards.repository.js";

/** A node whose staged config changed. */
export interface StagedChange {
  nodeId: string;
  version: number;
  sha: string;
}

/**
 * Re-renders the config of every node of one config and stores the staged
 * `(config_version, config_sha256, config_text)` (DESIGN §3 Config versions): the version
 * increments only for nodes whose rendered text changed. Call inside the transaction of the
 * write that changed the mesh.
 *
 * Peers of a node are the other sides of its enabled mesh pairs whose connection integrity is
 * not broken (a pair no side can initiate is left out rather than rendered half-way).
 *
 * @returns the nodes whose staged config changed, with their new version and sha
 */
export async function restageConfig(db: Db, configId: string, now: number): Promise<StagedChange[]> {
  const config = await findConfig(db, configId);
  if (!config) return [];
  const [nodes, pairs, forwards] = await Promise.all([
    listNodes(db, configId),
    listPairs(db, configId),
    listPortForwardsOfConfig(db, configId),
  ]);
  const byId = new Map(nodes.map((n) => [n.node_id, n]));
  const peersOf = new Map<string, RenderPeer[]>();
  for (const pair of pairs) {
    const a = byId.get(pair.node_a);
    const b = byId.get(pair.node_b);
    if (!a || !b) continue;
    if (checkPairIntegrity(a, b, pair.enabled === 1).status !== "ok") continue;
    for (const [self, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const list = peersOf.get(self.node_id) ?? [];
      list.push({
        node_id: other.node_id,
        public_key: other.public_key,
        address: other.address,
        public_address: other.public_address,
        listen_port: other.listen_port,
      });
      peersOf.set(self.node_id, list);
    }
  }
  const awg = config.awg_params === null ? null : (JSON.parse(config.awg_params) as AwgParams);
  const changed: StagedChange[] = [];
  for (const node of nodes) {
    const text = renderNodeConfig({
      config_id: config.config_id,
      tunnel_protocol: config.tunnel_protocol,
      network_cidr: config.network_cidr,
      awg,
      node: {
        node_id: node.node_id,
        private_key: node.private_key,
        public_key: node.public_key,
        address: node.address,
        listen_port: node.listen_port,
        public_address: node.public_address,
      },
      peers: peersOf.get(node.node_id) ?? [],
      port_forwards: (forwards.get(node.node_id) ?? [])
        .filter((f) => f.enabled === 1)
        .map((f) => ({
          protocol: f.protocol,
          listen_port: f.listen_port,
          target_address: f.target_address,
          target_port: f.target_port,
        })),
    });
    const previous =
      node.staged_config_sha256 === null
        ? null
        : { config_version: node.staged_config_version, config_sha256: node.staged_config_sha256 };
    const staged = stageConfig(previous, text);
    if (staged.config_sha256 !== node.staged_config_sha256) {
      await updateNode(db, node.node_id, {
        staged_config_version: staged.config_version,
        staged_config_sha256: staged.config_sha256,
        staged_config_text: staged.config_text,
        updated_at: now,
      });
      changed.push({ nodeId: node.node_id, version: staged.config_version, sha: staged.config_sha256 });
    }
  }
  return changed;
}
