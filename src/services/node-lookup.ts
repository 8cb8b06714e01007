import { AppError } from "../errors.js";
import * as configsRepo from "../store/configs.repository.js";
import type { Db } from "../store/db.js";
import * as nodesRepo from "../store/nodes.repository.js";
import type { ConfigRow, NodeRow } from "../store/schema.js";

/**
 * Lookups that answer NOT_FOUND, shared by the mesh and control services (kept here so neither
 * service imports the other for them).
 */

/** @throws AppError NOT_FOUND when the config does not exist */
export async function requireConfig(db: Db, configId: string): Promise<ConfigRow> {
  const config = await configsRepo.findConfig(db, configId);
  if (!config) throw new AppError("NOT_FOUND", `config ${configId} not found`);
  return config;
}

/** @throws AppError NOT_FOUND when the config does not exist, or the node is not in that config */
export async function requireNode(db: Db, configId: string, nodeId: string): Promise<NodeRow> {
  const node = await nodesRepo.findNode(db, configId, nodeId);
  if (!node) {
    await requireConfig(db, configId);
    throw new AppError("NOT_FOUND", `node ${nodeId} not found in config ${configId}`);
  }
  return node;
}
