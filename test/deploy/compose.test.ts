import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { describe, test } from "node:test";
import { parse as parseYaml } from "yaml";
import { startHarness } from "../http/harness.js";
import { loadSettings } from "../../src/config.js";

/**
 * What would fail on the first `docker compose --profile emqx up` (spec §1.7 "the backend
 * must not depend on the broker to start", §1.8 "COMPOSE_PROFILES independently decides whether
 * the broker is deployed", §4 rule 13 the EMQX authorization route). No Docker runs here, so these
 * tests read docker-compose.yml and .env.example with `yaml` and keep each defect from coming back;
 * they cannot prove EMQX runs (README, "Production brokers": the release check).
 *
 * Compose semantics relied on (docs.docker.com, "Profiles" and "Control startup order"):
 * - Services without `profiles` are always enabled; a service with `profiles` is enabled only when
 *   one of them is active (`--profile`, or `COMPOSE_PROFILES` from the environment or `.env`),
 *   or when it is explicitly targeted by a command. So every subset of the file's profiles is a
 *   configuration someone can start, and each is checked below.
 * - A reference from an enabled service to a disabled one is an error, not an activation: EMQX
 *   (profile `emqx`) may depend on the backend (no profile, always enabled), never the reverse.
 * - `depends_on: {backend: {condition: service_healthy}}` makes Compose wait until the backend's
 *   healthcheck passes before it creates EMQX; without `restart: true` a later restart of the
 *   backend alone does not restart EMQX.
 * - `configs` long syntax: `mode` is octal and defaults to 0444; `uid`/`gid` own the file inside
 *   the container. Inline `content` configs are written owned by root (uid/gid 0) when unset
 *   (a review of Compose found it; the spec no longer promises `USER`). Compose reads YAML with
 *   go-yaml v3, which reads `0440` as octal; `yaml` does so under YAML 1.1, used for the mode.
 * - Interpolation `${X:-d}` uses d when X is unset or empty; with no `.env` every `${X:-d}` is d.
 */

const ROOT = join(import.meta.dirname, "..", "..");
const read = (p: string) => readFileSync(join(ROOT, p), "utf8");

type Ports = Array<string | { published?: string | number; host_ip?: string; protocol?: string; target?: number }>;
interface ComposeService {
  profiles?: string[];
  hostname?: string;
  environment?: Record<string, string | number | boolean | null>;
  depends_on?: string[] | Record<string, { condition?: string; restart?: boolean; required?: boolean }>;
  ports?: Ports;
  volumes?: string[];
  healthcheck?: { test?: string | string[]; disable?: boolean; interval?: string; start_period?: string };
  configs?: Array<{ source: string; target: string; uid?: string; gid?: string; mode?: number }>;
}
interface Compose {
  services: Record<string, ComposeService>;
  configs?: Record<string, { content?: string; file?: string }>;
}

const composeText = read("docker-compose.yml");
const compose = parseYaml(composeText) as Compose;
/** The same file as Compose's go-yaml v3 reads numbers: `0440` is octal (for `configs[].mode`). */
const composeOctal = parseYaml(composeText, { version: "1.1" }) as Compose;
const backend = compose.services["backend"]!;
const emqx = compose.services["emqx"]!;
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
/** The two variable sets a deployer starts with: no `.env` at all, and `.env` copied from `.env.example`. */
const ENVS: Array<[string, Map<string, string>]> = [
  ["no .env", new Map()],
  [".env = .env.example", envExample],
];

/** Compose interpolation of one value (`$$` → `$`, `${X:-d}` / `${X-d}` → the value or d). */
function interpolate(value: string, vars: Map<string, string>): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (whole, name: string | undefined, dflt: string | undefined) => {
    if (whole === "$$") return "$";
    const v = vars.get(name!);
    return v !== undefined && v !== "" ? v : (dflt ?? "");
  });
}

/** Every subset of the profiles named in the file (each is a set someone can activate). */
function profileCombinations(): string[][] {
  const all = [...new Set(Object.values(compose.services).flatMap((s) => s.profiles ?? []))].sort();
  return Array.from({ length: 2 ** all.length }, (_, mask) => all.filter((_, i) => mask & (1 << i)));
}

/** Services Compose enables for the active profiles (no `profiles` = always). */
function enabledServices(active: string[]): string[] {
  return Object.entries(compose.services)
    .filter(([, s]) => s.profiles === undefined || s.profiles.some((p) => active.includes(p)))
    .map(([name]) => name);
}

interface HostBinding {
  service: string;
  ip: string;
  port: number;
  protocol: string;
  spec: string;
}

/**
 * Host bindings of one service after interpolation. Short syntax `[ip:]host:container[/proto]`;
 * a bare container port publishes an ephemeral host port (no clash possible) and is skipped.
 */
function hostBindings(service: string, vars: Map<string, string>): HostBinding[] {
  const out: HostBinding[] = [];
  for (const entry of compose.services[service]!.ports ?? []) {
    if (typeof entry === "object") {
      if (entry.published === undefined) continue;
      const port = Number(interpolate(String(entry.published), vars));
      out.push({ service, ip: entry.host_ip ?? "0.0.0.0", port, protocol: entry.protocol ?? "tcp", spec: JSON.stringify(entry) });
      continue;
    }
    const spec = interpolate(entry, vars);
    const [addr, protocol = "tcp"] = spec.split("/");
    const parts = addr!.split(":");
    if (parts.length === 1) continue;
    const ip = parts.length === 3 ? parts[0]! : "0.0.0.0";
    const port = Number(parts.at(-2));
    assert.ok(Number.isInteger(port) && port > 0 && port < 65536, `${service}: host port of "${spec}"`);
    out.push({ service, ip, port, protocol, spec });
  }
  return out;
}

/** Two bindings collide when port and protocol match and the addresses overlap (0.0.0.0 overlaps all). */
const collide = (a: HostBinding, b: HostBinding) =>
  a.port === b.port && a.protocol === b.protocol && (a.ip === b.ip || a.ip === "0.0.0.0" || b.ip === "0.0.0.0");

describe("docker-compose.yml: what would fail on the first `docker compose --profile emqx up`", () => {
  test("spec §1.8 broker synchronization: the EMQX API key bootstrap file is readable by the image's user, uid 1000", () => {
    // EMQX reads it as `emqx` (uid/gid 1000 in emqx/emqx:5.8.x); unreadable → no API key → every
    // /api/v5 call 401 → the backend never creates its own or any node's broker user.
    const EMQX_UID = 1000;
    const target = eenv["EMQX_API_KEY__BOOTSTRAP_FILE"];
    assert.ok(target, "EMQX_API_KEY__BOOTSTRAP_FILE is set");
    const i = (emqx.configs ?? []).findIndex((c) => c.target === target);
    assert.ok(i >= 0, `a config is mounted at ${target}`);
    const mount = emqx.configs![i]!;
    const mode = composeOctal.services["emqx"]!.configs![i]!.mode ?? 0o444;
    const uid = Number(mount.uid ?? 0);
    const gid = Number(mount.gid ?? 0);
    const readable = (mode & 0o004) !== 0 || (uid === EMQX_UID && (mode & 0o400) !== 0) || (gid === EMQX_UID && (mode & 0o040) !== 0);
    assert.ok(readable, `mode ${mode.toString(8)} uid ${uid} gid ${gid}: uid ${EMQX_UID} cannot read ${target}`);
    assert.equal(mode & 0o222, 0, "nobody needs to write the key file");
    assert.ok(compose.configs?.[mount.source]?.content !== undefined, "the file's content is the inline key:secret");
  });

  for (const [label, vars] of ENVS) {
    test(`spec §1.8 COMPOSE_PROFILES decides: no host port is published twice, for every combination of profiles, ${label}`, () => {
      const combinations = profileCombinations();
      assert.ok(combinations.some((c) => c.includes("emqx")), "the emqx profile is among the combinations");
      for (const active of combinations) {
        const bindings = enabledServices(active).flatMap((s) => hostBindings(s, vars));
        for (const [n, a] of bindings.entries()) {
          for (const b of bindings.slice(n + 1)) {
            assert.ok(!collide(a, b), `profiles [${active.join(",")}], ${label}: ${a.service} "${a.spec}" and ${b.service} "${b.spec}" publish the same host port`);
          }
        }
      }
    });
  }

  test("with .env.example the agents' port 1883 is EMQX's, and the backend uses EMQX", () => {
    const published = (svc: string) => hostBindings(svc, envExample).map((b) => b.port);
    assert.ok(published("emqx").includes(1883), "EMQX publishes host port 1883");
    assert.ok(!published("backend").includes(1883), "the unused embedded listener is not on 1883");
    assert.equal(interpolate(String(backend.environment?.["SVC_MQTT_BROKER"]), envExample), "emqx");
    // Without .env the embedded broker keeps the agents' port.
    assert.ok(hostBindings("backend", new Map()).some((b) => b.port === 1883), "embedded broker on 1883 without .env");
  });

  test("spec §1.9 bullet 2: the TLS port bind profiles name is published by the broker agents use (embedded without .env, EMQX with .env.example), and EMQX's TLS listener follows SVC_MQTT_TLS_ENABLED with mounted certificate files", () => {
    const profilePort = loadSettings({}).embeddedBrokerTlsPort; // profiles' TLS port without SVC_MQTT_PUBLIC_TLS_PORT
    const published = (svc: string, vars: Map<string, string>) => hostBindings(svc, vars).map((b) => b.port);
    assert.ok(published("backend", new Map()).includes(profilePort), "without .env the embedded broker's TLS listener is on the profiles' port");
    assert.ok(published("emqx", envExample).includes(profilePort), "with .env.example EMQX publishes it");
    assert.ok(!published("backend", envExample).includes(profilePort), "and the unused embedded TLS listener is off it");
    for (const [label, vars] of [["no .env", new Map<string, string>()], ["TLS on", new Map([...envExample, ["SVC_MQTT_TLS_ENABLED", "true"]])]] as const) {
      const tls = interpolate(String(backend.environment?.["SVC_MQTT_TLS_ENABLED"]), vars);
      assert.equal(interpolate(String(eenv["EMQX_LISTENERS__SSL__DEFAULT__ENABLE"]), vars), tls, `${label}: EMQX's TLS listener is on exactly when the backend's profiles prefer TLS`);
    }
    // EMQX's container port 8883 is its TLS listener, and the files it serves are mounted.
    assert.ok((emqx.ports ?? []).some((p) => typeof p === "string" && p.endsWith(`:${profilePort}`)), "EMQX's published container port");
    assert.equal(eenv["EMQX_LISTENERS__SSL__DEFAULT__BIND"], `0.0.0.0:${profilePort}`);
    const mounts = (emqx.volumes ?? []).map((v) => interpolate(v, envExample).split(":")[1] ?? "");
    for (const key of ["CERTFILE", "KEYFILE", "CACERTFILE"]) {
      const file = eenv[`EMQX_LISTENERS__SSL__DEFAULT__SSL_OPTIONS__${key}`];
      assert.ok(file !== undefined && mounts.some((m) => m !== "" && file.startsWith(`${m}/`)), `${key} ${file} lies in a mounted directory`);
    }
  });

  test("EMQX's node name is fixed (its built-in user database lives under data/mnesia/<node name>)", () => {
    const hostname = emqx.hostname;
    assert.ok(hostname, "a fixed hostname");
    const nodeName = eenv["EMQX_NODE__NAME"];
    assert.ok(nodeName, "EMQX_NODE__NAME is set (otherwise the image uses emqx@<container IP>)");
    for (const [label, vars] of ENVS) {
      assert.equal(interpolate(hostname, vars), hostname, `the hostname does not come from a variable (${label})`);
      assert.equal(interpolate(nodeName, vars), nodeName, `the node name does not come from a variable (${label})`);
    }
    const m = /^([A-Za-z0-9_-]+)@(.+)$/.exec(nodeName);
    assert.ok(m, `name@host: ${nodeName}`);
    assert.equal(m[2], hostname, "the node's host is the container's own hostname (resolvable inside it)");
    assert.match(hostname, /^[a-z0-9-]+(\.[a-z0-9-]+)+$/, "a dotted host: EMQX runs Erlang with a long name");
    assert.ok((emqx.volumes ?? []).some((v) => /^[\w-]+:\/opt\/emqx\/data$/.test(v)), "the data directory (mnesia) is a named volume");
  });

  test("spec §1.7, §4 rule 13: EMQX starts after the backend is healthy; the backend depends on nothing", async (t) => {
    // EMQX's HTTP authorization resource connects at start: before the backend listens every
    // check is `not_connected` → denied until the resource's next health check.
    assert.equal(backend.depends_on, undefined, "spec §1.7: the backend must not depend on the broker to start");
    const deps = emqx.depends_on;
    assert.ok(deps && !Array.isArray(deps), "EMQX's depends_on is in the long form (with a condition)");
    assert.equal(deps["backend"]?.condition, "service_healthy");
    assert.notEqual(deps["backend"]?.restart, true, "a backend restart must not restart EMQX (it would drop every agent)");
    const hc = backend.healthcheck;
    assert.ok(hc && hc.disable !== true, "the backend has a healthcheck for service_healthy to wait on");
    const probe = Array.isArray(hc.test) ? hc.test.join(" ") : (hc.test ?? "");
    const path = /(\/api\/v\d+\/[a-z0-9/_-]+)/.exec(probe)?.[1];
    assert.equal(path, "/api/v1/health");
    assert.match(probe, /127\.0\.0\.1:'\+\(process\.env\.SVC_HTTP_PORT\|\|8080\)\+'/, "probes the port the backend listens on");
    // The probed route answers 200 without credentials (a 401 would keep EMQX from ever starting).
    const h = await startHarness(t, { mqttEnabled: false });
    const res = await h.req("GET", path, undefined, { auth: false });
    assert.equal(res.status, 200);
  });

  test("spec §4 rule 13: the authorization route answers only what EMQX 5.8.6 reads as intended: 200 allow/deny, never 204 (= allow)", async (t) => {
    // emqx_authz_http: 200 with `result` decides, 204 allows, any other status is `nomatch`, and
    // the compose file's `no_match = deny` then denies. The route's statuses are its OpenAPI
    // responses (the response schemas are enforced on every answer).
    assert.equal(eenv["EMQX_AUTHORIZATION__NO_MATCH"], "deny");
    const url = /url\s*=\s*"([^"]+)"/.exec(eenv["EMQX_AUTHORIZATION__SOURCES"] ?? "")?.[1];
    assert.ok(url, "the HTTP source's url");
    const h = await startHarness(t, { mqttEnabled: false });
    type Op = { responses: Record<string, { content?: Record<string, { schema?: { properties?: { result?: { enum?: string[] } } } }> }> };
    const doc = (await h.req("GET", "/api/v1/openapi.json")).json as { paths: Record<string, { post?: Op }> };
    const op = doc.paths[new URL(url).pathname]?.post;
    assert.ok(op, `POST ${new URL(url).pathname} is documented`);
    const statuses = Object.keys(op.responses);
    assert.ok(!statuses.includes("204"), "never 204: EMQX would allow");
    for (const s of statuses) assert.ok(s === "200" || Number(s) >= 400, `status ${s}: only 200 decides, errors are nomatch`);
    assert.deepEqual(op.responses["200"]?.content?.["application/json"]?.schema?.properties?.result?.enum, ["allow", "deny"]);
  });

  test("every repository path named in docker-compose.yml, .env.example, Dockerfile and deploy/* exists", () => {
    const files = ["docker-compose.yml", ".env.example", "Dockerfile", ...walk("deploy")];
    // Paths are recognised by their first segment, a top-level directory of the repository; a
    // preceding `/`, `.` or word character means a container or build path (`dist/src/main.js`).
    // Only directories the repository tracks: built or installed ones (`dist/`, `node_modules/`)
    // are not the repository's, so `dist/src/main.js` is a build path.
    const tracked = execFileSync("git", ["ls-files"], { cwd: ROOT, encoding: "utf8" }).split("\n");
    const roots = [...new Set(tracked.filter((f) => f.includes("/")).map((f) => f.slice(0, f.indexOf("/"))))];
    const re = new RegExp(`(?<![\\w./$-])((?:${roots.map((r) => r.replace(/\./g, "\\.")).join("|")})/[\\w.*/-]*[\\w*/])`, "g");
    const missing: string[] = [];
    let seen = 0;
    for (const file of files) {
      for (const m of read(file).matchAll(re)) {
        seen++;
        if (!pathExists(m[1]!)) missing.push(`${file}: ${m[1]}`);
      }
    }
    // The Dockerfile's build-context sources (`COPY` without `--from`).
    for (const m of read("Dockerfile").matchAll(/^COPY\s+(?!--from)(.+)$/gm)) {
      const args = m[1]!.split(/\s+/).filter((a) => !a.startsWith("--"));
      for (const src of args.slice(0, -1)) {
        seen++;
        if (!pathExists(src)) missing.push(`Dockerfile COPY: ${src}`);
      }
    }
    assert.ok(seen >= 10, `the scan found the references (${seen})`);
    assert.deepEqual(missing, []);
  });
});

/** Files under a repository directory, relative to the root. */
function walk(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? walk(join(dir, d.name)) : [join(dir, d.name)],
  );
}

/** Whether a repository path exists; a `*` in the last segment matches any characters. */
function pathExists(p: string): boolean {
  const clean = p.replace(/\/$/, "");
  if (!clean.includes("*")) return existsSync(join(ROOT, clean));
  const dir = join(ROOT, dirname(clean));
  if (!existsSync(dir) || !statSync(dir).isDirectory()) return false;
  const pattern = new RegExp(`^${basename(clean).replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*")}$`);
  return readdirSync(dir).some((f) => pattern.test(f));
}
