import assert from "node:assert/strict";
import { readdirSync, statSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import {
  agentProfileSchema,
  defaultProfileDir,
  PROFILE_FILE,
  ProfileError,
  profilePath,
  readProfile,
  resolveProfileDir,
  writeProfile,
} from "../../src/agent/profile.js";
import { sampleProfile } from "./fixtures.js";
import { tempDir } from "../helpers/temp-dir.js";

const posix = process.platform !== "win32";

test("spec 2.6: a profile written and read back is the same, stored 0600 in a 0700 directory", async (t) => {
  const dir = join(tempDir(t, "svc-profile-test-"), "nested", "svc-agent");
  const profile = sampleProfile({ mqtt: { ca_cert: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" } });
  const file = await writeProfile(dir, profile);
  assert.equal(file, join(dir, PROFILE_FILE));
  assert.deepEqual(await readProfile(dir), profile);
  if (posix) {
    assert.equal(statSync(file).mode & 0o777, 0o600, "the profile holds the MQTT password: owner only");
    assert.equal(statSync(dir).mode & 0o777, 0o700);
  }
  // atomic write: no temp file is left behind
  assert.deepEqual(readdirSync(dir), [PROFILE_FILE]);
});

test("rewriting a profile replaces it whole and keeps mode 0600, even when the old file was wider", async (t) => {
  const dir = tempDir(t, "svc-profile-test-");
  writeFileSync(profilePath(dir), "{}", { mode: 0o644 });
  const profile = sampleProfile();
  await writeProfile(dir, profile);
  const second = sampleProfile({ mqtt: { password: "rotated-at-rebind" } });
  await writeProfile(dir, second);
  assert.equal((await readProfile(dir)).mqtt.password, "rotated-at-rebind");
  if (posix) assert.equal(statSync(profilePath(dir)).mode & 0o777, 0o600);
  assert.deepEqual(readdirSync(dir), [PROFILE_FILE]);
});

test("unknown fields from a newer server are accepted and not stored", async (t) => {
  const dir = tempDir(t, "svc-profile-test-");
  const answer = { ...sampleProfile(), extra: { future: true } };
  const parsed = agentProfileSchema.parse(answer);
  await writeProfile(dir, parsed);
  const stored = JSON.parse(await readFile(profilePath(dir), "utf8")) as Record<string, unknown>;
  assert.equal("extra" in stored, false);
});

test("readProfile: a bad field is named together with the file", async (t) => {
  const dir = tempDir(t, "svc-profile-test-");
  const bad = sampleProfile() as unknown as { mqtt: Record<string, unknown> };
  bad.mqtt["port"] = "8883";
  writeFileSync(profilePath(dir), JSON.stringify(bad));
  await assert.rejects(readProfile(dir), (err: unknown) => {
    assert.ok(err instanceof ProfileError);
    assert.equal(err.kind, "invalid");
    assert.match(err.message, new RegExp(profilePath(dir).replace(/[\\^$.*+?()[\]{}|]/g, "\\$&")));
    assert.match(err.message, /mqtt\.port/);
    return true;
  });
});

test("readProfile: missing file, broken JSON and a missing topic are told apart", async (t) => {
  const dir = tempDir(t, "svc-profile-test-");
  await assert.rejects(readProfile(dir), (err: unknown) => err instanceof ProfileError && err.kind === "missing" && /svcctl bind/.test(err.message));

  writeFileSync(profilePath(dir), "{not json");
  await assert.rejects(readProfile(dir), (err: unknown) => err instanceof ProfileError && err.kind === "invalid" && /not valid JSON/.test(err.message));

  const noHeartbeat = sampleProfile() as unknown as { topics: Record<string, unknown> };
  delete noHeartbeat.topics["heartbeat"];
  writeFileSync(profilePath(dir), JSON.stringify(noHeartbeat));
  await assert.rejects(readProfile(dir), /topics\.heartbeat/);
});

test("spec 2.6: the schema is strict about the named fields", () => {
  const ok = sampleProfile();
  assert.equal(agentProfileSchema.safeParse(ok).success, true);
  // the TLS CA certificate is present only when mqtt.tls is true
  const caWithoutTls = sampleProfile({ mqtt: { tls: false, ca_cert: "PEM" } });
  const r = agentProfileSchema.safeParse(caWithoutTls);
  assert.equal(r.success, false);
  assert.match(JSON.stringify(r.error?.issues), /ca_cert/);
  // spec 5 rule 2: never a wildcard topic
  const wildcard = sampleProfile();
  wildcard.topics.control = "svc/#";
  assert.equal(agentProfileSchema.safeParse(wildcard).success, false);
  // ids follow DESIGN 3
  const badId = sampleProfile();
  badId.profile.node_id = "Node/1";
  assert.equal(agentProfileSchema.safeParse(badId).success, false);
  const badPort = sampleProfile({ mqtt: { port: 70000 } });
  assert.equal(agentProfileSchema.safeParse(badPort).success, false);
});

test("writeProfile refuses an invalid profile and writes nothing", async (t) => {
  const dir = tempDir(t, "svc-profile-test-");
  const bad = sampleProfile({ mqtt: { password: "" } });
  await assert.rejects(writeProfile(dir, bad), (err: unknown) => err instanceof ProfileError && /mqtt\.password/.test(err.message));
  assert.deepEqual(readdirSync(dir), []);
});

test("profile directory: platform defaults, SVC_AGENT_DIR, then the explicit flag", () => {
  assert.equal(defaultProfileDir("linux"), "/etc/svc-agent");
  assert.equal(defaultProfileDir("darwin"), "/Library/Application Support/svc-agent");
  assert.equal(defaultProfileDir("win32", { ProgramData: "D:\\PD" }), "D:\\PD\\svc-agent");
  assert.equal(defaultProfileDir("win32"), "C:\\ProgramData\\svc-agent");
  assert.equal(resolveProfileDir(undefined, "linux", {}), "/etc/svc-agent");
  assert.equal(resolveProfileDir(undefined, "linux", { SVC_AGENT_DIR: "/opt/agent" }), "/opt/agent");
  assert.equal(resolveProfileDir("/flag", "linux", { SVC_AGENT_DIR: "/opt/agent" }), "/flag");
});
