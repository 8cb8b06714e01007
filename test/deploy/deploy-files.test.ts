import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { parse as parseYaml } from "yaml";
import { emqxAuthzBody, INTERNAL_KEY_HEADER } from "../../src/http/routes/internal-authz.routes.js";
import { findOnPath, requireSystem } from "../helpers/system.js";
import { startHarness } from "../http/harness.js";

// docker-compose.yml (COMPOSE_PROFILES decides whether EMQX is deployed,
// spec §1.8), the backend Dockerfile and the systemd unit. Docker is not available to the test
// suite, so the files' invariants are checked by parsing them; the unit goes through
// `systemd-analyze verify` where it exists.

const ROOT = join(import.meta.dirname, "..", "..");
const read = (p: string) => readFileSync(join(ROOT, p), "utf8");

interface ComposeService {
  image?: string;
  build?: unknown;
  profiles?: string[];
  environment?: Record<string, string | number | boolean | null>;
  depends_on?: unknown;
  ports?: string[];
  volumes?: string[];
  configs?: Array<{ source: string; target: string }>;
}
interface Compose {
  services: Record<string, ComposeService>;
  configs?: Record<string, { content?: string; file?: string }>;
  volumes?: Record<string, unknown>;
}

const composeText = read("docker-compose.yml");
const compose = parseYaml(composeText) as Compose;
const backend = compose.services["backend"]!;
const emqx = compose.services["emqx"]!;
const benv = (backend.environment ?? {}) as Record<string, string>;
/** Every string value of the parsed file (what Compose interpolates; comments are not values). */
function strings(v: unknown): string[] {
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v.flatMap(strings);
  if (v !== null && typeof v === "object") return Object.values(v).flatMap(strings);
  return [];
}
const composeValues = strings(compose).join("\n");
const eenv = (emqx.environment ?? {}) as Record<string, string>;

/** KEY=value lines of an env file (comments and blanks skipped). */
function envFile(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) out.set(m[1]!, m[2]!);
  }
  return out;
}
const envExample = envFile(read(".env.example"));

/** Compose variable names a value interpolates (`${NAME}`, `${NAME:-x}`; not `$${...}`). */
function composeVars(value: string): string[] {
  return [...value.matchAll(/(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!);
}

/** Compose interpolation of one value with `vars` (`$$` → `$`, `${X:-d}` → value or d). */
function interpolate(value: string, vars: Map<string, string>): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (whole, name: string | undefined, dflt: string | undefined) => {
    if (whole === "$$") return "$";
    const v = vars.get(name!);
    return v !== undefined && v !== "" ? v : (dflt ?? "");
  });
}

describe("docker-compose.yml (spec §1.8)", () => {
  test("the backend always runs; EMQX only under the `emqx` profile, pinned to a 5.8.x image", () => {
    assert.equal(backend.profiles, undefined, "backend has no profile");
    assert.ok(backend.build !== undefined, "backend is built from the Dockerfile");
    assert.deepEqual(emqx.profiles, ["emqx"]);
    assert.match(emqx.image ?? "", /^emqx\/emqx:5\.8\.\d+$/);
    assert.deepEqual(Object.keys(compose.services).sort(), ["backend", "emqx"]);
    // The backend never waits for the broker (spec §1.7 last bullet, §1.8).
    assert.equal(backend.depends_on, undefined);
  });

  test("without the profile the backend runs the embedded broker; .env.example switches both together", () => {
    assert.equal(interpolate(benv["SVC_MQTT_BROKER"]!, new Map()), "embedded");
    assert.equal(envExample.get("COMPOSE_PROFILES"), "emqx");
    assert.equal(envExample.get("SVC_MQTT_BROKER"), "emqx");
    const withEmqx = interpolate(benv["SVC_MQTT_BROKER"]!, envExample);
    assert.equal(withEmqx, "emqx");
    assert.equal(interpolate(benv["SVC_MQTT_URL"]!, envExample), "mqtt://emqx:1883");
    assert.equal(interpolate(benv["SVC_EMQX_API_URL"]!, envExample), "http://emqx:18083");
    // Host port 1883 belongs to one broker at a time under the example settings.
    const published = (svc: ComposeService) => (svc.ports ?? []).map((p) => interpolate(p, envExample).split(":").slice(0, -1).join(":"));
    const hostPorts = [...published(backend), ...published(emqx)];
    assert.equal(new Set(hostPorts).size, hostPorts.length, `host ports collide: ${hostPorts.join(", ")}`);
  });

  test("EMQX authorization: one HTTP source at the backend's route, no_match = deny, no file source", async (t) => {
    assert.equal(eenv["EMQX_AUTHORIZATION__NO_MATCH"], "deny");
    const sources = eenv["EMQX_AUTHORIZATION__SOURCES"]!;
    assert.ok(sources.trim().startsWith("[") && sources.trim().endsWith("]"), "the whole sources list is replaced");
    assert.deepEqual([...sources.matchAll(/\btype\s*=\s*(\w+)/g)].map((m) => m[1]), ["http"], "exactly one source, of type http");
    assert.doesNotMatch(sources, /\bfile\b|acl\.conf/);
    assert.match(sources, /method\s*=\s*post/);
    const url = /url\s*=\s*"([^"]+)"/.exec(sources)?.[1];
    assert.equal(url, "http://backend:8080/api/internal/emqx/authz");
    // The URL names the compose service and port of the backend, and a route the backend serves.
    const u = new URL(url!);
    assert.ok(compose.services[u.hostname], `service ${u.hostname}`);
    assert.ok((backend.ports ?? []).some((p) => p.endsWith(`:${u.port}`)), "the backend listens on that port");
    const h = await startHarness(t, { mqttEnabled: false });
    const doc = (await h.req("GET", "/api/v1/openapi.json")).json as { paths: Record<string, Record<string, unknown>> };
    assert.ok(doc.paths[u.pathname]?.["post"], `POST ${u.pathname} is in the OpenAPI document`);
  });

  test("the x-svc-internal-key EMQX sends is the backend's SVC_BROKER_AUTHZ_SHARED_KEY", () => {
    const sources = eenv["EMQX_AUTHORIZATION__SOURCES"]!;
    const header = new RegExp(`"${INTERNAL_KEY_HEADER}"\\s*=\\s*"([^"]*)"`).exec(sources)?.[1];
    assert.ok(header !== undefined, "the header is configured");
    assert.deepEqual(composeVars(header), ["SVC_BROKER_AUTHZ_SHARED_KEY"]);
    assert.deepEqual(composeVars(benv["SVC_BROKER_AUTHZ_SHARED_KEY"]!), ["SVC_BROKER_AUTHZ_SHARED_KEY"]);
    const key = envExample.get("SVC_BROKER_AUTHZ_SHARED_KEY")!;
    assert.equal(interpolate(header, envExample), key);
    assert.equal(interpolate(benv["SVC_BROKER_AUTHZ_SHARED_KEY"]!, envExample), key);
    // Asked as JSON (the route's body parser).
    assert.match(sources, /"content-type"\s*=\s*"application\/json"/);
  });

  test("the request body is EMQX placeholders written `$${...}`, covering every field the route reads", () => {
    const sources = eenv["EMQX_AUTHORIZATION__SOURCES"]!;
    const body = /body\s*=\s*\{([^}]*(?:\}[^}]*)*?)\}\s*,\s*request_timeout/.exec(sources)?.[1] ?? "";
    const fields = Object.fromEntries([...body.matchAll(/(\w+)\s*=\s*"([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    for (const [field, value] of Object.entries(fields)) {
      assert.equal(value, `$\${${field}}`, `${field} is the escaped EMQX placeholder`);
      // After Compose interpolation EMQX sees its own placeholder.
      assert.equal(interpolate(value, envExample), `\${${field}}`);
    }
    const routeFields = Object.keys(emqxAuthzBody.shape);
    for (const f of routeFields) assert.ok(f in fields, `the template sends ${f}`);
    assert.deepEqual(Object.keys(fields).sort(), ["action", "clientid", "peerhost", "qos", "retain", "topic", "username"]);
  });

  test("every single-$ reference is a Compose variable; EMQX placeholders are all `$$`-escaped", () => {
    const emqxPlaceholders = new Set(["clientid", "username", "peerhost", "action", "topic", "qos", "retain"]);
    for (const name of composeVars(composeValues)) {
      assert.ok(!emqxPlaceholders.has(name), `\${${name}} must be written $\${${name}}`);
      assert.match(name, /^(SVC_[A-Z0-9_]+)$/, `Compose variable ${name}`);
    }
    for (const m of composeValues.matchAll(/\$\$\{(\w+)\}/g)) assert.ok(emqxPlaceholders.has(m[1]!), `$\${${m[1]}} is an EMQX placeholder`);
    // Every variable the example .env sets is one the compose file reads (no dead settings),
    // except COMPOSE_PROFILES which Compose itself reads.
    const used = new Set(composeVars(composeValues));
    for (const k of envExample.keys()) if (k !== "COMPOSE_PROFILES") assert.ok(used.has(k), `${k} is used by docker-compose.yml`);
  });

  test("authentication: the built-in database only, no bootstrap users and no superusers", () => {
    const authn = eenv["EMQX_AUTHENTICATION"]!;
    assert.match(authn, /mechanism\s*=\s*password_based/);
    assert.match(authn, /backend\s*=\s*built_in_database/);
    assert.match(authn, /user_id_type\s*=\s*username/);
    assert.doesNotMatch(authn, /bootstrap/);
    for (const [name, text] of [["docker-compose.yml", composeText], ["deploy/emqx/emqx-svc.hocon.example", read("deploy/emqx/emqx-svc.hocon.example")]] as const) {
      assert.doesNotMatch(text, /is_superuser|superuser\s*=/, `${name} grants no superuser`);
    }
  });

  test("the management API key is bootstrapped from a file holding the backend's key and secret", () => {
    const target = eenv["EMQX_API_KEY__BOOTSTRAP_FILE"]!;
    const mount = (emqx.configs ?? []).find((c) => c.target === target);
    assert.ok(mount, `a config is mounted at ${target}`);
    const content = compose.configs?.[mount.source]?.content ?? "";
    assert.deepEqual(composeVars(content), ["SVC_EMQX_API_KEY", "SVC_EMQX_API_SECRET"]);
    assert.equal(interpolate(content, envExample), `${interpolate(benv["SVC_EMQX_API_KEY"]!, envExample)}:${interpolate(benv["SVC_EMQX_API_SECRET"]!, envExample)}`);
  });

  test(".env.example holds placeholders, never real secrets", () => {
    for (const k of ["SVC_ADMIN_PASSWORD", "SVC_BROKER_AUTHZ_SHARED_KEY", "SVC_MQTT_BACKEND_PASSWORD", "SVC_EMQX_API_SECRET"]) {
      assert.match(envExample.get(k) ?? "", /^change-me/, k);
    }
    assert.match(read(".dockerignore"), /^\.env$/m, ".env never enters the image build context");
  });

  test("the backend's data volume is the Dockerfile's SVC_DATA_DIR", () => {
    const dataDir = /SVC_DATA_DIR=(\S+)/.exec(read("Dockerfile"))?.[1];
    assert.ok(dataDir);
    assert.ok((backend.volumes ?? []).some((v) => v.endsWith(`:${dataDir}`)), `a volume at ${dataDir}`);
  });
});

describe("Dockerfile", () => {
  const dockerfile = read("Dockerfile");
  const pkg = JSON.parse(read("package.json")) as { scripts: Record<string, string>; dependencies: Record<string, string> };

  test("one node:<major>-bookworm-slim base (which major: node-runtime.test.ts), compiled in a build stage, compiled JavaScript with production dependencies only at runtime, non-root, data volume", () => {
    const froms = [...dockerfile.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
    assert.ok(froms.length > 0 && froms.every((f) => f === froms[0] && /^node:\d+-bookworm-slim$/.test(f ?? "")), froms.join(", "));
    // The compiled build: `npm run build` in a build stage, `node dist/src/main.js` at runtime; the
    // runtime's node_modules come from `npm ci --omit=dev`, and it holds no src/.
    const stages = dockerfile.split(/^(?=FROM\s)/m).filter((s) => s.startsWith("FROM"));
    const stageName = (s: string) => /^FROM\s+\S+(?:\s+AS\s+(\S+))?/.exec(s)?.[1];
    const runtime = stages.at(-1) ?? "";
    const build = stages.find((s) => /^RUN npm run build$/m.test(s));
    assert.ok(build && stageName(build), "a named stage runs npm run build");
    assert.match(runtime, new RegExp(`^COPY --from=${stageName(build)} /opt/svc/dist \\./dist$`, "m"), "the runtime copies dist/ from the build stage");
    const depsStage = stages.find((s) => /npm ci --omit=dev/.test(s));
    assert.ok(depsStage && stageName(depsStage), "a named stage installs production dependencies only");
    assert.match(runtime, new RegExp(`^COPY --from=${stageName(depsStage)} /opt/svc/node_modules \\./node_modules$`, "m"));
    assert.doesNotMatch(runtime, /^COPY\s+(?:--\S+\s+)*src\b/m, "no TypeScript sources in the runtime image");
    assert.doesNotMatch(runtime, /^RUN npm ci(?!.*--omit=dev)/m);
    assert.equal(pkg.dependencies["tsx"], undefined, "tsx is not a runtime dependency");
    assert.equal(pkg.dependencies["typescript"], undefined, "the compiler is not a runtime dependency");
    assert.match(pkg.scripts["start"] ?? "", /tsx src\/main\.ts/);
    assert.match(runtime, /^CMD \["node", "dist\/src\/main\.js"\]$/m);
    const user = [...dockerfile.matchAll(/^USER\s+(\S+)/gm)].at(-1)?.[1];
    assert.ok(user !== undefined && !/^(root|0)(:|$)/.test(user), `runs as ${user}`);
    assert.match(dockerfile, /^VOLUME \["\/var\/lib\/svc"\]$/m);
  });

  test("HEALTHCHECK probes a GET route of the OpenAPI document", async (t) => {
    const line = /^HEALTHCHECK[\s\S]*?CMD (.*)$/m.exec(dockerfile)?.[1] ?? "";
    const path = /(\/api\/v\d+\/[a-z0-9/_-]+)/.exec(line)?.[1];
    assert.ok(path, `a path in: ${line}`);
    const h = await startHarness(t, { mqttEnabled: false });
    const doc = (await h.req("GET", "/api/v1/openapi.json")).json as { paths: Record<string, Record<string, unknown>> };
    assert.ok(doc.paths[path]?.["get"], `GET ${path} is in the OpenAPI document`);
    const res = await h.req("GET", path, undefined, { auth: false });
    assert.equal(res.status, 200, "answers without credentials");
  });
});

describe("deploy/systemd/svc-backend.service", () => {
  const unitPath = join(ROOT, "deploy/systemd/svc-backend.service");
  const unit = readFileSync(unitPath, "utf8");

  test("hardened: no new privileges, read-only system, only the data directory writable, settings from a file", () => {
    const directives = new Map<string, string[]>();
    for (const line of unit.split("\n")) {
      const m = /^([A-Za-z]+)=(.*)$/.exec(line);
      if (m) directives.set(m[1]!, [...(directives.get(m[1]!) ?? []), m[2]!]);
    }
    const one = (k: string) => directives.get(k)?.at(-1);
    assert.equal(one("NoNewPrivileges"), "true");
    assert.equal(one("ProtectSystem"), "strict");
    assert.equal(one("ProtectHome"), "true");
    assert.equal(one("PrivateTmp"), "true");
    assert.equal(one("CapabilityBoundingSet"), "");
    assert.match(one("EnvironmentFile") ?? "", /^\/etc\/svc\/svc-backend\.env$/);
    const dataDir = /^SVC_DATA_DIR=(.+)$/.exec(directives.get("Environment")?.find((e) => e.startsWith("SVC_DATA_DIR=")) ?? "")?.[1];
    assert.ok(dataDir, "SVC_DATA_DIR is set");
    assert.deepEqual(directives.get("ReadWritePaths"), [dataDir]);
    assert.equal(`/var/lib/${one("StateDirectory")}`, dataDir);
    assert.notEqual(one("User"), "root");
    assert.ok(one("User"));
    // Compiled JavaScript, no loader.
    assert.match(one("ExecStart") ?? "", /^\/usr\/bin\/node dist\/src\/main\.js$/);
    // V8's JIT needs writable+executable memory: this option would crash node.
    assert.equal(directives.has("MemoryDenyWriteExecute"), false);
  });

  test("passes `systemd-analyze verify`", { timeout: 60_000 }, (t) => {
    // .ci/run installs systemd: a skip with a reason when missing, a failure under
    // SVC_TEST_REQUIRE_SYSTEM=1 (as test/cli/service.test.ts does).
    if (!requireSystem(t, { binaries: ["systemd-analyze"] })) return;
    const analyze = findOnPath("systemd-analyze")!;
    const dir = mkdtempSync(join(tmpdir(), "svc-unit-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const copy = join(dir, "svc-backend.service");
    // verify checks that ExecStart's binary exists: use this node where /usr/bin/node is absent.
    writeFileSync(copy, existsSync("/usr/bin/node") ? unit : unit.replace("/usr/bin/node", process.execPath));
    const res = spawnSync(analyze, ["verify", copy], { encoding: "utf8", timeout: 30_000 });
    assert.equal(res.error, undefined, String(res.error));
    const complaints = `${res.stdout}\n${res.stderr}`.split("\n").filter((l) => l.includes("svc-backend.service"));
    assert.deepEqual(complaints, [], `systemd-analyze verify: ${res.stdout}${res.stderr}`);
    assert.equal(res.status, 0, `systemd-analyze verify: ${res.stdout}${res.stderr}`);
  });
});
