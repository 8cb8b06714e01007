import type * as X509 from "@peculiar/x509";
import { createPrivateKey, randomBytes, webcrypto, X509Certificate, type KeyObject } from "node:crypto";
import { chmod, mkdir, readFile, rm } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import type { Settings } from "../config.js";
import { SettingsError } from "../config.js";
import { writeFileAtomic } from "../lib/atomic-write.js";
import type { Logger } from "../logger.js";

/**
 * TLS for MQTT (spec §1.9, §2.6, §5 "Agent to broker"; DESIGN §6; docs/history/decisions-2026.md "TLS for MQTT").
 *
 * The embedded broker's TLS listener serves either a certificate from files
 * (`SVC_MQTT_TLS_CERT_FILE`, `SVC_MQTT_TLS_KEY_FILE`, `SVC_MQTT_TLS_CA_FILE`) or a CA and a
 * server certificate generated once and kept in `{dataDir}/tls/`. The CA certificate (never its
 * key) goes into bind profiles as `mqtt.ca_cert`, so an agent trusts exactly that CA.
 *
 * Keys are ECDSA P-256 (fast to generate, accepted by OpenSSL, MQTT.js, Mosquitto and EMQX).
 * Key material is never logged: log lines carry paths and SHA-256 fingerprints only.
 */

/** What the TLS listener serves and what profiles carry. */
export interface TlsMaterial {
  /** PEM of the CA agents trust: `mqtt.ca_cert` of bind profiles (spec §2.6). One or more certificates. */
  caPem: string;
  /** PEM of the server certificate (a chain when the file holds one). */
  certPem: string;
  /** PEM of the server's private key. Never logged. */
  keyPem: string;
  source: "files" | "generated";
}

/** Paths of a deployer-supplied certificate (all three or none: see config.ts). */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile: string;
}

/** Largest CA PEM put into a profile, bytes: the agent's profile schema accepts 64 KiB. */
export const MAX_CA_PEM_BYTES = 64 * 1024;
/** Lifetime of a generated CA, ms (10 years). */
export const CA_VALIDITY_MS = 3650 * 24 * 3600 * 1000;
/** Lifetime of a generated server certificate, ms (2 years; under the 825 days some clients cap at). */
export const SERVER_VALIDITY_MS = 730 * 24 * 3600 * 1000;
/** A generated server certificate closer than this to its expiry is replaced at start, ms (30 days). */
export const SERVER_RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;
/** notBefore is set this far in the past to tolerate clock skew between hosts, ms. */
const BACKDATE_MS = 5 * 60 * 1000;

const EC = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const crypto = webcrypto;

let x509Library: Promise<typeof X509> | undefined;

/**
 * @peculiar/x509, loaded on first use (generating a CA or a server certificate). With tsyringe
 * and the Reflect polyfill it is ~0.3 s of module loading, paid before by every start and every
 * test process that imports the service; only certificate generation needs it.
 */
function x509Lib(): Promise<typeof X509> {
  x509Library ??= (async () => {
    // The library resolves its services through tsyringe, which needs the Reflect metadata
    // polyfill loaded first (the library's README, "Reflect Polyfill Required").
    await import("reflect-metadata");
    const lib = await import("@peculiar/x509");
    // node's webcrypto is the standard Crypto; the library's declaration names the DOM type.
    lib.cryptoProvider.set(crypto as unknown as Parameters<typeof lib.cryptoProvider.set>[0]);
    return lib;
  })();
  return x509Library;
}

/** File names under `{dataDir}/tls/`. */
export const GENERATED_FILES = {
  caCert: "ca.pem",
  caKey: "ca.key",
  serverCert: "server.pem",
  serverKey: "server.key",
} as const;

/**
 * The TLS side of the MQTT settings, resolved at start (broker-connection.ts `BrokerConnection.start`).
 * - `listener`: what the embedded broker's TLS listener serves; null unless TLS is enabled and the
 *   broker is the embedded one.
 * - `profileCa`: the CA PEM bind profiles carry when they prefer TLS; undefined means "none":
 *   TLS disabled, or an external broker whose CA was not given (the agent then uses its system
 *   trust store).
 * @param opts.publicHost the public MQTT host agents connect to (the generated certificate names it)
 * @param opts.now the wall-clock time, ms since the epoch: peers verify certificates against
 *   their real clocks, so this is never a test's simulated clock
 * @throws SettingsError when a configured file cannot be read or does not hold what it should
 * @throws Error when the generated material in the data directory is damaged (the message says
 *   which file; the CA is never replaced silently, since every bound agent trusts it)
 */
export async function resolveMqttTls(
  settings: Settings,
  opts: { publicHost: string; now: number; log: Logger },
): Promise<{ listener: TlsMaterial | null; profileCa: string | undefined }> {
  if (!settings.mqttTlsEnabled) return { listener: null, profileCa: undefined };
  const { mqttTlsCertFile: certFile, mqttTlsKeyFile: keyFile, mqttTlsCaFile: caFile } = settings;
  const { publicHost, now, log } = opts;
  if (settings.mqttBroker === "embedded") {
    const material =
      certFile !== undefined && keyFile !== undefined && caFile !== undefined
        ? await readTlsFiles({ certFile, keyFile, caFile }, { publicHost, now, log })
        : await ensureGeneratedTls({ dir: join(settings.dataDir, "tls"), publicHost, now, log });
    return { listener: material, profileCa: material.caPem };
  }
  return { listener: null, profileCa: caFile === undefined ? undefined : await readCaFile(caFile, "SVC_MQTT_TLS_CA_FILE") };
}

/**
 * Reads a PEM file of one or more CA certificates: the backend's trust for an `mqtts://`
 * `SVC_MQTT_URL` (`SVC_MQTT_CA_FILE`) or the CA put into profiles (`SVC_MQTT_TLS_CA_FILE`).
 * @param setting the variable named in the error
 * @returns the PEM text, at most {@link MAX_CA_PEM_BYTES} bytes
 * @throws SettingsError when the file is unreadable, too large or holds no certificate
 */
export async function readCaFile(path: string, setting: string): Promise<string> {
  const pem = await readSettingFile(path, setting);
  if (Buffer.byteLength(pem) > MAX_CA_PEM_BYTES) throw new SettingsError(`invalid setting ${setting}: ${path} is larger than ${MAX_CA_PEM_BYTES} bytes`);
  parseCertificate(pem, path, setting);
  return pem;
}

/**
 * Reads and checks a deployer-supplied certificate, key and CA: each parses, the key is
 * unencrypted and belongs to the certificate. A certificate that is expired, not issued by the
 * CA file's first certificate (fine with a bundled intermediate) or whose names do not cover
 * the public host is logged as a warning, not refused: the files are the deployer's decision.
 * @throws SettingsError naming the variable of the first file that is wrong
 */
export async function readTlsFiles(files: TlsFiles, opts: { publicHost: string; now: number; log: Logger }): Promise<TlsMaterial> {
  const certPem = await readSettingFile(files.certFile, "SVC_MQTT_TLS_CERT_FILE");
  const keyPem = await readSettingFile(files.keyFile, "SVC_MQTT_TLS_KEY_FILE");
  const caPem = await readCaFile(files.caFile, "SVC_MQTT_TLS_CA_FILE");
  const cert = parseCertificate(certPem, files.certFile, "SVC_MQTT_TLS_CERT_FILE");
  const ca = parseCertificate(caPem, files.caFile, "SVC_MQTT_TLS_CA_FILE");
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new SettingsError(`invalid setting SVC_MQTT_TLS_KEY_FILE: ${files.keyFile} holds no unencrypted PEM private key`);
  }
  if (!cert.checkPrivateKey(key)) {
    throw new SettingsError(`invalid setting SVC_MQTT_TLS_KEY_FILE: ${files.keyFile} does not belong to the certificate in SVC_MQTT_TLS_CERT_FILE`);
  }
  const log = opts.log;
  if (Date.parse(cert.validTo) <= opts.now) log.warn({ file: files.certFile, valid_to: cert.validTo }, "the MQTT TLS certificate has expired");
  if (!cert.checkIssued(ca)) log.warn({ file: files.certFile, ca_file: files.caFile }, "the MQTT TLS certificate is not issued by the first certificate of the CA file");
  if (!coversHost(cert, opts.publicHost)) {
    log.warn({ file: files.certFile, public_host: opts.publicHost }, "the MQTT TLS certificate does not name the public MQTT host; agents will refuse it");
  }
  log.info({ cert_file: files.certFile, fingerprint256: cert.fingerprint256 }, "mqtt tls certificate loaded from files");
  return { caPem, certPem, keyPem, source: "files" };
}

/**
 * The generated CA and server certificate under `dir` (`ca.pem`, `ca.key`, `server.pem`,
 * `server.key`; keys mode 0600, directory 0700, each file written atomically).
 *
 * - No `ca.pem`: a new CA (10 years) and server certificate (2 years) are generated. `ca.pem`
 *   is written last, so an interrupted first start leaves no half CA behind.
 * - An existing CA is reused; its certificate and key must parse and match, else this throws
 *   rather than silently replacing a CA that bound agents trust. An expired CA is replaced
 *   (agents must bind again; logged as an error).
 * - The server certificate is reused unless it is missing, damaged, not issued by the CA,
 *   within {@link SERVER_RENEW_BEFORE_MS} of expiry, or its names no longer cover
 *   `publicHost`, localhost and 127.0.0.1; then a new one is issued by the same CA.
 * @param publicHost the public MQTT host (a DNS name, an IPv4 or an IPv6 address, brackets allowed)
 * @param now current time, ms since the epoch
 * @throws Error when the directory cannot be written or the existing CA is damaged
 */
export async function ensureGeneratedTls(opts: { dir: string; publicHost: string; now: number; log: Logger }): Promise<TlsMaterial> {
  const { dir, now, log } = opts;
  const hosts = sanHosts(opts.publicHost);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const path = (name: keyof typeof GENERATED_FILES) => join(dir, GENERATED_FILES[name]);

  let ca = await loadCa(path("caCert"), path("caKey"));
  if (ca !== null && Date.parse(ca.cert.validTo) - BACKDATE_MS <= now) {
    log.error({ file: path("caCert"), valid_to: ca.cert.validTo }, "the generated MQTT TLS CA expired: a new CA is generated; every agent must bind again");
    // Removed first, so an interruption before the new one is complete starts over cleanly.
    await rm(path("caCert"));
    ca = null;
  }
  let caChanged = false;
  if (ca === null) {
    ca = await generateCa(now);
    await writeFileAtomic(path("caKey"), ca.keyPem, { mode: 0o600 });
    caChanged = true;
  } else {
    await chmod(path("caKey"), 0o600);
  }

  const server = caChanged ? null : await loadServer(path("serverCert"), path("serverKey"));
  const reason = caChanged ? "new CA" : serverProblem(server, ca.cert, hosts, now);
  let certPem: string;
  let keyPem: string;
  if (reason === null && server !== null) {
    certPem = server.certPem;
    keyPem = server.keyPem;
    await chmod(path("serverKey"), 0o600);
  } else {
    const issued = await issueServer(ca, hosts, now);
    certPem = issued.certPem;
    keyPem = issued.keyPem;
    await writeFileAtomic(path("serverKey"), keyPem, { mode: 0o600 });
    await writeFileAtomic(path("serverCert"), certPem, { mode: 0o644 });
    log.info(
      { file: path("serverCert"), reason, hosts, fingerprint256: new X509Certificate(certPem).fingerprint256 },
      "mqtt tls server certificate generated",
    );
  }
  if (caChanged) {
    // Last: its presence means the CA is complete (see above).
    await writeFileAtomic(path("caCert"), ca.certPem, { mode: 0o644 });
    log.info({ file: path("caCert"), fingerprint256: ca.cert.fingerprint256 }, "mqtt tls CA generated");
  }
  return { caPem: ca.certPem, certPem, keyPem, source: "generated" };
}

interface Ca {
  cert: X509Certificate;
  certPem: string;
  keyPem: string;
}

async function loadCa(certPath: string, keyPath: string): Promise<Ca | null> {
  const certPem = await readIfExists(certPath);
  if (certPem === null) return null;
  const keyPem = await readIfExists(keyPath);
  if (keyPem === null) throw new Error(`${keyPath} is missing beside ${certPath}; restore it, or remove ${certPath} to generate a new CA (every agent must then bind again)`);
  let cert: X509Certificate;
  let key: KeyObject;
  try {
    cert = new X509Certificate(certPem);
    key = createPrivateKey(keyPem);
  } catch {
    throw new Error(`${certPath} or ${keyPath} does not parse; restore them, or remove ${certPath} to generate a new CA (every agent must then bind again)`);
  }
  if (!cert.ca || !cert.checkPrivateKey(key)) {
    throw new Error(`${keyPath} does not belong to the CA ${certPath}; restore them, or remove ${certPath} to generate a new CA (every agent must then bind again)`);
  }
  return { cert, certPem, keyPem };
}

async function loadServer(certPath: string, keyPath: string): Promise<{ cert: X509Certificate; certPem: string; keyPem: string } | null> {
  const certPem = await readIfExists(certPath);
  const keyPem = await readIfExists(keyPath);
  if (certPem === null || keyPem === null) return null;
  try {
    const cert = new X509Certificate(certPem);
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return null;
    return { cert, certPem, keyPem };
  } catch {
    return null; // damaged: re-issued by the caller
  }
}

/** Why a stored server certificate cannot be served any more; null when it can. */
function serverProblem(server: { cert: X509Certificate } | null, ca: X509Certificate, hosts: string[], now: number): string | null {
  if (server === null) return "missing or damaged";
  const { cert } = server;
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return "not issued by the CA";
  if (Date.parse(cert.validTo) - SERVER_RENEW_BEFORE_MS <= now) return "expires soon";
  if (!hosts.every((h) => coversHost(cert, h))) return "names changed";
  return null;
}

/** The SAN entries of a generated server certificate: the public host, localhost and 127.0.0.1. */
function sanHosts(publicHost: string): [string, ...string[]] {
  const host = publicHost.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return [host, ...["localhost", "127.0.0.1"].filter((h) => h !== host)];
}

/** Whether the certificate names `host` (an IP address checked against IP SANs, else DNS names). */
export function coversHost(cert: X509Certificate, host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, "$1");
  return isIP(h) === 0 ? cert.checkHost(h) !== undefined : cert.checkIP(h) !== undefined;
}

function serialNumber(): string {
  // 16 random bytes, first bit cleared: a positive integer (RFC 5280 §4.1.2.2).
  const bytes = randomBytes(16);
  bytes.writeUInt8(bytes.readUInt8(0) & 0x7f, 0);
  return bytes.toString("hex");
}

async function exportKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const x509 = await x509Lib();
  return x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

async function generateCa(now: number): Promise<Ca> {
  const x509 = await x509Lib();
  const keys = await crypto.subtle.generateKey(EC, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: [{ CN: ["svc MQTT CA"] }, { O: ["svc mesh control"] }],
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(now + CA_VALIDITY_MS),
    keys,
    signingAlgorithm: EC,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const certPem = cert.toString("pem") + "\n";
  return { cert: new X509Certificate(certPem), certPem, keyPem: await exportKeyPem(keys.privateKey) };
}

async function issueServer(ca: Ca, hosts: readonly [string, ...string[]], now: number): Promise<{ certPem: string; keyPem: string }> {
  const x509 = await x509Lib();
  const caKey = await crypto.subtle.importKey("pkcs8", x509.PemConverter.decodeFirst(ca.keyPem), EC, false, ["sign"]);
  const caCert = new x509.X509Certificate(ca.certPem);
  const keys = await crypto.subtle.generateKey(EC, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: [{ CN: [hosts[0]] }],
    issuer: caCert.subject,
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(now + SERVER_VALIDITY_MS),
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: EC,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(hosts.map((h) => (isIP(h) === 0 ? { type: "dns" as const, value: h } : { type: "ip" as const, value: h }))),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return { certPem: cert.toString("pem") + "\n", keyPem: await exportKeyPem(keys.privateKey) };
}

function parseCertificate(pem: string, path: string, setting: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch {
    throw new SettingsError(`invalid setting ${setting}: ${path} holds no PEM certificate`);
  }
}

async function readSettingFile(path: string, setting: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    throw new SettingsError(`invalid setting ${setting}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
}

async function readIfExists(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

