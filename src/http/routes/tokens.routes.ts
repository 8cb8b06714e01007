import { z } from "zod";
import { accessTokenListAnswer, createAccessTokenBody, createdAccessTokenAnswer, tokenParams } from "../../protocol/users.schema.js";
import type { AccessTokensService } from "../../services/access-tokens.service.js";
import { principalOf, type App } from "../route-kit.js";
import { errorResponses } from "../schemas.js";

/** Personal access tokens (README "Users, roles and tokens"): anyone signed in manages their own; owners everyone's. */
export async function accessTokensRoutes(app: App, opts: { tokens: AccessTokensService }): Promise<void> {
  const { tokens } = opts;
  const tags = ["auth"];

  app.post(
    "/api/v1/tokens",
    {
      schema: {
        operationId: "createAccessToken", "x-min-role": "viewer",
        tags,
        summary: "Create a personal access token (role at most yours, 1-365 days); the secret is answered this once",
        body: createAccessTokenBody,
        response: { 201: createdAccessTokenAnswer, ...errorResponses() },
      },
    },
    async (req, reply) => reply.status(201).header("cache-control", "no-store").send(await tokens.create(principalOf(req), req.body)),
  );

  app.get(
    "/api/v1/tokens",
    { schema: { operationId: "listAccessTokens", "x-min-role": "viewer", tags, summary: "Your personal access tokens (an owner: everyone's), with last use; never the secrets", response: { 200: accessTokenListAnswer, ...errorResponses() } } },
    async (req) => ({ tokens: await tokens.list(principalOf(req)) }),
  );

  app.delete(
    "/api/v1/tokens/:token_id",
    {
      schema: {
        operationId: "revokeAccessToken", "x-min-role": "viewer",
        tags,
        summary: "Revoke a personal access token (yours; an owner: anyone's): 401 from the next request, its event streams end",
        params: tokenParams,
        response: { 204: z.null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await tokens.revoke(principalOf(req), req.params.token_id);
      return reply.status(204).send(null);
    },
  );
}
