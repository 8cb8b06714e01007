import { z } from "zod";
import { isoTime, type Clock } from "../../lib/clock.js";
import type { DownloadsService } from "../../services/downloads.service.js";
import type { MeshService } from "../../services/mesh.service.js";
import type { App } from "../route-kit.js";
import { configFileName } from "../../protocol/config-file-name.js";
import { formatNodeConfig, nodeAppConfigs } from "../../services/config-formats.js";
import { nodeAppConfigsAnswer } from "../../protocol/config-formats.js";
import { nodeCountsAnswer, nodeFilterQuery, nodeListAnswer, nodeListQuery } from "../../protocol/rest.schema.js";
import {
  createNodeBody,
  nodeConfigDownloadQuery,
  downloadTokenResponse,
  errorResponses,
  nodeParams,
  nodeResponse,
  stagedConfigResponse,
  configParams,
  updateNodeBody,
} from "../schemas.js";

/** The resource id a node config download token is bound to (spec §2.1: config_id + node_id). */
export function nodeConfigResource(configId: string, nodeId: string): string {
  return `${configId}/${nodeId}`;
}

/** The path behind `download_path` of a node config download (spec §4 rows 1–2). */
export function nodeConfigDownloadPath(configId: string, nodeId: string): string {
  return `/api/v1/configs/${configId}/nodes/${nodeId}/config/download`;
}

/** The config download's file name, `<config>-<node>.conf` (src/protocol/config-file-name.ts). */
function downloadFileName(staged: { config_name: string; node: { config_id: string; node_id: string; name: string } }): string {
  return configFileName({ name: staged.config_name, id: staged.node.config_id }, { name: staged.node.name, id: staged.node.node_id });
}

/** Nodes, their staged config, and node config downloads (DESIGN §5; spec §4 rows 1–2, rule 1). */
export async function nodesRoutes(
  app: App,
  opts: { mesh: MeshService; downloads: DownloadsService; clock: Clock },
): Promise<void> {
  const { mesh, downloads } = opts;
  const tags = ["nodes"];

  app.get(
    "/api/v1/configs/:config_id/nodes",
    {
      schema: {
        operationId: "listNodes", "x-min-role": "viewer",
        tags,
        summary: "One page of the nodes of a config, in creation order, filtered by presence, mode, sync state and text",
        params: configParams,
        querystring: nodeListQuery,
        response: { 200: nodeListAnswer, ...errorResponses(404) },
      },
    },
    async (req) => mesh.listNodePage(req.params.config_id, req.query),
  );

  app.get(
    "/api/v1/configs/:config_id/node-counts",
    {
      schema: {
        operationId: "countNodes", "x-min-role": "viewer",
        tags,
        summary: "The config's nodes counted by presence, mode and sync state, and how many match the filters",
        params: configParams,
        querystring: nodeFilterQuery,
        response: { 200: nodeCountsAnswer, ...errorResponses(404) },
      },
    },
    async (req) => mesh.countNodes(req.params.config_id, req.query),
  );

  app.post(
    "/api/v1/configs/:config_id/nodes",
    {
      schema: {
        operationId: "createNode", "x-min-role": "admin",
        tags,
        summary: "Create a node; it is paired with every existing node unless auto_pair is false",
        params: configParams,
        body: createNodeBody,
        response: { 201: nodeResponse, ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => reply.status(201).send(await mesh.createNode(req.params.config_id, req.body)),
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id",
    { schema: { operationId: "getNode", "x-min-role": "viewer", tags, summary: "A node", params: nodeParams, response: { 200: nodeResponse, ...errorResponses(404) } } },
    async (req) => mesh.getNode(req.params.config_id, req.params.node_id),
  );

  app.patch(
    "/api/v1/configs/:config_id/nodes/:node_id",
    {
      schema: {
        operationId: "updateNode", "x-min-role": "admin",
        tags,
        summary: "Change a node",
        params: nodeParams,
        body: updateNodeBody,
        response: { 200: nodeResponse, ...errorResponses(404, 409) },
      },
    },
    async (req) => mesh.updateNode(req.params.config_id, req.params.node_id, req.body),
  );

  app.delete(
    "/api/v1/configs/:config_id/nodes/:node_id",
    {
      schema: {
        operationId: "deleteNode", "x-min-role": "admin",
        tags,
        summary: "Delete a node with its mesh pairs, port forwards and download tokens",
        params: nodeParams,
        response: { 204: z.null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await mesh.deleteNode(req.params.config_id, req.params.node_id);
      return reply.status(204).send(null);
    },
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/config",
    {
      schema: {
        operationId: "getStagedConfig", "x-min-role": "operator",
        tags,
        summary: "The node's staged config (holds its private key; admin only)",
        params: nodeParams,
        response: { 200: stagedConfigResponse, ...errorResponses(404) },
      },
    },
    async (req) => {
      const staged = await mesh.getStagedConfig(req.params.config_id, req.params.node_id);
      const last = await downloads.lastConfigDownload(staged.node.node_id);
      return {
        config_id: staged.node.config_id,
        node_id: staged.node.node_id,
        config_version: staged.config_version,
        config_sha256: staged.config_sha256,
        config_text: staged.config_text,
        filename: downloadFileName(staged),
        last_download: last === null ? null : { config_version: last.config_version, config_sha256: last.config_sha256, downloaded_at: isoTime(last.downloaded_at) },
      };
    },
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/config/apps",
    {
      schema: {
        operationId: "getNodeAppConfigs", "x-min-role": "operator",
        tags,
        summary:
          "The node's staged config for each client app (WireGuard, AmneziaWG, AmneziaVPN) as the app imports it, or why that app cannot take it (holds the private key; admin only)",
        params: nodeParams,
        response: { 200: nodeAppConfigsAnswer, ...errorResponses(404) },
      },
    },
    async (req) => {
      const staged = await mesh.getStagedConfig(req.params.config_id, req.params.node_id);
      return {
        config_id: staged.node.config_id,
        node_id: staged.node.node_id,
        config_version: staged.config_version,
        config_sha256: staged.config_sha256,
        apps: nodeAppConfigs(staged, staged.tunnel_protocol),
      };
    },
  );

  app.post(
    "/api/v1/configs/:config_id/nodes/:node_id/download-token",
    {
      schema: {
        operationId: "grantNodeConfigDownload", "x-min-role": "operator",
        tags,
        summary: "Issue a 5-minute token that downloads this node's config (spec §4 rule 1)",
        params: nodeParams,
        response: { 200: downloadTokenResponse, ...errorResponses(404) },
      },
    },
    async (req) => {
      const { config_id, node_id } = req.params;
      await mesh.getNode(config_id, node_id); // 404 for unknown nodes
      const issued = await downloads.issue("node_config", nodeConfigResource(config_id, node_id));
      return {
        download_path: `${nodeConfigDownloadPath(config_id, node_id)}?download_token=${encodeURIComponent(issued.token)}`,
        download_token: issued.token,
        download_token_expires_at: isoTime(issued.expiresAt),
      };
    },
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/config/download",
    {
      config: { auth: "public" },
      schema: {
        operationId: "downloadNodeConfig",
        tags,
        summary:
          "Download the node's config with a download token (no admin session) and record the version served: format=wireguard (default) the config text as <config>-<node>.conf, amneziawg the text the AmneziaWG apps import (.conf), amneziavpn the AmneziaVPN app's vpn:// link (.vpn)",
        security: [],
        params: nodeParams,
        querystring: nodeConfigDownloadQuery,
        response: { 200: z.string().describe("config text or vpn:// link (text/plain)"), ...errorResponses(403, 404, 409) },
      },
    },
    async (req, reply) => {
      const { config_id, node_id } = req.params;
      // Token first: an unauthenticated caller learns nothing about which nodes exist.
      await downloads.verify(req.query.download_token, "node_config", nodeConfigResource(config_id, node_id));
      const staged = await mesh.getStagedConfig(config_id, node_id);
      const file = formatNodeConfig(staged, req.query.format);
      await downloads.recordConfigDownload(config_id, node_id, staged);
      return reply
        .status(200)
        .header("content-type", "text/plain; charset=utf-8")
        .header("content-disposition", `attachment; filename="${file.filename}"`)
        .header("cache-control", "no-store")
        .send(file.body);
    },
  );
}

