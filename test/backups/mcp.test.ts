import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SEALED_MAGIC } from "../../src/services/backups/snapshot-crypto.js";
import { createConfig, createNode } from "../http/harness.js";
import { FIVE_MINUTES, assertHttpError, startBackupsHarness, unzip, type BackupsHarness } from "./harness.js";

/** The SDK's own client against the listening service's /api/v1/mcp (or the `/mcp` alias). */
async function mcpClient(
  h: BackupsHarness,
  bearer: string | null,
  path = "/api/v1/mcp",
): Promise<{ client: Client; connected: Promise<void> }> {
  const client = new Client({ name: "svc-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${h.baseUrl}${path}`), {
    requestInit: bearer === null ? {} : { headers: { authorization: `Bearer ${bearer}` } },
  });
  return { client, connected: client.connect(transport) };
}

test("spec §4 rule 9, §8: write_export_snapshot (through the MCP SDK client) returns a 5-minute download URL, not the contents; the URL downloads the snapshot", async (t) => {
  const h = await startBackupsHarness(t);
  const config = await createConfig(h, { name: "office" });
  const node = await createNode(h, config.config_id, { mode: "dynamic" });
  const { client, connected } = await mcpClient(h, h.token);
  await connected;
  t.after(() => client.close());

  const tools = (await client.listTools()).tools;
  assert.deepEqual(tools.map((x) => x.name).sort(), ["get_node_status", "list_configs", "write_export_snapshot"]);
  assert.equal(tools.find((x) => x.name === "list_configs")?.annotations?.readOnlyHint, true);
  assert.equal(tools.find((x) => x.name === "get_node_status")?.annotations?.readOnlyHint, true);

  const result = await client.callTool({ name: "write_export_snapshot", arguments: {} });
  assert.notEqual(result.isError, true, JSON.stringify(result));
  const out = result.structuredContent as { snapshot_id: string; download_url: string; expires_at: string };
  assert.deepEqual(Object.keys(out).sort(), ["download_url", "expires_at", "snapshot_id"]);
  assert.ok(out.download_url.startsWith(`${h.baseUrl}/api/v1/backups/export/${out.snapshot_id}?download_token=`), out.download_url);
  assert.equal(out.expires_at, new Date(h.clock.now() + FIVE_MINUTES).toISOString());
  // Only the URL travels: the answer is small and holds no database bytes.
  const text = JSON.stringify(result);
  assert.ok(text.length < 2048, `${text.length} bytes`);
  assert.ok(!text.includes("SQLite format"));
  assert.deepEqual((await h.req("GET", "/api/v1/backups")).json.snapshots.map((s: { snapshot_id: string }) => s.snapshot_id), [out.snapshot_id]);

  // The URL downloads the snapshot without any session.
  const res = await h.http(out.download_url);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/zip");
  const files = await unzip(res.body);
  const manifest = JSON.parse(files.get("manifest.json")!.toString("utf8"));
  assert.equal(manifest.format, 1);
  assert.equal(manifest.db_size_bytes, files.get("svc.db")!.length);
  // ...for 5 minutes.
  h.clock.advance(FIVE_MINUTES);
  assertHttpError(await h.http(out.download_url), "INVALID_DOWNLOAD_TOKEN", "after 5 minutes");

  // Read-only tools.
  const configs = await client.callTool({ name: "list_configs", arguments: {} });
  assert.deepEqual(
    (configs.structuredContent as { configs: Array<{ config_id: string; name: string }> }).configs.map((c) => [c.config_id, c.name]),
    [[config.config_id, "office"]],
  );
  const status = await client.callTool({ name: "get_node_status", arguments: { config_id: config.config_id, node_id: node.node_id } });
  assert.notEqual(status.isError, true, JSON.stringify(status));
  const rest = await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${node.node_id}/endpoint-status`);
  assert.deepEqual((status.structuredContent as { status: unknown }).status, rest.json);
  const unknown = await client.callTool({ name: "get_node_status", arguments: { config_id: config.config_id, node_id: "node-unknown" } });
  assert.equal(unknown.isError, true);
  assert.match(JSON.stringify(unknown.content), /NOT_FOUND/);
  const malformed = await client.callTool({ name: "get_node_status", arguments: { config_id: "../x", node_id: node.node_id } });
  assert.equal(malformed.isError, true);
});

test("spec §4 rule 9: write_export_snapshot with a passphrase stores the snapshot encrypted (a snapshot holds every private key); a short passphrase is refused and writes nothing", async (t) => {
  const h = await startBackupsHarness(t);
  await createConfig(h, { name: "office" });
  const { client, connected } = await mcpClient(h, h.token);
  await connected;
  t.after(() => client.close());

  const short = await client.callTool({ name: "write_export_snapshot", arguments: { passphrase: "too short" } });
  assert.equal(short.isError, true, JSON.stringify(short));
  assert.match(JSON.stringify(short.content), /at least 12 characters/);
  assert.deepEqual((await h.req("GET", "/api/v1/backups")).json.snapshots, [], "nothing written");

  const result = await client.callTool({ name: "write_export_snapshot", arguments: { passphrase: "correct horse battery staple" } });
  assert.notEqual(result.isError, true, JSON.stringify(result));
  const out = result.structuredContent as { snapshot_id: string; download_url: string };
  assert.ok(!JSON.stringify(result).includes("correct horse"), "the passphrase is not echoed");
  const [entry] = (await h.req("GET", "/api/v1/backups")).json.snapshots as Array<{ snapshot_id: string; encrypted: boolean }>;
  assert.deepEqual([entry?.snapshot_id, entry?.encrypted], [out.snapshot_id, true]);
  const res = await h.http(out.download_url);
  assert.equal(res.status, 200);
  assert.ok(res.body.subarray(0, SEALED_MAGIC.length).equals(SEALED_MAGIC), "the download is the encrypted file, not a zip");
});

/** The SDK's transport error for our 401 answer. */
function unauthorized(err: unknown): boolean {
  assert.ok(err instanceof StreamableHTTPError, String(err));
  assert.equal(err.code, 401);
  assert.match(err.message, /UNAUTHORIZED/);
  return true;
}

test("the MCP endpoint needs the admin bearer token: 401 without it, through the SDK client and raw HTTP", async (t) => {
  const h = await startBackupsHarness(t);
  const { client, connected } = await mcpClient(h, null);
  t.after(() => client.close());
  await assert.rejects(connected, unauthorized);
  const { client: wrong, connected: wrongConnected } = await mcpClient(h, "A".repeat(43));
  t.after(() => wrong.close());
  await assert.rejects(wrongConnected, unauthorized);

  const init = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
  };
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  // spec §9 rule 1, DESIGN §5: the endpoint is /api/v1/mcp; /mcp is an alias that behaves the same.
  for (const path of ["/api/v1/mcp", "/mcp"]) {
    assertHttpError(await h.http(path, { method: "POST", body: JSON.stringify(init), headers }), "UNAUTHORIZED", `${path} no bearer`);
    assertHttpError(await h.http(path, { method: "GET" }), "UNAUTHORIZED", `${path} GET without bearer`);
    assertHttpError(await h.http(path, { method: "DELETE" }), "UNAUTHORIZED", `${path} DELETE without bearer`);
  }
  assert.deepEqual((await h.req("GET", "/api/v1/backups")).json, { snapshots: [] }, "nothing was written");

  // With the bearer: stateless JSON answers; GET and DELETE have nothing to serve.
  for (const path of ["/api/v1/mcp", "/mcp"]) {
    const ok = await h.http(path, { method: "POST", body: JSON.stringify(init), headers, bearer: h.token });
    assert.equal(ok.status, 200, `${path}: ${ok.body.toString()}`);
    assert.match(ok.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal(ok.json.result.serverInfo.name, "svc-mesh-control");
    assert.equal(ok.headers.get("mcp-session-id"), null, "stateless: no session");
    assert.equal((await h.http(path, { method: "GET", bearer: h.token })).status, 405);
    assert.equal((await h.http(path, { method: "DELETE", bearer: h.token })).status, 405);
  }
});

test("spec §9 rule 1: the SDK client works through the /mcp alias too, and only /api/v1/mcp is in the OpenAPI document", async (t) => {
  const h = await startBackupsHarness(t);
  const { client, connected } = await mcpClient(h, h.token, "/mcp");
  await connected;
  t.after(() => client.close());
  const configs = await client.callTool({ name: "list_configs", arguments: {} });
  assert.notEqual(configs.isError, true, JSON.stringify(configs));
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  assert.ok(doc.paths["/api/v1/mcp"]?.post, "POST /api/v1/mcp is documented");
  assert.equal(doc.paths["/mcp"], undefined, "the alias is not documented");
});
