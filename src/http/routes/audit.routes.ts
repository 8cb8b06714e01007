import { Readable } from "node:stream";
import { z } from "zod";
import { auditFilterQuery, auditListAnswer, auditListQuery, auditVerifyAnswer } from "../../protocol/audit.schema.js";
import type { AuditService } from "../../services/audit.service.js";
import type { App } from "../route-kit.js";
import { errorResponses } from "../schemas.js";

/**
 * The audit log (README "Audit log"; DESIGN §5): list, verify, export. Reading it needs `admin`:
 * who did what, and from which address, is about people, not the fleet, so viewers and
 * operators see the fleet's state but not each other's actions.
 */
export async function auditRoutes(app: App, opts: { audit: AuditService }): Promise<void> {
  const tags = ["audit"];
  const { audit } = opts;

  app.get(
    "/api/v1/audit",
    {
      schema: {
        operationId: "listAuditEntries", "x-min-role": "admin",
        tags,
        summary: "Audit entries, newest first, filtered by actor, action (or area: `node.`), target, outcome and time",
        querystring: auditListQuery,
        response: { 200: auditListAnswer, ...errorResponses() },
      },
    },
    async (req) => {
      const { limit, cursor, ...filter } = req.query;
      return audit.list(filter, { limit, cursor });
    },
  );

  app.get(
    "/api/v1/audit/verify",
    {
      schema: {
        operationId: "verifyAuditLog", "x-min-role": "admin",
        tags,
        summary: "Recompute the hash chain from the retention boundary: ok, rows checked, and the first entry that does not match",
        response: { 200: auditVerifyAnswer, ...errorResponses() },
      },
    },
    async () => audit.verify(),
  );

  app.get(
    "/api/v1/audit/export",
    {
      schema: {
        operationId: "exportAuditLog", "x-min-role": "admin",
        tags,
        summary: "Every matching entry in chain order (oldest first), one JSON object per line (NDJSON), streamed",
        querystring: auditFilterQuery,
        response: { 200: z.any().describe("application/x-ndjson: one audit entry per line"), ...errorResponses() },
      },
    },
    async (req, reply) => {
      return reply
        .type("application/x-ndjson; charset=utf-8")
        .header("content-disposition", 'attachment; filename="audit.ndjson"')
        .send(Readable.from(audit.exportLines(req.query)));
    },
  );
}
