/**
 * Alert rules' CRUD (docs/alerts.md "Rules"): the REST contract of src/protocol/alert-rules.schema.ts,
 * unknown channels refused, names unique, a deleted channel leaving every rule it was in (each
 * such rule announced too), each change announced as `alert.rule.updated`.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createChannel, startAlerts } from "./harness.js";

test("rules: create, list, get, patch, delete; unknown channels and taken names refused; a deleted channel leaves its rules", async (t) => {
  const h = await startAlerts(t);
  const published: Array<{ rule_id: string; rule: unknown }> = [];
  const original = h.server.hub.publish.bind(h.server.hub);
  h.server.hub.publish = ((type: string, payload: never) => {
    if (type === "alert.rule.updated") published.push(payload);
    return original(type as never, payload);
  }) as typeof h.server.hub.publish;
  const a = await createChannel(h, { name: "ops", kind: "webhook", url: "http://127.0.0.1:9/hook" });
  const b = await createChannel(h, { name: "pager", kind: "ntfy", url: "http://127.0.0.1:9/topic" });

  const created = await h.req("POST", "/api/v1/alerts/rules", { name: "Edge down", event: "node.offline", for_s: 60, scope: { tag: "edge" }, channel_ids: [a.channel_id, b.channel_id] });
  assert.equal(created.status, 201, created.text);
  const rule = created.json;
  assert.match(rule.rule_id, /^rul-/);
  assert.deepEqual({ ...rule, rule_id: undefined, created_at: undefined, updated_at: undefined }, {
    rule_id: undefined, name: "Edge down", event: "node.offline", for_s: 60, scope: { tag: "edge" }, channel_ids: [a.channel_id, b.channel_id], enabled: true, created_at: undefined, updated_at: undefined,
  });
  const defaults = await h.req("POST", "/api/v1/alerts/rules", { name: "Broker", event: "broker.disconnected", channel_ids: [a.channel_id] });
  assert.equal(defaults.status, 201, defaults.text);
  assert.deepEqual([defaults.json.for_s, defaults.json.scope, defaults.json.enabled], [0, {}, true]);

  const unknown = await h.req("POST", "/api/v1/alerts/rules", { name: "x", event: "node.dropped", channel_ids: ["chn-nope"] });
  assert.equal(unknown.status, 400, unknown.text);
  assert.equal(unknown.json.error.code, "VALIDATION_FAILED");
  assert.match(unknown.json.error.message, /chn-nope/);
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "EDGE DOWN", event: "node.dropped", channel_ids: [a.channel_id] })).status, 409);
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "b2", event: "broker.disconnected", scope: { tag: "edge" }, channel_ids: [a.channel_id] })).status, 400);
  assert.equal((await h.req("POST", "/api/v1/alerts/rules", { name: "no channels", event: "node.dropped", channel_ids: [] })).status, 400);

  const list = await h.req("GET", "/api/v1/alerts/rules");
  assert.deepEqual(list.json.rules.map((r: { name: string }) => r.name), ["Broker", "Edge down"]);
  assert.deepEqual((await h.req("GET", `/api/v1/alerts/rules/${rule.rule_id}`)).json, rule);
  assert.equal((await h.req("GET", "/api/v1/alerts/rules/rul-missing")).status, 404);

  const patched = await h.req("PATCH", `/api/v1/alerts/rules/${rule.rule_id}`, { for_s: 0, enabled: false, channel_ids: [b.channel_id] });
  assert.equal(patched.status, 200, patched.text);
  assert.deepEqual([patched.json.for_s, patched.json.enabled, patched.json.channel_ids, patched.json.scope], [0, false, [b.channel_id], { tag: "edge" }]);
  assert.equal((await h.req("PATCH", `/api/v1/alerts/rules/${rule.rule_id}`, { channel_ids: ["chn-nope"] })).status, 400);
  assert.equal((await h.req("PATCH", `/api/v1/alerts/rules/${rule.rule_id}`, {})).status, 400);

  // A deleted channel leaves every rule it was in.
  assert.equal((await h.req("DELETE", `/api/v1/alerts/channels/${b.channel_id}`)).status, 204);
  assert.deepEqual((await h.req("GET", `/api/v1/alerts/rules/${rule.rule_id}`)).json.channel_ids, []);
  assert.deepEqual((published.at(-1)?.rule as { channel_ids?: string[] } | undefined)?.channel_ids, [], "announced with its channels now");

  assert.equal((await h.req("DELETE", `/api/v1/alerts/rules/${rule.rule_id}`)).status, 204);
  assert.equal((await h.req("DELETE", `/api/v1/alerts/rules/${rule.rule_id}`)).status, 404);
  assert.deepEqual(published.map((p) => [p.rule_id, p.rule === null]), [
    [rule.rule_id, false],
    [defaults.json.rule_id, false],
    [rule.rule_id, false],
    [rule.rule_id, false], // the deleted channel left it
    [rule.rule_id, true],
  ]);
});
