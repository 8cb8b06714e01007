/**
 * The alert settings (docs/alerts.md "Settings"): the retry schedule in seconds, the disable
 * window in hours, the private-targets switch, the concurrency, the group window; a bad value stops start-up in one line.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { loadSettings, SettingsError } from "../../src/config.js";

test("alert settings: Standard Webhooks' schedule and 24 h by default; SVC_ALERTS_RETRY_SCHEDULE_S=1,2,5 overrides; bad values refused by name", () => {
  const d = loadSettings({});
  assert.deepEqual(d.alertsRetryScheduleMs, [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
  assert.equal(d.alertsDisableAfterMs, 24 * 3_600_000);
  assert.equal(d.alertsAllowPrivateTargets, false);
  assert.equal(d.alertsConcurrency, 4);
  assert.equal(d.alertsGroupWindowMs, 30_000);
  const s = loadSettings({ SVC_ALERTS_RETRY_SCHEDULE_S: "1,2,5", SVC_ALERTS_DISABLE_AFTER_H: "0.5", SVC_ALERTS_ALLOW_PRIVATE_TARGETS: "true", SVC_ALERTS_GROUP_WINDOW_S: "5" });
  assert.equal(s.alertsGroupWindowMs, 5_000);
  assert.deepEqual(s.alertsRetryScheduleMs, [1000, 2000, 5000]);
  assert.equal(s.alertsDisableAfterMs, 1_800_000);
  assert.equal(s.alertsAllowPrivateTargets, true);
  for (const [env, name] of [
    [{ SVC_ALERTS_RETRY_SCHEDULE_S: "1,,2" }, "SVC_ALERTS_RETRY_SCHEDULE_S"],
    [{ SVC_ALERTS_RETRY_SCHEDULE_S: "-1" }, "SVC_ALERTS_RETRY_SCHEDULE_S"],
    [{ SVC_ALERTS_DISABLE_AFTER_H: "0" }, "SVC_ALERTS_DISABLE_AFTER_H"],
    [{ SVC_ALERTS_CONCURRENCY: "0" }, "SVC_ALERTS_CONCURRENCY"],
    [{ SVC_ALERTS_GROUP_WINDOW_S: "0" }, "SVC_ALERTS_GROUP_WINDOW_S"],
    [{ SVC_ALERTS_GROUP_WINDOW_S: "1.5" }, "SVC_ALERTS_GROUP_WINDOW_S"],
  ] as const) {
    assert.throws(() => loadSettings(env), (err: unknown) => err instanceof SettingsError && err.message.startsWith(`invalid setting ${name}: `), JSON.stringify(env));
  }
});
