import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { loadSettings, SettingsError } from "../src/config.js";

test("settings have the DESIGN §6 defaults", () => {
  const s = loadSettings({});
  assert.equal(s.httpHost, "0.0.0.0");
  assert.equal(s.httpPort, 8080);
  assert.equal(s.publicUrl, "http://localhost:8080");
  assert.equal(s.dataDir, "./data");
  assert.equal(s.mqttEnabled, true);
  assert.equal(s.adminPassword, undefined, "secrets have no defaults");
  assert.equal(s.downloadTokenTtlMs, 5 * 60 * 1000, "spec §8: 5 minutes");
  assert.ok(Object.isFrozen(s));
});

test("settings parse booleans, ports and URLs; empty values count as unset", () => {
  const s = loadSettings({
    SVC_ENABLE_MQTT_SERVICES: "false",
    SVC_HTTP_PORT: "9000",
    SVC_PUBLIC_URL: "https://mesh.example.com/",
    SVC_ADMIN_PASSWORD: "",
  });
  assert.equal(s.mqttEnabled, false);
  assert.equal(s.httpPort, 9000);
  assert.equal(s.publicUrl, "https://mesh.example.com");
  assert.equal(s.adminPassword, undefined);
});

test("an invalid setting throws one line naming the variable and the rule", () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ SVC_HTTP_PORT: "70000" }, /^invalid setting SVC_HTTP_PORT: must be 0\.\.65535$/],
    [{ SVC_HTTP_PORT: "eighty" }, /^invalid setting SVC_HTTP_PORT: /],
    [{ SVC_ENABLE_MQTT_SERVICES: "maybe" }, /^invalid setting SVC_ENABLE_MQTT_SERVICES: /],
    [{ SVC_PUBLIC_URL: "ftp://x" }, /^invalid setting SVC_PUBLIC_URL: must be an http\(s\) URL$/],
    [{ SVC_ADMIN_PASSWORD: "short" }, /^invalid setting SVC_ADMIN_PASSWORD: must be at least 8 characters$/],
    [{ SVC_LOG_LEVEL: "loud" }, /^invalid setting SVC_LOG_LEVEL: /],
  ];
  for (const [env, message] of cases) {
    assert.throws(() => loadSettings(env), (err: unknown) => err instanceof SettingsError && message.test(err.message) && !err.message.includes("\n"));
  }
});

test("the service refuses to start on an invalid setting: exit 2 and one line on stderr", () => {
  const run = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: { ...process.env, SVC_HTTP_PORT: "-1" },
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(run.status, 2);
  assert.equal(run.stderr.trim().split("\n").length, 1);
  assert.match(run.stderr, /^svc: invalid setting SVC_HTTP_PORT: /);
});
