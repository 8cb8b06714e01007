/** Small rules of the mesh service's writes. */
import { AppError } from "../../errors.js";
import type { Db } from "../../store/db.js";
import * as pairsRepo from "../../store/mesh-pairs.repository.js";
import type { MeshPairRow } from "../../store/schema.js";
import { requireConfig } from "../node-lookup.js";

/** The mesh pair `pairId` of `configId`. @throws AppError NOT_FOUND for an unknown config or pair */
export async function requirePair(db: Db, configId: string, pairId: string): Promise<MeshPairRow> {
  const pair = await pairsRepo.findPair(db, configId, pairId);
  if (!pair) {
    await requireConfig(db, configId);
    throw new AppError("NOT_FOUND", `mesh pair ${pairId} not found in config ${configId}`);
  }
  return pair;
}

/** What of a port forward reaches its node's text: nothing while disabled (spec §6.3 config_text). */
export function forwardKey(f: { enabled: number; protocol: string; listen_port: number; target_address: string; target_port: number }): string {
  return f.enabled === 1 ? `${f.protocol}|${f.listen_port}|${f.target_address}|${f.target_port}` : "";
}

/** A node's tags without duplicates, sorted. */
export function dedupe(tags: readonly string[]): string[] {
  return [...new Set(tags)].sort();
}
