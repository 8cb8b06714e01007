/**
 * The console's REST client against the server it talks to: every operation the console declares
 * (`web/src/api/endpoints.ts`) is in the OpenAPI document the server builds, under the same
 * operationId, method and path, and the answer, body and query schemas the console parses and
 * sends with have the shape the route documents (fields, required fields, types, enums). A route
 * that is renamed, moved or changes its answer fails here, not in a browser.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { z } from "zod";
import { ENDPOINTS, operationUrl, type Endpoint } from "../../web/src/api/endpoints.js";
import { startHarness } from "../http/harness.js";

type Json = Record<string, unknown>;

interface Operation {
  operationId?: string;
  "x-min-role"?: string;
  parameters?: Array<{ in: string; name: string; required?: boolean; schema: Json }>;
  requestBody?: { content: Record<string, { schema: Json }> };
  responses: Record<string, { content?: Record<string, { schema: Json }> }>;
}

/** Inlines `$ref`s to `#/components/schemas/…` or `#/$defs/…` (the schemas here have no cycles). */
function deref(schema: unknown, defs: Record<string, unknown>, depth = 0): unknown {
  assert.ok(depth < 64, "schema nesting too deep (a cycle?)");
  if (Array.isArray(schema)) return schema.map((s) => deref(s, defs, depth + 1));
  if (schema === null || typeof schema !== "object") return schema;
  const ref = (schema as Json)["$ref"];
  if (typeof ref === "string") {
    const name = ref.replace(/^#\/(components\/schemas|\$defs)\//, "");
    assert.ok(name in defs, `unresolved ${ref}`);
    return deref(defs[name], defs, depth + 1);
  }
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, deref(v, defs, depth + 1)]));
}

/**
 * What a client depends on in a JSON schema: object fields and which are required, item shapes,
 * the alternatives of a union (nullable included), enum values and constants, primitive types.
 * Descriptions, formats, bounds and patterns are the server's to check and are left out.
 */
function shape(schema: unknown): unknown {
  if (schema === null || typeof schema !== "object") return schema;
  const s = schema as Json;
  const alternatives = [...((s["anyOf"] as unknown[]) ?? []), ...((s["oneOf"] as unknown[]) ?? [])];
  if (Array.isArray(s["type"])) alternatives.push(...(s["type"] as string[]).map((t) => ({ ...s, type: t })));
  if (alternatives.length > 0) {
    const flat = alternatives.map(shape).flatMap((a) => (Array.isArray(a) ? a : [a]));
    return [...new Map(flat.map((a) => [JSON.stringify(a), a])).values()].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  }
  if (s["const"] !== undefined) return { enum: [String(s["const"])] };
  if (Array.isArray(s["enum"])) return { enum: [...(s["enum"] as unknown[])].map(String).sort() };
  if (s["type"] === "object" || s["properties"] !== undefined) {
    const props = (s["properties"] ?? {}) as Record<string, unknown>;
    return {
      object: Object.fromEntries(Object.keys(props).sort().map((k) => [k, shape(props[k])])),
      required: [...((s["required"] as string[]) ?? [])].sort(),
      ...(typeof s["additionalProperties"] === "object" ? { values: shape(s["additionalProperties"]) } : {}),
    };
  }
  if (s["type"] === "array") return { array: shape(s["items"]) };
  if (s["type"] === "integer") return "number";
  return s["type"] ?? "any";
}

function clientShape(schema: z.ZodType, io: "input" | "output"): unknown {
  const json = z.toJSONSchema(schema, { io, target: "draft-2020-12", unrepresentable: "any" }) as Json;
  return shape(deref(json, (json["$defs"] ?? {}) as Record<string, unknown>));
}

test("every operation the console calls is in the OpenAPI document with the same id, method, path, minimum role and schemas", async (t) => {
  const h = await startHarness(t);
  const doc = (await h.req("GET", "/api/v1/openapi.json")).json as { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, unknown> } };
  const defs = doc.components.schemas;
  const byId = new Map<string, { method: string; path: string; op: Operation }>();
  for (const [path, ops] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(ops)) if (op.operationId) byId.set(op.operationId, { method, path, op });

  for (const [id, endpoint] of Object.entries(ENDPOINTS) as Array<[string, Endpoint]>) {
    const found = byId.get(id);
    assert.ok(found, `${id}: no operation with this id in the document`);
    assert.equal(`${found.method.toUpperCase()} ${found.path}`, `${endpoint.method} ${endpoint.path}`, `${id}: method and path`);
    // The console offers a control only to the roles the route lets through: its minimum role is the route's.
    assert.equal(endpoint.minRole, found.op["x-min-role"] ?? null, `${id}: the minimum role (x-min-role)`);
    const success = Object.entries(found.op.responses).filter(([status]) => status.startsWith("2"));
    assert.equal(success.length, 1, `${id}: one success answer`);
    const [status, answer] = success[0] as [string, { content?: Record<string, { schema: Json }> }];
    if (endpoint.response === null) {
      assert.equal(status, "204", `${id}: an answer without a body is a 204`);
    } else {
      const documented = answer.content?.["application/json"]?.schema;
      assert.ok(documented, `${id}: a JSON answer`);
      assert.deepEqual(clientShape(endpoint.response, "output"), shape(deref(documented, defs)), `${id}: the answer's shape`);
    }
    if (endpoint.body !== undefined) {
      const documented = found.op.requestBody?.content["application/json"]?.schema;
      assert.ok(documented, `${id}: a JSON body`);
      assert.deepEqual(clientShape(endpoint.body, "input"), shape(deref(documented, defs)), `${id}: the body's shape`);
    }
    const documentedQuery = (found.op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name).sort();
    const clientQuery = endpoint.query === undefined ? [] : Object.keys((clientShape(endpoint.query, "input") as { object: Json }).object).sort();
    assert.deepEqual(clientQuery, documentedQuery, `${id}: the query's fields`);
    if (endpoint.headers !== undefined) {
      const documentedHeaders = (found.op.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name.toLowerCase()).sort();
      const clientHeaders = Object.keys((clientShape(endpoint.headers, "input") as { object: Json }).object).sort();
      assert.deepEqual(clientHeaders, documentedHeaders, `${id}: the headers it sends`);
    }
  }
});

test("the client fills path parameters encoded and sends only the query fields that are set", () => {
  assert.equal(
    operationUrl(ENDPOINTS.listNodes, { params: { config_id: "c 1/x" }, query: { q: "", presence: "online", limit: 100, cursor: undefined } }),
    "/api/v1/configs/c%201%2Fx/nodes?presence=online&limit=100",
  );
  assert.equal(operationUrl(ENDPOINTS.getSystemStatus, {}), "/api/v1/system/status");
});
