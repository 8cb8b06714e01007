import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { HEARTBEAT_INTERVAL_MS } from "../src/agent/agent.js";
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

test("spec §6.4 rule 7, §8: the online TTL must exceed the agent's heartbeat interval: SVC_ONLINE_TTL_S <= 1800 is refused in one line, 1801 is taken, the default is 45 minutes", () => {
  const heartbeatS = HEARTBEAT_INTERVAL_MS / 1000;
  assert.equal(heartbeatS, 1800, "the agent's heartbeat interval (its real timer is counted in test/control/timing-proofs.test.ts)");
  for (const value of [String(heartbeatS), "1799", "60", "1"]) {
    assert.throws(
      () => loadSettings({ SVC_ONLINE_TTL_S: value }),
      (err: unknown) =>
        err instanceof SettingsError &&
        /^invalid setting SVC_ONLINE_TTL_S: must exceed the 30-minute heartbeat interval/.test(err.message) &&
        !err.message.includes("\n"),
      `SVC_ONLINE_TTL_S=${value}`,
    );
  }
  assert.equal(loadSettings({ SVC_ONLINE_TTL_S: String(heartbeatS + 1) }).onlineTtlMs, (heartbeatS + 1) * 1000);
  assert.equal(loadSettings({}).onlineTtlMs, 45 * 60 * 1000);
  assert.ok(loadSettings({}).onlineTtlMs > HEARTBEAT_INTERVAL_MS);
});

test("spec §6.4 rule 7: the service refuses to start with SVC_ONLINE_TTL_S=1800: exit 2 and one line on stderr", () => {
  const run = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: { ...process.env, SVC_ONLINE_TTL_S: "1800" },
    encoding: "utf8",
    timeout: 30_000,
  });
  assert.equal(run.status, 2, run.stderr);
  assert.equal(run.stderr.trim().split("\n").length, 1, run.stderr);
  assert.match(run.stderr, /^svc: invalid setting SVC_ONLINE_TTL_S: must exceed the 30-minute heartbeat interval \(spec §6\.4 rule 7\)$/m);
});

test("spec §2.5, §8: the bind token is valid 5 minutes by default", () => {
  assert.equal(loadSettings({}).bindTokenTtlMs, 5 * 60 * 1000);
});
