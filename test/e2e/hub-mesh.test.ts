// A mesh behind NAT on real WireGuard (README "Hubs: meshes behind NAT"): the service started the
// way `npm start` starts it, a hub with a public endpoint and three nodes without one created over
// HTTP, each node's rendered config brought up by real wg-quick + wireguard-go in its own network
// namespace. The three cannot reach each other's underlay address, only the hub's; every one
// pings every other's tunnel address through the hub, whose config turned forwarding on.
// DESIGN §4: real tunnels in namespaces when root, skipped otherwise.
import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { test } from "node:test";
import { z } from "zod";
import { api, login } from "../helpers/api.js";
import type { Lab } from "../helpers/netns.js";
import { cleanUpAfter, createLab } from "../helpers/netns.js";
import type { RunningService } from "../helpers/service.js";
import { startService } from "../helpers/service.js";
import { requireSystem } from "../helpers/system.js";
import type { WgQuick } from "../helpers/wireguard.js";
import { WIREGUARD_BINARIES, createWgQuick, latestHandshakes, pingUntilReply, writeWgQuickConfig } from "../helpers/wireguard.js";

const NodeAnswer = z.object({ node_id: z.string(), name: z.string(), interface_name: z.string(), address: z.string(), public_key: z.string(), hub: z.boolean() });
type NodeAnswer = z.infer<typeof NodeAnswer>;
const PairsAnswer = z.object({
  mesh_pairs: z.array(z.object({ node_a: z.string(), node_b: z.string(), integrity: z.object({ status: z.string() }), route: z.string().nullable(), hub_node_id: z.string().nullable() })),
});
const StagedAnswer = z.object({ config_text: z.string() });

test(
  "hub mesh: three nodes that cannot reach each other's underlay ping each other's tunnel address through the hub, with configs rendered by the service",
  { timeout: 120_000 },
  async (t) => {
    if (!requireSystem(t, { root: true, binaries: [...WIREGUARD_BINARIES, "npm", "iptables", "sysctl"] })) return;

    const started: { lab?: Lab; wgQuick?: WgQuick; service?: RunningService } = {};
    cleanUpAfter(t, "hub mesh", [() => started.wgQuick?.downAll(), () => started.lab?.destroy(), () => started.service?.stop()]);

    try {
      const lab = (started.lab = await createLab(4, { prefix: "svhb" }));
      const wgQuick = (started.wgQuick = await createWgQuick(lab));
      const service = (started.service = await startService({}));
      const admin = api(service.baseUrl, await login(service.baseUrl, service.adminPassword));
      const config = z.object({ config_id: z.string() }).parse(
        await admin.post("/api/v1/configs", { name: `e2e-hub-${lab.suffix}`, tunnel_protocol: "wireguard", network_cidr: `10.215.${randomInt(1, 251)}.0/24` }),
      );
      const nodesPath = `/api/v1/configs/${config.config_id}/nodes`;
      const [hubLab, ...behindLab] = lab.nodes;
      assert.ok(hubLab !== undefined && behindLab.length === 3);

      // wireguard-go's control sockets share /var/run/wireguard across namespaces: distinct names.
      const hub = NodeAnswer.parse(
        await admin.post(nodesPath, { name: "hub", mode: "static", public_address: hubLab.underlayAddress, listen_port: 51820, hub: true, interface_name: `svhb-${lab.suffix}-h` }),
      );
      assert.equal(hub.hub, true);
      const behind: NodeAnswer[] = [];
      for (const [i, name] of ["ana", "ben", "cy"].entries()) {
        behind.push(NodeAnswer.parse(await admin.post(nodesPath, { name, mode: "static", interface_name: `svhb-${lab.suffix}-${i}` })));
      }

      // The API says how each pair travels: the three behind NAT through the hub.
      const { mesh_pairs: pairs } = PairsAnswer.parse(await admin.get(`/api/v1/configs/${config.config_id}/mesh-pairs`));
      assert.equal(pairs.length, 6);
      for (const pair of pairs) {
        const viaHub = pair.node_a !== hub.node_id && pair.node_b !== hub.node_id;
        assert.deepEqual([pair.integrity.status, pair.route, pair.hub_node_id], viaHub ? ["ok", "via_hub", hub.node_id] : ["ok", "direct", null]);
      }

      // The underlay: the three reach the hub's address and not each other's.
      for (const [i, from] of behindLab.entries()) {
        for (const [j, to] of behindLab.entries()) {
          if (i !== j) await lab.exec(from.ns, "ip", ["route", "add", "blackhole", `${to.underlayAddress}/32`]);
        }
      }
      for (const [i, from] of behindLab.entries()) {
        await lab.exec(from.ns, "ping", ["-n", "-c", "1", "-W", "2", hubLab.underlayAddress]);
        const other = behindLab[(i + 1) % behindLab.length];
        assert.ok(other !== undefined);
        await assert.rejects(lab.exec(from.ns, "ping", ["-n", "-c", "1", "-W", "1", other.underlayAddress]), `${from.ns} cannot reach ${other.underlayAddress}`);
      }

      // Up, with the texts the service rendered: the hub first.
      for (const [node, labNode] of [[hub, hubLab], ...behind.map((n, i) => [n, behindLab[i]] as const)] as const) {
        assert.ok(labNode !== undefined);
        const { config_text: text } = StagedAnswer.parse(await admin.get(`${nodesPath}/${node.node_id}/config`));
        await wgQuick.up(labNode.ns, await writeWgQuickConfig(lab.dir, node.interface_name, text), node.interface_name);
      }
      assert.equal((await lab.exec(hubLab.ns, "sysctl", ["-n", "net.ipv4.ip_forward"])).stdout.trim(), "1", "the hub's PostUp turned forwarding on");
      assert.match((await lab.exec(hubLab.ns, "iptables", ["-S", "FORWARD"])).stdout, new RegExp(`-A FORWARD -i ${hub.interface_name} -o ${hub.interface_name} -j ACCEPT`));

      for (const [i, from] of behind.entries()) {
        for (const to of behind.filter((n) => n !== from)) {
          await pingUntilReply(lab, behindLab[i]?.ns ?? "", to.address);
        }
      }
      // Each node behind NAT has one peer, the hub, and has shaken hands with it only.
      for (const [i, node] of behind.entries()) {
        const handshakes = await latestHandshakes(lab, behindLab[i]?.ns ?? "", node.interface_name);
        assert.deepEqual([...handshakes.keys()], [hub.public_key], `${node.name}'s only peer is the hub`);
        assert.ok((handshakes.get(hub.public_key) ?? 0) > 0, `${node.name} has a handshake with the hub`);
      }
    } catch (error) {
      if (started.service !== undefined) {
        for (const line of `service output:\n${started.service.output()}`.trimEnd().split("\n")) t.diagnostic(line);
      }
      throw error;
    }
  },
);
