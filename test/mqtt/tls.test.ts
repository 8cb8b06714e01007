import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import type { LookupFunction } from "node:net";
import { join } from "node:path";
import { Writable } from "node:stream";
import { connect as tlsConnect } from "node:tls";
import { describe, test, type TestContext } from "node:test";
import mqtt from "mqtt";
import { agentProfileSchema, type AgentProfile } from "../../src/agent/profile.js";
import { ManualClock } from "../../src/lib/clock.js";
import { loadSettings, SettingsError, testSettings, type Settings } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { BackendMqttClient } from "../../src/mqtt/backend-client.js";
import { brokerPasswordHash, type BrokerUserLookup } from "../../src/mqtt/broker-users.js";
import { EmbeddedBroker } from "../../src/mqtt/embedded-broker.js";
import { ensureGeneratedTls, readTlsFiles, resolveMqttTls, SERVER_RENEW_BEFORE_MS, SERVER_VALIDITY_MS, type TlsMaterial } from "../../src/mqtt/tls.js";
import { createServer, type AppContext } from "../../src/server.js";
import { api, eventually } from "../control/agent-harness.js";
import { listenAndLogin } from "../events/sse-harness.js";
import { tempDir } from "../helpers/temp-dir.js";
import { startAgentInProcess } from "../helpers/agent.js";

// TLS for MQTT: spec §1.9 (SVC_MQTT_TLS_ENABLED, mqtts://
// SVC_MQTT_URL), §2.6 (mqtt.tls, the CA present only when tls is true), §5 "Agent to broker ...
// TLS CA given when tls is true". Real parts only: the real service over HTTP with a real SQLite
// file, the embedded aedes broker's real TLS listener on port 0, the real agent runtime
// (runAgent), and MQTT.js configured exactly as the agent configures it. Nothing sleeps: every
// wait is a bounded poll of a real outcome.

const ADMIN_PASSWORD = "correct horse battery staple";
const silent = createLogger("silent");

interface Svc {
  server: AppContext;
  baseUrl: string;
  token: string;
  close(): Promise<void>;
}

/** The real service on 127.0.0.1:0 (HTTP and broker listeners), logged in as admin. */
async function startSvc(t: TestContext, dataDir: string, overrides: Partial<Settings> = {}): Promise<Svc> {
  const server = await createServer(
    testSettings({ dataDir, adminPassword: ADMIN_PASSWORD, mqttTlsEnabled: true, embeddedBrokerTlsPort: 0, ...overrides }),
    silent,
    { clock: new ManualClock() },
  );
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= server.close());
  t.after(close);
  const { baseUrl, token } = await listenAndLogin(server, ADMIN_PASSWORD);
  return { server, baseUrl, token, close };
}

function call(s: Svc, method: string, path: string, body?: unknown, auth = true): Promise<{ status: number; json: any }> {
  return api(s, method, path, body, auth);
}

/** A dynamic node bound through REST (spec §4 rules 10–11): the raw bind answer. */
async function bindThroughRest(s: Svc): Promise<any> {
  const config = await call(s, "POST", "/api/v1/configs", {
    name: `c-${Math.random().toString(36).slice(2, 7)}`,
    tunnel_protocol: "wireguard",
    network_cidr: "10.77.0.0/24",
  });
  assert.equal(config.status, 201, JSON.stringify(config.json));
  const node = await call(s, "POST", `/api/v1/configs/${config.json.config_id}/nodes`, { name: "edge", mode: "dynamic", public_address: "192.0.2.7" });
  assert.equal(node.status, 201, JSON.stringify(node.json));
  const cmd = await call(s, "POST", `/api/v1/configs/${config.json.config_id}/nodes/${node.json.node_id}/bind-command`);
  assert.equal(cmd.status, 200);
  const token = /--token (\S+)$/.exec(cmd.json.command)?.[1];
  assert.ok(token);
  const bound = await call(s, "POST", "/api/client/bind", { bind_token: token, server_url: s.baseUrl, client_version: "1.0.0", platform: "linux", hostname: "edge-1" }, false);
  assert.equal(bound.status, 200, JSON.stringify(bound.json));
  return bound.json;
}

async function presence(s: Svc, p: AgentProfile): Promise<string> {
  const st = await call(s, "GET", `/api/v1/configs/${p.profile.config_id}/nodes/${p.profile.node_id}/endpoint-status`);
  return st.json.client_presence_state;
}

/** A second, unrelated CA (and server certificate) generated the product's way. */
async function otherMaterial(t: TestContext, publicHost = "localhost"): Promise<TlsMaterial> {
  return ensureGeneratedTls({ dir: join(tempDir(t, "svc-tls-other-"), "tls"), publicHost, now: Date.now(), log: silent });
}

/** The first TLS failure an agent logged (it keeps retrying with backoff). */
function tlsFailure(logs: Array<Record<string, unknown>>): string | undefined {
  const line = logs.find((l) => l.msg === "mqtt error");
  return line === undefined ? undefined : String(line.err);
}

describe("bind profiles and agents over mqtts (spec §1.9, §2.6, §5)", () => {
  test("TLS enabled: the REST bind answer has tls true, the TLS port and ca_cert; the agent connects over mqtts and goes online", async (t) => {
    const dataDir = tempDir(t, "svc-tls-data-");
    const s = await startSvc(t, dataDir);
    const broker = s.server.mqtt.broker!;
    assert.ok(broker.tlsPort !== null && broker.tlsPort !== broker.port, "a TLS listener beside the plain one");

    const raw = await bindThroughRest(s);
    assert.equal(raw.mqtt.tls, true, "spec §1.9: generated bind profiles prefer TLS");
    assert.equal(raw.mqtt.port, broker.tlsPort, "spec §2.6 mqtt.port: the TLS listener's port");
    assert.equal(raw.mqtt.host, "localhost", "the public host (host of SVC_PUBLIC_URL)");
    assert.equal(raw.mqtt.ca_cert, readFileSync(join(dataDir, "tls", "ca.pem"), "utf8"), "spec §2.6: the CA certificate, from the data directory");
    assert.ok(new X509Certificate(raw.mqtt.ca_cert).ca);
    assert.doesNotMatch(JSON.stringify(raw), /PRIVATE KEY/, "no key material leaves the server");
    const profile = agentProfileSchema.parse(raw);

    // The profile exactly as bound: host "localhost", the TLS port, the CA. No rewriting.
    const agent = startAgentInProcess(t, profile, "svc-tls-agent-");
    await eventually("online over mqtts", async () => ((await presence(s, profile)) === "online" ? true : undefined));
    assert.ok(agent.logs.some((l) => l.msg === "connected"));
    assert.ok(broker.isConnected(profile.mqtt.client_id));
    await agent.stop();
  });

  test("the same agent with a different CA is refused: a TLS error, never connected, never online (spec §5 Agent to broker)", async (t) => {
    const s = await startSvc(t, tempDir(t, "svc-tls-data-"));
    const profile = agentProfileSchema.parse(await bindThroughRest(s));
    const wrong = await otherMaterial(t);
    assert.notEqual(wrong.caPem, profile.mqtt.ca_cert);

    const agent = startAgentInProcess(t, { ...profile, mqtt: { ...profile.mqtt, ca_cert: wrong.caPem } }, "svc-tls-agent-");
    const err = await eventually("the agent's TLS failure", () => tlsFailure(agent.logs));
    assert.match(err, /certificate/i, "the server certificate does not verify against the wrong CA");
    assert.equal(agent.logs.some((l) => l.msg === "connected"), false);
    assert.equal(s.server.mqtt.broker!.isConnected(profile.mqtt.client_id), false, "the broker never registered it");
    assert.notEqual(await presence(s, profile), "online");
    await agent.stop();
  });

  test("tls true without ca_cert: the agent verifies against the system trust store, so the generated CA is refused too", async (t) => {
    const s = await startSvc(t, tempDir(t, "svc-tls-data-"));
    const profile = agentProfileSchema.parse(await bindThroughRest(s));
    const { ca_cert: _dropped, ...mqttWithoutCa } = profile.mqtt;
    const agent = startAgentInProcess(t, { ...profile, mqtt: mqttWithoutCa }, "svc-tls-agent-");
    const err = await eventually("the agent's TLS failure", () => tlsFailure(agent.logs));
    assert.match(err, /certificate/i);
    assert.equal(s.server.mqtt.broker!.isConnected(profile.mqtt.client_id), false);
    await agent.stop();
  });

  test("the host name is checked: a name the server certificate does not carry is refused even with the right CA", async (t) => {
    const s = await startSvc(t, tempDir(t, "svc-tls-data-"));
    const p = agentProfileSchema.parse(await bindThroughRest(s));
    // MQTT.js exactly as runAgent configures it for mqtts, reaching the listener under another name.
    const toLoopback: LookupFunction = (_host, opts, cb) => {
      if (opts.all) (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address: "127.0.0.1", family: 4 }]);
      else cb(null, "127.0.0.1", 4);
    };
    const client = mqtt.connect(`mqtts://not-in-the-certificate.test:${p.mqtt.port}`, {
      protocolVersion: 4,
      clientId: p.mqtt.client_id,
      username: p.mqtt.username,
      password: p.mqtt.password,
      clean: true,
      reconnectPeriod: 0,
      ca: p.mqtt.ca_cert!,
      lookup: toLoopback,
    } as mqtt.IClientOptions);
    t.after(() => client.end(true));
    const err = await new Promise<Error>((resolve) => {
      client.once("error", resolve);
      client.once("connect", () => resolve(new Error("unexpectedly connected")));
    });
    assert.match(err.message, /altnames|does not match/i);
    assert.equal(s.server.mqtt.broker!.isConnected(p.mqtt.client_id), false);
  });

  test("the generated CA survives a restart: a second profile after reopening the same data dir carries the same CA PEM; keys 0600, directory 0700", async (t) => {
    const dataDir = tempDir(t, "svc-tls-data-");
    const first = await startSvc(t, dataDir);
    const ca1 = (await bindThroughRest(first)).mqtt.ca_cert as string;
    const serverPem1 = readFileSync(join(dataDir, "tls", "server.pem"), "utf8");
    await first.close();

    const second = await startSvc(t, dataDir);
    const p2 = agentProfileSchema.parse(await bindThroughRest(second));
    assert.equal(p2.mqtt.ca_cert, ca1, "the same CA: agents bound before the restart keep trusting the broker");
    assert.equal(readFileSync(join(dataDir, "tls", "server.pem"), "utf8"), serverPem1, "the server certificate is reused too");
    assert.equal(statSync(join(dataDir, "tls")).mode & 0o777, 0o700);
    for (const key of ["ca.key", "server.key"]) assert.equal(statSync(join(dataDir, "tls", key)).mode & 0o777, 0o600, key);
    // And it still serves: an agent with the new profile connects.
    startAgentInProcess(t, p2, "svc-tls-agent-");
    await eventually("online after the restart", async () => ((await presence(second, p2)) === "online" ? true : undefined));
  });

  test("certificate from files: the listener serves it and profiles carry the CA file's PEM", async (t) => {
    const files = await otherMaterial(t, "mqtt.example.test");
    const dir = tempDir(t, "svc-tls-files-");
    const paths = { cert: join(dir, "cert.pem"), key: join(dir, "key.pem"), ca: join(dir, "ca.pem") };
    writeFileSync(paths.cert, files.certPem);
    writeFileSync(paths.key, files.keyPem, { mode: 0o600 });
    writeFileSync(paths.ca, files.caPem);
    const dataDir = tempDir(t, "svc-tls-data-");
    const s = await startSvc(t, dataDir, { mqttTlsCertFile: paths.cert, mqttTlsKeyFile: paths.key, mqttTlsCaFile: paths.ca });
    const profile = agentProfileSchema.parse(await bindThroughRest(s));
    assert.equal(profile.mqtt.ca_cert, files.caPem);
    assert.throws(() => statSync(join(dataDir, "tls")), /ENOENT/, "nothing generated when files are given");
    startAgentInProcess(t, profile, "svc-tls-agent-"); // host "localhost": a SAN of the file's certificate
    await eventually("online with the file certificate", async () => ((await presence(s, profile)) === "online" ? true : undefined));
  });

  test("TLS disabled (the default): tls false, the plain port, no ca_cert, no TLS listener (spec §2.6)", async (t) => {
    const s = await startSvc(t, tempDir(t, "svc-tls-data-"), { mqttTlsEnabled: false });
    const raw = await bindThroughRest(s);
    assert.equal(raw.mqtt.tls, false);
    assert.equal(raw.mqtt.port, s.server.mqtt.broker!.port);
    assert.equal("ca_cert" in raw.mqtt, false, "spec §2.6: the CA is present only when tls is true");
    assert.equal(s.server.mqtt.broker!.tlsPort, null);
  });
});

describe("the embedded broker's TLS listener and the backend over mqtts (spec §1.9)", () => {
  const BACKEND_PASSWORD = "backend-password-0123456789";
  const users: BrokerUserLookup = {
    find: (u) => (u === "svc-backend" ? { identity: { kind: "backend" }, passwordHash: brokerPasswordHash(BACKEND_PASSWORD) } : undefined),
  };

  async function tlsBroker(t: TestContext): Promise<{ broker: EmbeddedBroker; material: TlsMaterial }> {
    const material = await otherMaterial(t);
    const broker = await EmbeddedBroker.start({
      host: "127.0.0.1",
      port: 0,
      users,
      log: silent,
      tls: { port: 0, key: material.keyPem, cert: material.certPem },
    });
    t.after(() => broker.close());
    return { broker, material };
  }

  /** A logger whose lines are kept (pino JSON), to see why a client failed. */
  function recordingLogger() {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString("utf8").split("\n")) if (l.trim() !== "") lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    return { log: createLogger("debug", sink), lines };
  }

  test("BackendMqttClient connects over mqtts with the CA (SVC_MQTT_CA_FILE) and fails without it (system trust)", async (t) => {
    const { broker, material } = await tlsBroker(t);
    const url = `mqtts://localhost:${broker.tlsPort}`;

    const good = BackendMqttClient.start({ url, username: "svc-backend", password: BACKEND_PASSWORD, ca: material.caPem, log: silent, onMessage: () => undefined });
    t.after(() => good.close());
    await eventually("the backend connected over mqtts", () => good.connected || undefined);

    const rec = recordingLogger();
    const bad = BackendMqttClient.start({ url, username: "svc-backend", password: BACKEND_PASSWORD, log: rec.log, onMessage: () => undefined });
    t.after(() => bad.close());
    const failure = await eventually("the backend's TLS failure", () => rec.lines.find((l) => typeof l.err === "string" && /certificate/i.test(l.err)));
    assert.match(String(failure.err), /certificate/i);
    assert.equal(bad.connected, false);
    assert.equal(broker.connectedCount(), 1, "only the client with the CA got in");
    await bad.close();
  });

  test("the TLS listener applies the same packet-size guard as the plain one", async (t) => {
    const { broker, material } = await tlsBroker(t);
    const socket = tlsConnect({ host: "127.0.0.1", port: broker.tlsPort!, ca: material.caPem, servername: "localhost" });
    t.after(() => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      socket.once("secureConnect", resolve);
      socket.once("error", reject);
    });
    let closed = false;
    socket.once("close", () => (closed = true));
    socket.on("error", () => undefined); // the broker resets it
    // A CONNECT whose fixed header declares 100 MB (remaining length 0xff 0xff 0xff 0x2f).
    socket.write(Buffer.from([0x10, 0xff, 0xff, 0xff, 0x2f, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54]));
    await eventually("the TLS socket closed by the broker", () => closed || undefined);
  });

  test("close() closes both listeners", async (t) => {
    const { broker } = await tlsBroker(t);
    const tlsPort = broker.tlsPort!;
    await broker.close();
    const refused = await new Promise<string>((resolve) => {
      const s = tlsConnect({ host: "127.0.0.1", port: tlsPort, rejectUnauthorized: false });
      s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
      s.once("secureConnect", () => {
        s.destroy();
        resolve("connected");
      });
    });
    assert.equal(refused, "ECONNREFUSED");
  });
});

describe("generated CA and server certificate (generated once, kept in the data directory)", () => {
  test("the server certificate names the public host, localhost and 127.0.0.1 and is issued by the CA", async (t) => {
    const m = await ensureGeneratedTls({ dir: join(tempDir(t, "svc-tls-gen-"), "tls"), publicHost: "mesh.example.com", now: Date.now(), log: silent });
    const cert = new X509Certificate(m.certPem);
    const ca = new X509Certificate(m.caPem);
    assert.ok(cert.checkIssued(ca) && cert.verify(ca.publicKey));
    assert.equal(cert.ca, false);
    assert.ok(cert.checkHost("mesh.example.com") && cert.checkHost("localhost") && cert.checkIP("127.0.0.1"));
    assert.equal(cert.checkHost("other.example.com"), undefined);
    const ip = await ensureGeneratedTls({ dir: join(tempDir(t, "svc-tls-gen-"), "tls"), publicHost: "[2001:db8::7]", now: Date.now(), log: silent });
    assert.ok(new X509Certificate(ip.certPem).checkIP("2001:db8::7"), "an IPv6 public host becomes an IP SAN");
  });

  test("near expiry or with a changed public host the server certificate is re-issued by the same CA", async (t) => {
    const dir = join(tempDir(t, "svc-tls-gen-"), "tls");
    const now = Date.now();
    const a = await ensureGeneratedTls({ dir, publicHost: "mesh.example.com", now, log: silent });
    const same = await ensureGeneratedTls({ dir, publicHost: "mesh.example.com", now: now + SERVER_VALIDITY_MS - SERVER_RENEW_BEFORE_MS - 60_000, log: silent });
    assert.equal(same.certPem, a.certPem, "still outside the renewal window: reused");
    const renewed = await ensureGeneratedTls({ dir, publicHost: "mesh.example.com", now: now + SERVER_VALIDITY_MS - SERVER_RENEW_BEFORE_MS + 60_000, log: silent });
    assert.notEqual(renewed.certPem, a.certPem, "inside the renewal window: re-issued");
    assert.equal(renewed.caPem, a.caPem, "by the same CA");
    const moved = await ensureGeneratedTls({ dir, publicHost: "203.0.113.9", now: Date.now(), log: silent });
    assert.equal(moved.caPem, a.caPem);
    assert.ok(new X509Certificate(moved.certPem).checkIP("203.0.113.9"), "the new public host is named");
  });

  test("a damaged CA key stops start-up instead of silently replacing the CA agents trust", async (t) => {
    const dir = join(tempDir(t, "svc-tls-gen-"), "tls");
    const a = await ensureGeneratedTls({ dir, publicHost: "localhost", now: Date.now(), log: silent });
    const other = await otherMaterial(t);
    writeFileSync(join(dir, "ca.key"), other.keyPem);
    await assert.rejects(ensureGeneratedTls({ dir, publicHost: "localhost", now: Date.now(), log: silent }), /does not belong to the CA/);
    assert.equal(readFileSync(join(dir, "ca.pem"), "utf8"), a.caPem, "the CA certificate is untouched");
  });
});

describe("TLS settings (spec §1.9; one-line SettingsError)", () => {
  test("defaults: TLS off, listener port 8883, no files", () => {
    const s = loadSettings({});
    assert.equal(s.mqttTlsEnabled, false);
    assert.equal(s.embeddedBrokerTlsPort, 8883);
    assert.equal(s.mqttPublicTlsPort, undefined);
    assert.equal(s.mqttTlsCertFile, undefined);
    assert.equal(s.mqttCaFile, undefined);
    const on = loadSettings({ SVC_MQTT_TLS_ENABLED: "true", SVC_MQTT_PUBLIC_TLS_PORT: "18883", SVC_MQTT_CA_FILE: "/etc/svc/broker-ca.pem" });
    assert.equal(on.mqttTlsEnabled, true);
    assert.equal(on.mqttPublicTlsPort, 18883);
    assert.equal(on.mqttCaFile, "/etc/svc/broker-ca.pem");
  });

  test("a partial certificate file set is refused, naming the first missing variable", () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ SVC_MQTT_TLS_CERT_FILE: "/c.pem" }, "SVC_MQTT_TLS_KEY_FILE"],
      [{ SVC_MQTT_TLS_CERT_FILE: "/c.pem", SVC_MQTT_TLS_KEY_FILE: "/k.pem" }, "SVC_MQTT_TLS_CA_FILE"],
      [{ SVC_MQTT_TLS_CA_FILE: "/ca.pem" }, "SVC_MQTT_TLS_CERT_FILE"],
    ];
    for (const [env, name] of cases) {
      assert.throws(
        () => loadSettings({ SVC_MQTT_TLS_ENABLED: "true", ...env }),
        (err: unknown) => err instanceof SettingsError && err.message.startsWith(`invalid setting ${name}:`) && !err.message.includes("\n"),
        JSON.stringify(env),
      );
    }
    const all = loadSettings({ SVC_MQTT_TLS_CERT_FILE: "/c.pem", SVC_MQTT_TLS_KEY_FILE: "/k.pem", SVC_MQTT_TLS_CA_FILE: "/ca.pem" });
    assert.equal(all.mqttTlsKeyFile, "/k.pem");
  });

  test("an external broker holds its own certificate: the CA file alone is accepted, a certificate or key file is refused", () => {
    const mosquitto = { SVC_MQTT_BROKER: "mosquitto", SVC_MQTT_URL: "mqtts://broker.example.test:8883", SVC_MOSQUITTO_ADMIN_PASSWORD: "admin-password-0123456789", SVC_MQTT_TLS_ENABLED: "true" };
    assert.equal(loadSettings({ ...mosquitto, SVC_MQTT_TLS_CA_FILE: "/ca.pem" }).mqttTlsCaFile, "/ca.pem");
    assert.throws(
      () => loadSettings({ ...mosquitto, SVC_MQTT_TLS_CA_FILE: "/ca.pem", SVC_MQTT_TLS_CERT_FILE: "/c.pem", SVC_MQTT_TLS_KEY_FILE: "/k.pem" }),
      /^SettingsError: invalid setting SVC_MQTT_TLS_CERT_FILE: only the embedded broker serves TLS itself/,
    );
  });

  test("resolveMqttTls: an external broker gets no listener; profiles carry the CA file, or nothing (system trust); TLS off → nothing", async (t) => {
    const m = await otherMaterial(t);
    const caFile = join(tempDir(t, "svc-tls-files-"), "ca.pem");
    writeFileSync(caFile, m.caPem);
    const opts = { publicHost: "broker.example.test", now: Date.now(), log: silent };
    const dataDir = tempDir(t, "svc-tls-data-");
    const external = testSettings({ dataDir, mqttBroker: "mosquitto", mqttTlsEnabled: true, mqttTlsCaFile: caFile });
    assert.deepEqual(await resolveMqttTls(external, opts), { listener: null, profileCa: m.caPem });
    assert.deepEqual(await resolveMqttTls({ ...external, mqttTlsCaFile: undefined }, opts), { listener: null, profileCa: undefined });
    assert.deepEqual(await resolveMqttTls({ ...external, mqttBroker: "embedded", mqttTlsEnabled: false }, opts), { listener: null, profileCa: undefined });
    assert.throws(() => statSync(join(dataDir, "tls")), /ENOENT/, "nothing generated for an external broker");
  });

  test("the TLS listener port must differ from the plain one; bad values are refused", () => {
    assert.throws(() => loadSettings({ SVC_MQTT_TLS_ENABLED: "true", SVC_EMBEDDED_BROKER_TLS_PORT: "1883" }), /SVC_EMBEDDED_BROKER_TLS_PORT/);
    assert.throws(() => loadSettings({ SVC_MQTT_TLS_ENABLED: "maybe" }), /SVC_MQTT_TLS_ENABLED/);
    assert.throws(() => loadSettings({ SVC_MQTT_PUBLIC_TLS_PORT: "0" }), /SVC_MQTT_PUBLIC_TLS_PORT/);
  });

  test("certificate files that do not fit together are refused at start with the variable named", async (t) => {
    const a = await otherMaterial(t);
    const b = await otherMaterial(t);
    const dir = tempDir(t, "svc-tls-files-");
    writeFileSync(join(dir, "cert.pem"), a.certPem);
    writeFileSync(join(dir, "key.pem"), b.keyPem);
    writeFileSync(join(dir, "ca.pem"), a.caPem);
    writeFileSync(join(dir, "junk.pem"), "not a certificate");
    const opts = { publicHost: "localhost", now: Date.now(), log: silent };
    await assert.rejects(
      readTlsFiles({ certFile: join(dir, "cert.pem"), keyFile: join(dir, "key.pem"), caFile: join(dir, "ca.pem") }, opts),
      (err: unknown) => err instanceof SettingsError && /^invalid setting SVC_MQTT_TLS_KEY_FILE: .* does not belong/.test(err.message),
    );
    await assert.rejects(
      readTlsFiles({ certFile: join(dir, "cert.pem"), keyFile: join(dir, "key.pem"), caFile: join(dir, "junk.pem") }, opts),
      /^SettingsError: invalid setting SVC_MQTT_TLS_CA_FILE: .* holds no PEM certificate/,
    );
    await assert.rejects(
      readTlsFiles({ certFile: join(dir, "missing.pem"), keyFile: join(dir, "key.pem"), caFile: join(dir, "ca.pem") }, opts),
      /invalid setting SVC_MQTT_TLS_CERT_FILE: cannot read .* \(ENOENT\)/,
    );
  });
});
