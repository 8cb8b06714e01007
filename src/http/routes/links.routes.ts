import { linkMatrixAnswer, linkRefreshAnswer, nodePeersAnswer } from "../../protocol/links.schema.js";
import type { LinksService } from "../../services/links.service.js";
import type { App } from "../route-kit.js";
import { configParams, errorResponses, nodeParams } from "../schemas.js";

/** Measured link health (docs/links.md): the link matrix, a node's running peers, and the refresh that asks the hosts. */
export async function linksRoutes(app: App, opts: { links: LinksService }): Promise<void> {
  const { links } = opts;
  const tags = ["links"];

  app.get(
    "/api/v1/configs/:config_id/links",
    {
      schema: {
        operationId: "getConfigLinks", "x-min-role": "viewer",
        tags,
        summary: "Every configured pair with its measured link state (up, stale, down, unknown) and both directions, and the hosts whose running peers differ from their staged config",
        params: configParams,
        response: { 200: linkMatrixAnswer, ...errorResponses(404) },
      },
    },
    async (req) => links.matrix(req.params.config_id),
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/peers",
    {
      schema: {
        operationId: "getNodePeers", "x-min-role": "viewer",
        tags,
        summary: "One host's running peers as its last report showed them (handshake, transfer, endpoint) and its drift from the staged config",
        params: nodeParams,
        response: { 200: nodePeersAnswer, ...errorResponses(404) },
      },
    },
    async (req) => links.nodePeers(req.params.config_id, req.params.node_id),
  );

  app.post(
    "/api/v1/configs/:config_id/links/refresh",
    {
      schema: {
        operationId: "refreshConfigLinks", "x-min-role": "operator",
        "x-mqtt-write": true, // spec §4 rule 14: MQTT_DISABLED while MQTT is off (app.ts)
        tags,
        summary: "Ask every online bound host of the config for its peers (a detect each) and answer the link matrix once all reported or the timeout passed",
        params: configParams,
        response: { 200: linkRefreshAnswer, ...errorResponses(404, 409) },
      },
    },
    async (req) => links.refresh(req.params.config_id),
  );
}
