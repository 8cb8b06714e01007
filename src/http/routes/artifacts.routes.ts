import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { isoTime } from "../../lib/clock.js";
import { AppError } from "../../errors.js";
import { ID_PATTERN } from "../../protocol/ids.js";
import { artifactBuildAnswer, artifactGrantAnswer, artifactRequestBody } from "../../protocol/rest.schema.js";
import type { ArtifactsService } from "../../services/artifacts.service.js";
import type { AuthService } from "../../services/auth.service.js";
import type { DownloadsService } from "../../services/downloads.service.js";
import { bearerToken, requireRole, type App } from "../route-kit.js";
import { downloadQuery, errorResponses } from "../schemas.js";

const artifactParams = z.strictObject({
  artifact_id: z.string().regex(ID_PATTERN, "must match ^[a-z0-9][a-z0-9_-]{0,63}$"),
});


/**
 * Client artifact build, download-grant and download (spec §4 rows 3–5, rules 2–7; DESIGN §5).
 * Build and grant need the admin session; the download accepts the admin session or a
 * `client_artifact` download token for that artifact_id (spec §5).
 */
export async function artifactsRoutes(
  app: App,
  opts: { artifacts: ArtifactsService; downloads: DownloadsService; auth: AuthService },
): Promise<void> {
  const { artifacts, downloads, auth } = opts;
  const tags = ["client artifacts"];

  app.post(
    "/api/v1/tools/download/client-artifacts/build",
    {
      schema: {
        operationId: "buildClientArtifact", "x-min-role": "operator",
        tags,
        summary:
          "remote_release: look up the release asset of the server's version (download_url); local_build: build or locate the zip on this server",
        body: artifactRequestBody,
        response: {
          200: artifactBuildAnswer,
          ...errorResponses(404, 503),
        },
      },
    },
    async (req) => {
      const { source, goos, goarch } = req.body;
      if (source === "remote_release") {
        const r = await artifacts.remoteRelease(goos, goarch);
        return { source: r.source, filename: r.filename, download_url: r.download_url, command: r.command };
      }
      const a = await artifacts.localBuild(goos, goarch);
      return { source: a.source, artifact_id: a.artifact_id, filename: a.filename, size_bytes: a.size_bytes, sha256: a.sha256 };
    },
  );

  app.post(
    "/api/v1/tools/download/client-artifacts/download-grant",
    {
      schema: {
        operationId: "grantClientArtifactDownload", "x-min-role": "operator",
        tags,
        summary: "local_build: build or locate the zip and issue a 5-minute client_artifact download token (spec §4 rule 6)",
        body: artifactRequestBody,
        response: { 200: artifactGrantAnswer, ...errorResponses(503) },
      },
    },
    async (req) => {
      const { source, goos, goarch } = req.body;
      if (source === "remote_release") {
        // spec §4 rule 5: the console downloads release assets straight from the release host.
        throw new AppError(
          "VALIDATION_FAILED",
          "remote_release assets are downloaded directly from the release host: use build for its download_url; download-grant serves local_build only",
        );
      }
      const g = await artifacts.grant(goos, goarch);
      return {
        artifact_id: g.artifact_id,
        filename: g.filename,
        size_bytes: g.size_bytes,
        sha256: g.sha256,
        download_path: g.download_path,
        download_token: g.download_token,
        download_token_expires_at: isoTime(g.download_token_expires_at),
        command: g.command,
      };
    },
  );

  /** spec §4 rule 7: an admin session, or a `client_artifact` token bound to this artifact_id. */
  async function authorizeDownload(req: FastifyRequest, id: string, token: string | undefined): Promise<void> {
    const bearer = bearerToken(req);
    if (bearer !== undefined) {
      try {
        requireRole(await auth.verifyAccessToken(bearer), "operator");
        return;
      } catch (err) {
        if (token === undefined) throw err;
      }
    }
    if (token === undefined) {
      throw new AppError("UNAUTHORIZED", "an admin bearer token or a download_token is required");
    }
    await downloads.verify(token, "client_artifact", id);
  }

  app.get(
    "/api/v1/tools/download/client-artifacts/:artifact_id",
    {
      config: { auth: "public" },
      schema: {
        operationId: "downloadClientArtifact", "x-min-role": "operator",
        tags,
        summary: "Download a local_build zip with an admin session or a download_token (spec §4 rule 7)",
        // Either the admin bearer token, or none when `download_token` is given.
        security: [{ bearer: [] }, {}],
        params: artifactParams,
        querystring: downloadQuery,
        response: {
          200: z.unknown().meta({ type: "string", format: "binary", description: "the zip (application/zip)" }),
          ...errorResponses(403, 404, 503),
        },
      },
    },
    async (req, reply) => {
      const id = req.params.artifact_id;
      await authorizeDownload(req, id, req.query.download_token);
      const artifact = await artifacts.artifact(id);
      return reply
        .status(200)
        .header("content-type", "application/zip")
        .header("content-disposition", `attachment; filename="${artifact.filename}"`)
        .header("content-length", String(artifact.size_bytes))
        .header("cache-control", "no-store")
        .send(artifacts.open(artifact));
    },
  );
}
