import { z } from "zod";
import type { MeshService } from "../../services/mesh.service.js";
import type { App } from "../route-kit.js";
import { meshPairListAnswer, meshPairListQuery } from "../../protocol/rest.schema.js";
import { configParams, createPairBody, errorResponses, meshPairResponse, pairParams, updatePairBody } from "../schemas.js";

/** Mesh pairs with their connection integrity (DESIGN §5). */
export async function meshPairsRoutes(app: App, opts: { mesh: MeshService }): Promise<void> {
  const { mesh } = opts;
  const tags = ["mesh pairs"];

  app.get(
    "/api/v1/configs/:config_id/mesh-pairs",
    {
      schema: {
        operationId: "listMeshPairs", "x-min-role": "viewer",
        tags,
        summary: "One page of the mesh pairs with connection integrity, in creation order; optionally one node's pairs",
        params: configParams,
        querystring: meshPairListQuery,
        response: { 200: meshPairListAnswer, ...errorResponses(404) },
      },
    },
    async (req) => mesh.listPairs(req.params.config_id, req.query),
  );

  app.post(
    "/api/v1/configs/:config_id/mesh-pairs",
    {
      schema: {
        operationId: "createMeshPair", "x-min-role": "admin",
        tags,
        summary: "Pair two nodes of the config",
        params: configParams,
        body: createPairBody,
        response: { 201: meshPairResponse, ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => reply.status(201).send(await mesh.createPair(req.params.config_id, req.body)),
  );

  app.patch(
    "/api/v1/configs/:config_id/mesh-pairs/:pair_id",
    {
      schema: {
        operationId: "updateMeshPair", "x-min-role": "admin",
        tags,
        summary: "Enable or disable a mesh pair",
        params: pairParams,
        body: updatePairBody,
        response: { 200: meshPairResponse, ...errorResponses(404) },
      },
    },
    async (req) => mesh.updatePair(req.params.config_id, req.params.pair_id, req.body),
  );

  app.delete(
    "/api/v1/configs/:config_id/mesh-pairs/:pair_id",
    {
      schema: { operationId: "deleteMeshPair", "x-min-role": "admin", tags, summary: "Delete a mesh pair", params: pairParams, response: { 204: z.null(), ...errorResponses(404) } },
    },
    async (req, reply) => {
      await mesh.deletePair(req.params.config_id, req.params.pair_id);
      return reply.status(204).send(null);
    },
  );
}
