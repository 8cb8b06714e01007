import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { AppError, isAppError } from "../../errors.js";
import { roleAtLeast, type Role } from "../../protocol/roles.js";
import { ID_PATTERN } from "../../protocol/ids.js";
import { newSnapshotPassphrase } from "../../protocol/rest.schema.js";
import type { AuthService } from "../../services/auth.service.js";
import type { BackupsService } from "../../services/backups.service.js";
import type { ControlService } from "../../services/control.service.js";
import type { MeshService } from "../../services/mesh.service.js";
import { VERSION } from "../../lib/version.js";
import type { App } from "../route-kit.js";
import { noteAudit, type AuditNote } from "../audit.hook.js";
import { summarizeChanges } from "../../services/audit-changes.js";
import { errorResponses } from "../schemas.js";

export interface McpRoutesOptions {
  backups: BackupsService;
  mesh: MeshService;
  control: ControlService;
  auth: AuthService;
  /**
   * `{base_url}` now, without trailing slash (src/services/public-url.service.ts): download URLs
   * handed to MCP clients start with it.
   */
  publicUrl: () => string;
}

const idSchema = z.string().regex(ID_PATTERN, "must match ^[a-z0-9][a-z0-9_-]{0,63}$");

/** A JSON-RPC 2.0 message as the MCP transport answers it (documentation only). */
const jsonRpcMessage = z.looseObject({ jsonrpc: z.literal("2.0") });
/** The JSON-RPC error the refused methods answer. */
const jsonRpcError = z.object({
  jsonrpc: z.literal("2.0"),
  error: z.object({ code: z.number().int(), message: z.string() }),
  id: z.null(),
});

/**
 * The MCP server at `/api/v1/mcp`, alias `/mcp` (spec §4 rule 9): Streamable HTTP in stateless mode, a fresh server
 * and transport per request, JSON answers (no SSE stream). The app's admin hook guards it like
 * every non-public route: the MCP client sends `Authorization: Bearer <admin token>`.
 *
 * Tools:
 * - `write_export_snapshot` `{passphrase?}`: takes a snapshot (encrypted with the passphrase
 *   when given) and answers `{snapshot_id, download_url, expires_at}`, a `snapshot_export` URL
 *   valid 5 minutes; never the file's contents.
 * - `list_configs` (read-only): the configs.
 * - `get_node_status` `{config_id, node_id}` (read-only): the node's endpoint status.
 */
export async function mcpRoutes(app: App, opts: McpRoutesOptions): Promise<void> {
  const tags = ["mcp"];

  const handle = async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    // The hook set the caller (this route is not public): tools check their own minimum role.
    const server = buildMcpServer(opts, req.principal?.role ?? "viewer", (note) => noteAudit(req, note));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.raw.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    reply.hijack();
    try {
      await transport.handleRequest(req.raw, reply.raw, req.body);
    } catch (err) {
      req.log.error({ err }, "MCP request failed");
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { "content-type": "application/json" });
        reply.raw.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: "Internal error" }, id: null }));
      }
    }
  };

  // Stateless: no server-initiated stream to GET and no session to DELETE.
  const notAllowed = async (_req: unknown, reply: FastifyReply) =>
    reply
      .status(405)
      .header("allow", "POST")
      .send({ jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: this MCP endpoint is stateless; use POST." }, id: null });

  // `/api/v1/mcp` is the endpoint (DESIGN §5, spec §9 rule 1); `/mcp`, where it lived before,
  // stays as an alias for configured MCP clients and is left out of the OpenAPI document.
  for (const [path, hide] of [
    ["/api/v1/mcp", false],
    ["/mcp", true],
  ] as const) {
    app.post(
      path,
      {
        schema: {
          operationId: "callMcp", "x-min-role": "viewer",
          hide,
          tags,
          summary: "MCP Streamable HTTP endpoint (JSON-RPC; stateless): tools write_export_snapshot, list_configs, get_node_status",
          // The transport writes the answer itself (the reply is hijacked): these document it, the
          // serializer never sees a 200. Errors before the transport runs are the API's own.
          response: { 200: jsonRpcMessage.describe("the JSON-RPC answer"), ...errorResponses() },
        },
      },
      handle,
    );
    const refused = { 405: jsonRpcError.describe("method not allowed: the endpoint is stateless, use POST"), ...errorResponses() };
    app.get(path, { schema: { operationId: "openMcpStream", "x-min-role": "viewer", hide, tags, summary: "Not allowed (stateless MCP endpoint): 405", response: refused } }, notAllowed);
    app.delete(path, { schema: { operationId: "endMcpSession", "x-min-role": "viewer", hide, tags, summary: "Not allowed (stateless MCP endpoint): 405", response: refused } }, notAllowed);
  }
}

/**
 * A new MCP server with the service's tools for a caller of `role`: the read-only tools need
 * `viewer` (the route's minimum), `write_export_snapshot` `admin` (a snapshot holds every
 * private key), refused with `FORBIDDEN` as a tool error.
 */
export function buildMcpServer(opts: McpRoutesOptions, role: Role, audit: (note: AuditNote) => void = () => undefined): McpServer {
  const { mesh, control } = opts;
  const server = new McpServer({ name: "svc-mesh-control", version: VERSION }, { capabilities: { tools: {} } });
  registerExportTool(server, opts, role, audit);

  server.registerTool(
    "list_configs",
    {
      title: "List configs",
      description: "Lists the mesh configs (id, name, tunnel protocol, network).",
      outputSchema: {
        configs: z.array(
          z.looseObject({ config_id: z.string(), name: z.string(), tunnel_protocol: z.string(), network_cidr: z.string() }),
        ),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async () => tool(async () => ({ configs: await mesh.listConfigs() })),
  );

  server.registerTool(
    "get_node_status",
    {
      title: "Get a node's endpoint status",
      description: "The endpoint status of one node: mode, client presence, runtime state, config sync state.",
      inputSchema: { config_id: idSchema, node_id: idSchema },
      outputSchema: {
        status: z.looseObject({ config_id: z.string(), node_id: z.string(), client_presence_state: z.string(), runtime_state: z.string() }),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ config_id, node_id }) => tool(async () => ({ status: await control.endpointStatus(config_id, node_id) })),
  );

  return server;
}

/** `write_export_snapshot` (admin and owner), recorded in the audit log by its argument names (the passphrase never). */
function registerExportTool(server: McpServer, opts: McpRoutesOptions, role: Role, audit: (note: AuditNote) => void): void {
  const { backups, publicUrl } = opts;
  server.registerTool(
    "write_export_snapshot",
    {
      title: "Write an export snapshot",
      description:
        "Takes a snapshot of the service's database and returns a download URL for it, valid 5 minutes " +
        "(spec §4 rule 9). The snapshot's contents are not returned. With a passphrase the stored file is encrypted " +
        "(scrypt, AES-256-GCM), as POST /api/v1/backups does: a snapshot holds every node's private key.",
      inputSchema: { passphrase: newSnapshotPassphrase.optional().describe("encrypts the snapshot file; at least 12 characters; never stored or logged") },
      outputSchema: { snapshot_id: z.string(), download_url: z.string(), expires_at: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ passphrase }) =>
      tool(async () => {
        // The audit log records the write tool (by the argument names: the passphrase never).
        const noted: AuditNote = { action: "mcp.write_export_snapshot", changes: JSON.stringify(summarizeChanges({ passphrase })) };
        audit({ ...noted, outcome: "failed" });
        if (!roleAtLeast(role, "admin")) {
          audit({ ...noted, outcome: "denied" });
          throw new AppError("FORBIDDEN", `write_export_snapshot needs the admin role or above; the caller is ${role}`);
        }
        const entry = await backups.createSnapshot(passphrase);
        audit({ ...noted, outcome: "ok", target: { type: "snapshot", id: entry.snapshot_id } });
        const grant = await backups.snapshotDownload(entry.snapshot_id);
        return {
          snapshot_id: entry.snapshot_id,
          download_url: `${publicUrl()}${grant.download_path}`,
          expires_at: grant.download_token_expires_at,
        };
      }),
  );
}

/** Runs a tool body: its result as structured content and JSON text; a service error as a tool error. */
async function tool(fn: () => Promise<Record<string, unknown>>): Promise<CallToolResult> {
  try {
    const result = await fn();
    return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
  } catch (err) {
    if (!isAppError(err)) throw err;
    return { isError: true, content: [{ type: "text", text: `${err.code}: ${err.message}` }] };
  }
}
