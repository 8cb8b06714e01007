/**
 * No secret ever reaches the audit log (README "Audit log"; DESIGN §3 "never a secret"): every
 * route of the OpenAPI document is called with bodies, query strings and headers carrying known
 * secret strings (in every field whose value the log does not keep, and in extra fields named
 * like credentials), and the real secret-bearing flows run end to end: sign-in passwords, a
 * user's new password, session tokens, a personal access token's secret, a bind token and the
 * broker password its redemption answers, a node's private key, download tokens and snapshot
 * passphrases (REST and MCP). Then every column of every audit row is searched for each of them,
 * and every state-changing operation is shown to have been recorded at least once.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { AUDIT_RULES } from "../../src/http/audit.hook.js";
import { RECORDED_VALUES } from "../../src/services/audit-changes.js";
import { sqliteOf } from "../../src/store/connection.js";
import { ADMIN_PASSWORD, createConfig, createNode, startHarness, type Harness } from "./harness.js";

/** Every secret the test handed in or was answered; none may appear in the audit table. */
const secrets = new Set<string>();
function secret(kind: string): string {
  const s = `${kind}-${randomBytes(12).toString("hex")}`;
  secrets.add(s);
  return s;
}
function keep(value: unknown): void {
  if (typeof value === "string" && value.length >= 8) secrets.add(value);
}

interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  minimum?: number;
  anyOf?: JsonSchema[];
}

/** A body for a JSON schema: secrets in every string the log does not keep the value of. */
function bodyFor(schema: JsonSchema | undefined, field = ""): unknown {
  if (schema === undefined) return { password: secret("pw") };
  if (schema.enum !== undefined) return schema.enum[0];
  if (schema.anyOf !== undefined) return bodyFor(schema.anyOf.find((s) => s.type !== "null"), field);
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (type === "object" || schema.properties !== undefined) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(schema.properties ?? {})) out[k] = bodyFor(v, k);
    return out;
  }
  if (type === "array") return [bodyFor(schema.items, field)];
  if (type === "boolean") return true;
  if (type === "integer" || type === "number") return schema.minimum ?? 1;
  return RECORDED_VALUES.has(field) ? `probe-${field}` : secret(field || "value");
}

/** Credential-named fields added to every body (a strict body refuses them: recorded as failed, by name). */
function extras(): Record<string, string> {
  return { password: secret("password"), token: secret("token"), private_key: secret("pk"), passphrase: secret("pp"), bind_token: secret("bt"), secret: secret("whsec") };
}

async function login(h: Harness, username: string, password: string): Promise<string> {
  const res = await h.req("POST", "/api/v1/auth/login", { username, password }, { auth: false });
  assert.equal(res.status, 200, res.text);
  keep(res.json.access_token);
  return res.json.access_token;
}

/** The real flows that carry secrets, each recorded. */
async function secretFlows(h: Harness, configId: string): Promise<void> {
  // Sign-ins: a wrong password, a user's password, a changed password.
  assert.equal((await h.req("POST", "/api/v1/auth/login", { password: secret("wrong") }, { auth: false })).status, 401);
  const first = secret("userpw");
  const user = await h.req("POST", "/api/v1/users", { username: "alice", password: first, role: "admin" });
  assert.equal(user.status, 201, user.text);
  await login(h, "alice", first);
  assert.equal((await h.req("PATCH", `/api/v1/users/${user.json.user_id}`, { password: secret("newpw") })).status, 200);
  // A personal access token: its secret, once; then used for a write.
  const pat = await h.req("POST", "/api/v1/tokens", { name: "ci", role: "admin", expires_in_days: 1 });
  keep(pat.json.token);
  assert.equal((await h.req("POST", "/api/v1/configs", { name: "by-token", tunnel_protocol: "wireguard", network_cidr: "10.9.0.0/24" }, { auth: pat.json.token })).status, 201);
  // A dynamic node's bind token and the broker password its redemption answers.
  const dyn = await createNode(h, configId, { name: "dyn", mode: "dynamic", public_address: "192.0.2.9" });
  const cmd = await h.req("POST", `/api/v1/configs/${configId}/nodes/${dyn.node_id}/bind-command`);
  const bindToken = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  keep(bindToken);
  const bound = await h.req("POST", "/api/client/bind", { bind_token: bindToken, server_url: "http://127.0.0.1", client_version: "1.0.0", platform: "linux", hostname: "h" }, { auth: false });
  assert.equal(bound.status, 200, bound.text);
  keep(bound.json.mqtt.password);
  // A node's private key (in its config text), and a download token for it.
  const node = await createNode(h, configId, { name: "static-1", public_address: "192.0.2.10" });
  const text = (await h.req("GET", `/api/v1/configs/${configId}/nodes/${node.node_id}/config`)).json.config_text as string;
  keep(/PrivateKey = (\S+)/.exec(text)?.[1]);
  const grant = await h.req("POST", `/api/v1/configs/${configId}/nodes/${node.node_id}/download-token`);
  keep(grant.json.download_token ?? grant.json.token);
  assert.equal((await h.req("PATCH", `/api/v1/configs/${configId}/nodes/${node.node_id}`, { private_key: secret("pk") })).status, 400);
  await snapshotFlows(h);
}

/** Snapshot passphrases: an encrypted snapshot, its restore, its import header, the MCP tool. */
async function snapshotFlows(h: Harness): Promise<void> {
  const passphrase = secret("passphrase");
  const snap = await h.req("POST", "/api/v1/backups", { passphrase });
  assert.equal(snap.status, 201, snap.text);
  assert.equal((await h.req("POST", `/api/v1/backups/${snap.json.snapshot_id}/restore`, { passphrase: secret("wrongpp") })).status >= 400, true);
  assert.equal((await h.req("POST", `/api/v1/backups/${snap.json.snapshot_id}/restore`, { passphrase })).status, 200);
  const dl = await h.req("POST", `/api/v1/backups/${snap.json.snapshot_id}/download-token`);
  keep(dl.json.download_token);
  const zip = await h.server.app.inject({ method: "GET", url: dl.json.download_path ?? `/api/v1/backups/export/${snap.json.snapshot_id}?download_token=${dl.json.download_token}` });
  assert.equal(zip.statusCode, 200);
  const imported = await h.server.app.inject({
    method: "POST",
    url: "/api/v1/backups/import",
    headers: { authorization: `Bearer ${h.token}`, "content-type": "application/zip", "x-snapshot-passphrase": encodeURIComponent(passphrase) },
    payload: zip.rawPayload,
  });
  assert.equal(imported.statusCode, 201, imported.body);
  const mcp = await h.req(
    "POST",
    "/api/v1/mcp",
    { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "write_export_snapshot", arguments: { passphrase: secret("mcppp") } } },
    { headers: { accept: "application/json, text/event-stream" } },
  );
  assert.equal(mcp.status, 200, mcp.text);
  assert.equal(mcp.json.result?.isError, undefined, mcp.text);
}

interface Route {
  method: string;
  path: string;
  operationId: string;
  body: JsonSchema | undefined;
  hasBody: boolean;
}

async function routes(h: Harness): Promise<Route[]> {
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json;
  const out: Route[] = [];
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, Record<string, any>>>)) {
    for (const [method, op] of Object.entries(ops)) {
      const body = op.requestBody?.content?.["application/json"]?.schema as JsonSchema | undefined;
      out.push({ method: method.toUpperCase(), path, operationId: op.operationId, body, hasBody: op.requestBody !== undefined });
    }
  }
  return out;
}

test("no secret (password, session or access token, bind token, broker password, private key, download token, passphrase) appears in any column of any audit row, for every route and every action", async (t) => {
  // The release host is a closed local port: a remote_release lookup fails at once, offline.
  const h = await startHarness(t, { authRateLimitMax: 100_000, sseMaxStreamsPerSession: 0, releaseApiUrl: "http://127.0.0.1:9" });
  keep(h.token);
  secrets.add(ADMIN_PASSWORD);
  const config = await createConfig(h);
  const node = await createNode(h, config.config_id, { public_address: "192.0.2.20" });
  await secretFlows(h, config.config_id);
  const ids: Record<string, string> = { config_id: config.config_id, node_id: node.node_id };
  for (const r of await routes(h)) {
    // Logging out ends the session it is sent with: a fresh one, whose token is a secret too.
    const bearer = r.operationId === "logout" ? await login(h, "admin", ADMIN_PASSWORD) : h.token;
    // Deletes and restores get unknown ids (the fleet stays for the routes after them).
    const real = r.method !== "DELETE" && r.operationId !== "restoreSnapshot";
    const url = r.path.replace(/\{(\w+)\}/g, (_, name: string) => (real ? ids[name] : undefined) ?? `${name.split("_")[0]}-unknown`);
    const query = `?token=${secret("q")}&download_token=${secret("dq")}`;
    const headers = { "x-snapshot-passphrase": secret("hdr"), "x-svc-internal-key": secret("ik") };
    for (const body of r.hasBody ? [bodyFor(r.body), { ...(bodyFor(r.body) as object), ...extras() }] : [undefined]) {
      const res = await h.req(r.method, `${url}${query}`, body, { auth: bearer, headers });
      assert.notEqual(res.status, 500, `${r.method} ${r.path}: ${res.text.slice(0, 200)}`);
    }
  }
  await new Promise((r) => setImmediate(r));
  await h.server.audit.flushed();

  const rows = sqliteOf(h.server.store).prepare("SELECT * FROM audit_log ORDER BY audit_id").all() as Array<Record<string, unknown>>;
  assert.ok(rows.length > 60, `${rows.length} rows`);
  const leaks: string[] = [];
  for (const row of rows) {
    for (const [column, value] of Object.entries(row)) {
      if (typeof value !== "string") continue;
      for (const s of secrets) if (value.includes(s)) leaks.push(`audit_id ${String(row.audit_id)} ${column}: ${s.slice(0, 12)}…`);
    }
  }
  assert.deepEqual(leaks, [], `${secrets.size} secrets searched`);
  // Every action of the table was recorded at least once (the broker's authorization queries never are).
  const recorded = new Set(rows.map((r) => String(r.action)));
  const missing = Object.entries(AUDIT_RULES)
    .filter(([, rule]) => rule.never !== true && typeof rule.action === "string" && rule.action !== "mcp.call")
    .map(([, rule]) => rule.action as string)
    .filter((a) => !recorded.has(a));
  assert.deepEqual(missing, []);
  for (const a of ["control.start", "mcp.write_export_snapshot", "user.update", "snapshot.restore", "node.bind"]) assert.ok(recorded.has(a), a);
});
