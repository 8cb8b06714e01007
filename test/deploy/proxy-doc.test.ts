import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

/**
 * spec §6.5 "Production reverse proxies must disable response buffering": the shipped deployment
 * has no proxy (docker-compose.yml: backend and EMQX), so the README tells the deployer what to
 * set; the stream's own headers are asserted in test/events/events.routes.test.ts.
 */

test("spec §6.5 proxies: the README tells deployers to disable response buffering for the event stream, naming the path and the settings", () => {
  const readme = readFileSync(join(import.meta.dirname, "..", "..", "README.md"), "utf8");
  const bullet = /^- \*\*Reverse proxy\*\*[\s\S]*?(?=^- \*\*|^## )/m.exec(readme)?.[0];
  assert.ok(bullet, "a Reverse proxy bullet in the README");
  assert.match(bullet, /GET \/api\/v1\/events\/stream/);
  assert.match(bullet, /X-Accel-Buffering: no/);
  assert.match(bullet, /proxy_buffering off;/);
  assert.match(bullet, /flush_interval -1/);
});
