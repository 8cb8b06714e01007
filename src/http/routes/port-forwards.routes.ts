import { z } from "zod";
import type { MeshService } from "../../services/mesh.service.js";
import type { App } from "../route-kit.js";
import { portForwardListAnswer } from "../../protocol/rest.schema.js";
import {
  createPortForwardBody,
  errorResponses,
  forwardParams,
  nodeParams,
  portForwardResponse,
  updatePortForwardBody,
} from "../schemas.js";

/** Port forwards of a node, rendered as PostUp/PostDown rules (DESIGN §5). */
export async function portForwardsRoutes(app: App, opts: { mesh: MeshService }): Promise<void> {
  const { mesh } = opts;
  const tags = ["port forwards"];

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/port-forwards",
    {
      schema: {
        operationId: "listPortForwards", "x-min-role": "viewer",
        tags,
        summary: "List a node's port forwards",
        params: nodeParams,
        response: { 200: portForwardListAnswer, ...errorResponses(404) },
      },
    },
    async (req) => ({ port_forwards: await mesh.listPortForwards(req.params.config_id, req.params.node_id) }),
  );

  app.post(
    "/api/v1/configs/:config_id/nodes/:node_id/port-forwards",
    {
      schema: {
        operationId: "createPortForward", "x-min-role": "admin",
        tags,
        summary: "Forward a port of the node to a target address",
        params: nodeParams,
        body: createPortForwardBody,
        response: { 201: portForwardResponse, ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => reply.status(201).send(await mesh.createPortForward(req.params.config_id, req.params.node_id, req.body)),
  );

  app.patch(
    "/api/v1/configs/:config_id/nodes/:node_id/port-forwards/:forward_id",
    {
      schema: {
        operationId: "updatePortForward", "x-min-role": "admin",
        tags,
        summary: "Change or enable/disable a port forward",
        params: forwardParams,
        body: updatePortForwardBody,
        response: { 200: portForwardResponse, ...errorResponses(404, 409) },
      },
    },
    async (req) => mesh.updatePortForward(req.params.config_id, req.params.node_id, req.params.forward_id, req.body),
  );

  app.delete(
    "/api/v1/configs/:config_id/nodes/:node_id/port-forwards/:forward_id",
    {
      schema: { operationId: "deletePortForward", "x-min-role": "admin", tags, summary: "Delete a port forward", params: forwardParams, response: { 204: z.null(), ...errorResponses(404) } },
    },
    async (req, reply) => {
      await mesh.deletePortForward(req.params.config_id, req.params.node_id, req.params.forward_id);
      return reply.status(204).send(null);
    },
  );
}
