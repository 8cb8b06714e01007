import { z } from "zod";
import { createUserBody, meAnswer, updateUserBody, userListAnswer, userParams, userViewSchema } from "../../protocol/users.schema.js";
import type { UsersService } from "../../services/users.service.js";
import { principalOf, type App } from "../route-kit.js";
import { errorResponses } from "../schemas.js";

/** Users and roles, for owners; "who am I" for everyone signed in (README "Users, roles and tokens"). */
export async function usersRoutes(app: App, opts: { users: UsersService }): Promise<void> {
  meRoute(app);
  userRoutes(app, opts.users);
}

function meRoute(app: App): void {
  app.get(
    "/api/v1/auth/me",
    {
      schema: {
        operationId: "getMe", "x-min-role": "viewer",
        tags: ["auth"],
        summary: "Who the caller is: user, role and how they signed in",
        response: { 200: meAnswer, ...errorResponses() },
      },
    },
    async (req) => {
      const p = principalOf(req);
      return { user: { user_id: p.user_id, username: p.username, role: p.role }, via: p.via, token: p.token ?? null, ...(p.login === undefined ? {} : { login: p.login }) };
    },
  );
}

function userRoutes(app: App, users: UsersService): void {
  const tags = ["users"];

  app.get(
    "/api/v1/users",
    { schema: { operationId: "listUsers", "x-min-role": "owner", tags, summary: "Every user with role and state, by name", response: { 200: userListAnswer, ...errorResponses() } } },
    async () => ({ users: await users.list() }),
  );

  app.post(
    "/api/v1/users",
    {
      schema: {
        operationId: "createUser", "x-min-role": "owner",
        tags,
        summary: "Create a user with a password (at least 12 characters) and a role",
        body: createUserBody,
        response: { 201: userViewSchema, ...errorResponses(409) },
      },
    },
    async (req, reply) => reply.status(201).send(await users.create(req.body)),
  );

  app.patch(
    "/api/v1/users/:user_id",
    {
      schema: {
        operationId: "updateUser", "x-min-role": "owner",
        tags,
        summary: "Change a user's role, password or disabled flag; disabling ends their sessions and streams at once; the last enabled owner stays",
        params: userParams,
        body: updateUserBody,
        response: { 200: userViewSchema, ...errorResponses(404, 409) },
      },
    },
    async (req) => {
      return users.update(req.params.user_id, req.body, principalOf(req));
    },
  );

  app.delete(
    "/api/v1/users/:user_id",
    {
      schema: {
        operationId: "deleteUser", "x-min-role": "owner",
        tags,
        summary: "Delete a user; their sessions and streams end at once; the last enabled owner stays",
        params: userParams,
        response: { 204: z.null(), ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => {
      await users.delete(req.params.user_id);
      return reply.status(204).send(null);
    },
  );
}
