import type { FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { AppError } from "../../errors.js";
import { ID_PATTERN } from "../../protocol/ids.js";
import {
  bulkPackageBody,
  createSnapshotBody,
  downloadGrantAnswer,
  importSnapshotHeaders,
  restoreAnswer,
  restoreSnapshotBody,
  snapshotListAnswer,
} from "../../protocol/rest.schema.js";
import type { AuthService } from "../../services/auth.service.js";
import { SnapshotUpload, type BackupsService, type DownloadFile } from "../../services/backups.service.js";
import type { DownloadsService } from "../../services/downloads.service.js";
import type { DownloadTokenKind } from "../../protocol/download-tokens.js";
import { bearerToken, requireRole, type App } from "../route-kit.js";
import { roleAtLeast } from "../../protocol/roles.js";
import { downloadQuery, errorResponses, snapshotEntryResponse as snapshotEntry } from "../schemas.js";

const idSchema = z.string().regex(ID_PATTERN, "must match ^[a-z0-9][a-z0-9_-]{0,63}$");
const snapshotParams = z.strictObject({ snapshot_id: idSchema });
const packageParams = z.strictObject({ package_id: idSchema });

/** Content types of a snapshot upload. */
const ZIP_TYPES = ["application/zip", "application/octet-stream"];

/**
 * Snapshots and the config bulk package (spec §2.3, §2.4, §4 rows 7–9, rule 8; DESIGN §5).
 *
 * The two download routes are public to the admin scheme and check their own credential: a
 * valid admin bearer session opens them, otherwise the `download_token` query parameter must be
 * a token of the route's kind bound to that resource (spec §3.7 errors).
 */
export async function backupsRoutes(
  app: App,
  opts: { backups: BackupsService; downloads: DownloadsService; auth: AuthService },
): Promise<void> {
  const { backups, downloads, auth } = opts;
  const tags = ["backups"];

  // The snapshot zip arrives as the raw body; it streams to a private work file, bounded by
  // settings.maxSnapshotBytes (this plugin only: JSON bodies keep the global limit).
  app.addContentTypeParser(ZIP_TYPES, async (req: FastifyRequest, payload: FastifyRequest["raw"]) => {
    const declared = req.headers["content-length"];
    return backups.receiveUpload(payload, declared === undefined ? undefined : Number(declared));
  });
  // Whatever happened to the request, an upload never outlives it: removed before a refusal
  // (of the headers, say) is sent, and again once the response is done.
  app.addHook("onSend", async (req) => {
    if (req.body instanceof SnapshotUpload) await req.body.discard();
  });
  app.addHook("onResponse", async (req) => {
    if (req.body instanceof SnapshotUpload) await req.body.discard();
  });

  /**
   * A session of an admin or owner, else a download token of `kind` for `resourceId`.
   * @throws AppError FORBIDDEN for a session below admin without a token; the token's errors otherwise
   */
  async function authorizeDownload(req: FastifyRequest, token: string | undefined, kind: DownloadTokenKind, resourceId: string) {
    const bearer = bearerToken(req);
    if (bearer !== undefined) {
      const principal = await auth.verifyAccessToken(bearer).catch(() => undefined);
      // Not a live session: the download token decides.
      if (principal !== undefined && (token === undefined || roleAtLeast(principal.role, "admin"))) return requireRole(principal, "admin");
    }
    await downloads.verify(token, kind, resourceId);
  }

  function sendZip(reply: FastifyReply, file: DownloadFile) {
    return reply
      .status(200)
      .header("content-type", "application/zip")
      .header("content-length", String(file.size))
      .header("content-disposition", `attachment; filename="${file.filename}"`)
      .header("cache-control", "no-store")
      .send(file.stream);
  }

  app.get(
    "/api/v1/backups",
    {
      schema: {
        operationId: "listSnapshots", "x-min-role": "viewer",
        tags,
        summary: "List snapshots, newest first",
        response: { 200: snapshotListAnswer, ...errorResponses() },
      },
    },
    async () => ({ snapshots: await backups.listSnapshots() }),
  );

  app.post(
    "/api/v1/backups",
    {
      schema: {
        operationId: "createSnapshot", "x-min-role": "admin",
        tags,
        summary: "Take a snapshot: a consistent copy of the database, zipped with its manifest; encrypted when a passphrase is given",
        description:
          "The snapshot holds every config, node (with its WireGuard private key), pair, port forward, client state row and control log; " +
          "it holds no admin session, token, setting or broker secret. With `passphrase` (at least 12 characters) the stored file and its " +
          "download are encrypted (scrypt key, AES-256-GCM; docs/backups.md); restoring or importing it then needs the passphrase. " +
          "The passphrase is used for this request only: never stored, never logged.",
        body: createSnapshotBody,
        response: { 201: snapshotEntry, ...errorResponses() },
      },
    },
    async (req, reply) => reply.status(201).send(await backups.createSnapshot(req.body?.passphrase)),
  );

  app.post(
    "/api/v1/backups/import",
    {
      schema: {
        operationId: "importSnapshot", "x-min-role": "admin",
        tags,
        summary: "Import a snapshot file (raw body, application/zip or application/octet-stream) as a new snapshot; it is not restored",
        description:
          "The zip must hold exactly manifest.json and svc.db as regular files; sizes are bounded by SVC_MAX_SNAPSHOT_BYTES; " +
          "the manifest, the database's SHA-256, PRAGMA integrity_check and the schema are checked. An encrypted snapshot needs its " +
          "passphrase in the x-snapshot-passphrase header (percent-encoded UTF-8), is checked through its decryption and stored " +
          "encrypted. A refused import writes nothing.",
        headers: importSnapshotHeaders,
        response: { 201: snapshotEntry, ...errorResponses(413, 415) },
      },
    },
    async (req, reply) => {
      if (!(req.body instanceof SnapshotUpload)) {
        throw new AppError("VALIDATION_FAILED", "send the snapshot zip as the raw body with Content-Type application/zip");
      }
      return reply.status(201).send(await backups.importSnapshot(req.body, req.headers["x-snapshot-passphrase"]));
    },
  );

  app.post(
    "/api/v1/backups/:snapshot_id/restore",
    {
      schema: {
        operationId: "restoreSnapshot", "x-min-role": "admin",
        tags,
        summary: "Restore a snapshot in place: configs, nodes, pairs, port forwards, client state and logs are replaced atomically",
        description:
          "Every restored dynamic node must bind again (its broker account is not restored; clients bound before are cut off); " +
          "the answer counts them. An encrypted snapshot needs `passphrase`; a missing or wrong one changes nothing.",
        params: snapshotParams,
        body: restoreSnapshotBody,
        response: { 200: restoreAnswer, ...errorResponses(404) },
      },
    },
    async (req) => backups.restoreSnapshot(req.params.snapshot_id, req.body?.passphrase ?? undefined),
  );

  app.delete(
    "/api/v1/backups/:snapshot_id",
    {
      schema: {
        operationId: "deleteSnapshot", "x-min-role": "admin",
        tags,
        summary: "Delete a snapshot and revoke its download tokens",
        params: snapshotParams,
        response: { 204: z.null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await backups.deleteSnapshot(req.params.snapshot_id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    "/api/v1/backups/:snapshot_id/download-token",
    {
      schema: {
        operationId: "grantSnapshotDownload", "x-min-role": "admin",
        tags,
        summary: "Issue a 5-minute snapshot_export token for this snapshot",
        params: snapshotParams,
        response: { 200: downloadGrantAnswer.extend({ snapshot_id: z.string() }), ...errorResponses(404) },
      },
    },
    async (req) => backups.snapshotDownload(req.params.snapshot_id),
  );

  app.get(
    "/api/v1/backups/export/:snapshot_id",
    {
      config: { auth: "public" },
      schema: {
        operationId: "downloadSnapshot", "x-min-role": "admin",
        tags,
        summary: "Download a snapshot zip with a snapshot_export download token or an admin session",
        security: [],
        params: snapshotParams,
        querystring: downloadQuery,
        response: { 200: z.any().describe("the snapshot zip (application/zip)"), ...errorResponses(403, 404) },
      },
    },
    async (req, reply) => {
      const id = req.params.snapshot_id;
      // The credential first: an unauthenticated caller learns nothing about which snapshots exist.
      await authorizeDownload(req, req.query.download_token, "snapshot_export", id);
      return sendZip(reply, await backups.snapshotFile(id));
    },
  );

  app.post(
    "/api/v1/tools/download/config-bulk/package",
    {
      schema: {
        operationId: "buildConfigPackage", "x-min-role": "admin",
        tags,
        summary: "Create the config bulk package (all configs, or config_ids), replacing the previous one, with a 5-minute download token",
        body: bulkPackageBody,
        response: { 201: downloadGrantAnswer.extend({ package_id: z.string() }), ...errorResponses(404) },
      },
    },
    async (req, reply) => reply.status(201).send(await backups.createBulkPackage(req.body?.config_ids)),
  );

  app.get(
    "/api/v1/tools/download/config-bulk/package/:package_id",
    {
      config: { auth: "public" },
      schema: {
        operationId: "downloadConfigPackage", "x-min-role": "admin",
        tags,
        summary: "Download the current config bulk package with a config_bulk_package download token or an admin session",
        security: [],
        params: packageParams,
        querystring: downloadQuery,
        response: { 200: z.any().describe("the package zip (application/zip)"), ...errorResponses(403, 404) },
      },
    },
    async (req, reply) => {
      const id = req.params.package_id;
      await authorizeDownload(req, req.query.download_token, "config_bulk_package", id);
      return sendZip(reply, await backups.packageFile(id));
    },
  );
}
