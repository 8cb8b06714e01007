// The real mesh: the service started the way `npm start` starts it, a config with three static
// nodes created over HTTP, each node's config downloaded with its own token and brought up by
// real wg-quick + wireguard-go in its own network namespace, then every node pings every other
// over the tunnel. DESIGN §4: real tunnels in namespaces when root, skipped otherwise.
import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { test } from "node:test";
import { z } from "zod";
import { ApiError, api, login } from "../helpers/api.js";
import type { Lab } from "../helpers/netns.js";
import { cleanUpAfter, createLab, run } from "../helpers/netns.js";
import type { RunningService } from "../helpers/service.js";
import { startService } from "../helpers/service.js";
import { requireSystem } from "../helpers/system.js";
import type { WgQuick } from "../helpers/wireguard.js";
import {
  WIREGUARD_BINARIES,
  createWgQuick,
  latestHandshakes,
  pingUntilReply,
  writeWgQuickConfig,
} from "../helpers/wireguard.js";

const ConfigAnswer = z.object({
  config_id: z.string().min(1),
  name: z.string(),
  tunnel_protocol: z.literal("wireguard"),
  network_cidr: z.string(),
});

const NodeAnswer = z.object({
  node_id: z.string().min(1),
  config_id: z.string(),
  name: z.string(),
  mode: z.literal("static"),
  interface_name: z.string(),
  address: z.string().min(1),
  public_address: z.string(),
  listen_port: z.number().int(),
  public_key: z.string().min(1),
});
type NodeAnswer = z.infer<typeof NodeAnswer>;

const MeshPairsAnswer = z.object({
  mesh_pairs: z.array(
    z.object({
      pair_id: z.string(),
      node_a: z.string(),
      node_b: z.string(),
      enabled: z.boolean(),
      integrity: z.object({ status: z.enum(["ok", "broken", "disabled"]) }),
    }),
  ),
});

const DownloadTokenAnswer = z.object({
  download_path: z.string().min(1),
  download_token: z.string().min(1),
  download_token_expires_at: z.unknown(),
});

const ErrorAnswer = z.object({ error: z.object({ code: z.string() }) });

const LISTEN_PORT = 51820;

/** The tunnel address without its prefix length. */
function hostOf(address: string): string {
  return address.split("/")[0] ?? address;
}

test(
  "static mesh: three static nodes made over HTTP come up with wg-quick + wireguard-go from their downloaded configs and ping each other",
  { timeout: 90_000 },
  async (t) => {
    if (!requireSystem(t, { root: true, binaries: [...WIREGUARD_BINARIES, "npm"] })) return;

    const started: { lab?: Lab; wgQuick?: WgQuick; service?: RunningService } = {};
    // Runs even when the test fails midway: tunnels down, namespaces (and any wireguard-go still
    // in them) gone, temp dirs removed, the service's process group stopped.
    cleanUpAfter(t, "static mesh", [() => started.wgQuick?.downAll(), () => started.lab?.destroy(), () => started.service?.stop()]);

    try {
      const lab = (started.lab = await createLab(3, { prefix: "svcm" }));
      const wgQuick = (started.wgQuick = await createWgQuick(lab));
      const service = (started.service = await startService({}));
      const { baseUrl } = service;
      const admin = api(baseUrl, await login(baseUrl, service.adminPassword));

      const networkCidr = `10.214.${randomInt(1, 251)}.0/24`;
      const config = ConfigAnswer.parse(
        await admin.post("/api/v1/configs", {
          name: `e2e-static-mesh-${lab.suffix}`,
          tunnel_protocol: "wireguard",
          network_cidr: networkCidr,
        }),
      );
      assert.equal(config.network_cidr, networkCidr);
      const nodesPath = `/api/v1/configs/${config.config_id}/nodes`;

      // spec §1.1: each endpoint is a node inside a config, addressed by config_id + node_id.
      const nodes: NodeAnswer[] = [];
      for (const labNode of lab.nodes) {
        const letter = String.fromCharCode(97 + labNode.index);
        // wireguard-go's control sockets share /var/run/wireguard across namespaces: distinct names.
        const interfaceName = `svcm-${lab.suffix}-${letter}`;
        const node = NodeAnswer.parse(
          await admin.post(nodesPath, {
            name: `node-${letter}`,
            mode: "static",
            public_address: labNode.underlayAddress,
            listen_port: LISTEN_PORT,
            interface_name: interfaceName,
          }),
        );
        assert.equal(node.config_id, config.config_id);
        assert.equal(node.interface_name, interfaceName);
        assert.equal(node.public_address, labNode.underlayAddress);
        assert.equal(node.listen_port, LISTEN_PORT);
        nodes.push(node);
      }
      assert.equal(new Set(nodes.map((node) => hostOf(node.address))).size, 3, "each node has its own address");

      // Each new node is paired with every node already in the config: three nodes, three pairs.
      const { mesh_pairs: pairs } = MeshPairsAnswer.parse(await admin.get(`/api/v1/configs/${config.config_id}/mesh-pairs`));
      assert.deepEqual(
        pairs.map((pair) => [pair.node_a, pair.node_b].sort().join(" ")).sort(),
        [
          [nodes[0], nodes[1]],
          [nodes[0], nodes[2]],
          [nodes[1], nodes[2]],
        ]
          .map((pair) => pair.map((node) => node?.node_id ?? "").sort().join(" "))
          .sort(),
      );
      for (const pair of pairs) {
        assert.equal(pair.enabled, true);
        assert.equal(pair.integrity.status, "ok", `pair ${pair.pair_id} is intact`);
      }

      const grants = [];
      for (const node of nodes) {
        grants.push(
          DownloadTokenAnswer.parse(await admin.post(`${nodesPath}/${node.node_id}/download-token`)),
        );
      }

      // spec §4 rule 1: a config download token is bound to config_id + node_id and cannot
      // download another node's config. Node a's token on node b's download path is refused.
      const [grantA, grantB] = grants;
      assert.ok(grantA !== undefined && grantB !== undefined);
      const foreignPath = new URL(grantB.download_path, baseUrl);
      foreignPath.searchParams.set("download_token", grantA.download_token);
      await assert.rejects(
        api(baseUrl).getText(`${foreignPath.pathname}${foreignPath.search}`),
        (error: unknown) => {
          assert.ok(error instanceof ApiError);
          assert.equal(error.status, 403);
          assert.equal(ErrorAnswer.parse(JSON.parse(error.body)).error.code, "DOWNLOAD_TOKEN_SCOPE_MISMATCH");
          return true;
        },
      );

      for (const [index, node] of nodes.entries()) {
        const grant = grants[index];
        const labNode = lab.nodes[index];
        assert.ok(grant !== undefined && labNode !== undefined);
        // The download carries only the token: no Authorization header (spec §5, node config download).
        const { text, contentType } = await api(baseUrl).getText(grant.download_path);
        assert.match(contentType, /^text\/plain/);

        // That node's config only: its own address and key, the other two as peers.
        const addressLine = /^Address\s*=\s*(.+)$/m.exec(text)?.[1] ?? "";
        assert.ok(addressLine.includes(hostOf(node.address)), `Address line "${addressLine}" holds ${node.address}`);
        assert.match(text, new RegExp(`^ListenPort\\s*=\\s*${LISTEN_PORT}\\s*$`, "m"));
        const privateKeys = [...text.matchAll(/^PrivateKey\s*=\s*(\S+)\s*$/gm)].map((match) => match[1] ?? "");
        assert.equal(privateKeys.length, 1, "exactly one PrivateKey: no other node's secret");
        const derived = (await run("wg", ["pubkey"], { input: `${privateKeys[0] ?? ""}\n` })).stdout.trim();
        assert.equal(derived, node.public_key, "the PrivateKey is this node's own (wg pubkey agrees)");
        for (const other of nodes.filter((candidate) => candidate !== node)) {
          assert.ok(text.includes(other.public_key), `peer ${other.name} is listed`);
          assert.match(text, new RegExp(`^Endpoint\\s*=\\s*${other.public_address.replaceAll(".", "\\.")}:${other.listen_port}\\s*$`, "m"));
        }
        assert.equal(text.match(/^\[Peer\]\s*$/gm)?.length, nodes.length - 1, "one [Peer] per other node");

        const confPath = await writeWgQuickConfig(lab.dir, node.interface_name, text);
        await wgQuick.up(labNode.ns, confPath, node.interface_name);
      }

      for (const [fromIndex, from] of nodes.entries()) {
        const fromNs = lab.nodes[fromIndex]?.ns ?? "";
        for (const to of nodes.filter((candidate) => candidate !== from)) {
          await pingUntilReply(lab, fromNs, hostOf(to.address));
        }
      }
      for (const [index, node] of nodes.entries()) {
        const handshakes = await latestHandshakes(lab, lab.nodes[index]?.ns ?? "", node.interface_name);
        for (const peer of nodes.filter((candidate) => candidate !== node)) {
          assert.ok((handshakes.get(peer.public_key) ?? 0) > 0, `${node.name} has a handshake with ${peer.name}`);
        }
      }
    } catch (error) {
      if (started.service !== undefined) {
        for (const line of `service output:\n${started.service.output()}`.trimEnd().split("\n")) t.diagnostic(line);
      }
      throw error;
    }
  },
);
