import type { Db } from "./connection.js";
import type { PortForwardRow } from "./schema.js";

/** Repository of `port_forwards`. */

export async function insertPortForward(db: Db, row: PortForwardRow): Promise<void> {
  await db.insertInto("port_forwards").values(row).execute();
}

export async function listPortForwards(db: Db, nodeId: string): Promise<PortForwardRow[]> {
  return db.selectFrom("port_forwards").selectAll().where("node_id", "=", nodeId).orderBy("protocol").orderBy("listen_port").execute();
}

/** Port forwards of every node of a config: node_id → rows. */
export async function listPortForwardsOfConfig(db: Db, configId: string): Promise<Map<string, PortForwardRow[]>> {
  const rows = await db
    .selectFrom("port_forwards")
    .innerJoin("nodes", "nodes.node_id", "port_forwards.node_id")
    .selectAll("port_forwards")
    .where("nodes.config_id", "=", configId)
    .orderBy("port_forwards.protocol")
    .orderBy("port_forwards.listen_port")
    .execute();
  const out = new Map<string, PortForwardRow[]>();
  for (const r of rows) {
    const list = out.get(r.node_id) ?? [];
    list.push(r);
    out.set(r.node_id, list);
  }
  return out;
}

export async function findPortForward(db: Db, nodeId: string, forwardId: string): Promise<PortForwardRow | undefined> {
  return db.selectFrom("port_forwards").selectAll().where("node_id", "=", nodeId).where("forward_id", "=", forwardId).executeTakeFirst();
}

export async function findPortForwardByPort(
  db: Db,
  nodeId: string,
  protocol: "tcp" | "udp",
  listenPort: number,
): Promise<PortForwardRow | undefined> {
  return db
    .selectFrom("port_forwards")
    .selectAll()
    .where("node_id", "=", nodeId)
    .where("protocol", "=", protocol)
    .where("listen_port", "=", listenPort)
    .executeTakeFirst();
}

export async function updatePortForward(db: Db, forwardId: string, patch: Partial<PortForwardRow>): Promise<void> {
  await db.updateTable("port_forwards").set(patch).where("forward_id", "=", forwardId).execute();
}

export async function deletePortForward(db: Db, forwardId: string): Promise<void> {
  await db.deleteFrom("port_forwards").where("forward_id", "=", forwardId).execute();
}
