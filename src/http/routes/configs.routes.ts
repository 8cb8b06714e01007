import { z } from "zod";
import type { MeshService } from "../../services/mesh.service.js";
import type { App } from "../route-kit.js";
import { configListAnswer, configListQuery, tagListAnswer } from "../../protocol/rest.schema.js";
import {
  configDetailResponse,
  configParams,
  configResponse,
  createConfigBody,
  errorResponses,
  updateConfigBody,
} from "../schemas.js";

/** Configs and their tags (DESIGN §5). */
export async function configsRoutes(app: App, opts: { mesh: MeshService }): Promise<void> {
  const { mesh } = opts;
  const tags = ["configs"];

  app.get(
    "/api/v1/configs",
    {
      schema: {
        operationId: "listConfigs", "x-min-role": "viewer",
        tags,
        summary: "One page of configs in creation order, with counts",
        querystring: configListQuery,
        response: { 200: configListAnswer, ...errorResponses() },
      },
    },
    async (req) => mesh.listConfigPage(req.query),
  );

  app.post(
    "/api/v1/configs",
    {
      schema: {
        operationId: "createConfig", "x-min-role": "admin",
        tags,
        summary: "Create a config (a mesh network)",
        body: createConfigBody,
        response: { 201: configResponse, ...errorResponses(409) },
      },
    },
    async (req, reply) => reply.status(201).send(await mesh.createConfig(req.body)),
  );

  app.get(
    "/api/v1/configs/:config_id",
    {
      schema: {
        operationId: "getConfig", "x-min-role": "viewer",
        tags,
        summary: "A config with its nodes and tags",
        params: configParams,
        response: { 200: configDetailResponse, ...errorResponses(404) },
      },
    },
    async (req) => mesh.getConfig(req.params.config_id),
  );

  app.patch(
    "/api/v1/configs/:config_id",
    {
      schema: {
        operationId: "updateConfig", "x-min-role": "admin",
        tags,
        summary: "Change a config's name, tunnel protocol or (while it has no nodes) network",
        params: configParams,
        body: updateConfigBody,
        response: { 200: configResponse, ...errorResponses(404, 409) },
      },
    },
    async (req) => mesh.updateConfig(req.params.config_id, req.body),
  );

  app.delete(
    "/api/v1/configs/:config_id",
    {
      schema: {
        operationId: "deleteConfig", "x-min-role": "admin",
        tags,
        summary: "Delete a config with all its nodes",
        params: configParams,
        response: { 204: z.null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await mesh.deleteConfig(req.params.config_id);
      return reply.status(204).send(null);
    },
  );

  app.get(
    "/api/v1/configs/:config_id/tags",
    {
      schema: {
        operationId: "listConfigTags", "x-min-role": "viewer",
        tags,
        summary: "Tags used in a config, with the nodes carrying each",
        params: configParams,
        response: { 200: tagListAnswer, ...errorResponses(404) },
      },
    },
    async (req) => ({ tags: await mesh.listTags(req.params.config_id) }),
  );
}
