/**
 * A static node's QR codes, one per client app, as a phone would scan them off the console in a
 * real Chromium: each drawn code is decoded by a real QR decoder (zbarimg) from a screenshot and
 * parsed back with decoders written here from the apps' sources, not with the project's encoders:
 * - WireGuard app: the config text itself (spec §4 rows 1–2, §6.3 `config_text`); not offered
 *   for an `awg_2` config, which the WireGuard app cannot run.
 * - AmneziaWG app: a wg-quick text whose keys are all in the apps' whitelist (amneziawg-android
 *   `config/Interface.java`, `config/Peer.java`), `Key = Value`, no empty values.
 * - AmneziaVPN app: amnezia-client's chunked layout (exportController.cpp
 *   `generateQrCodeImageSeries`): base64url of a big-endian QDataStream of qint16 magic 1984,
 *   quint8 count, quint8 index, QByteArray (quint32 length + bytes); the chunks' bytes joined are
 *   the `vpn://` link's qCompress payload (quint32 big-endian length + zlib) of the import JSON.
 * A config too large for a readable code says so instead of drawing one.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import test, { type TestContext } from "node:test";
import { inflateSync } from "node:zlib";
import type { Page } from "playwright-core";
import { requireSystem } from "../helpers/system.js";
import { expectAccessible, expectText, login, screenshot, startConsole, waitLive, type ConsoleHarness } from "./harness.js";
import { reassembleAmneziaVpnChunks } from "../helpers/amneziavpn-decoder.js";
import { decodeQr } from "./qr.js";

/** Keys the AmneziaWG apps' parsers accept, per section (amneziawg-android at 5c16489e). */
const AMNEZIAWG_KEYS = {
  Interface: new Set(["PrivateKey", "Address", "ListenPort", "DNS", "MTU", "ExcludedApplications", "IncludedApplications", "Jc", "Jmin", "Jmax", "S1", "S2", "S3", "S4", "H1", "H2", "H3", "H4", "I1", "I2", "I3", "I4", "I5"]),
  Peer: new Set(["PublicKey", "PresharedKey", "AllowedIPs", "Endpoint", "PersistentKeepalive"]),
};

/**
 * Parses an AmneziaWG app text the way the app does, failing on anything it refuses: a line
 * outside `[Interface]`/`[Peer]`, an unknown key, an empty value.
 * @returns the sections in order, each as a key → value map
 */
function parseAmneziaWgText(text: string): Array<{ name: "Interface" | "Peer"; keys: Map<string, string> }> {
  const sections: Array<{ name: "Interface" | "Peer"; keys: Map<string, string> }> = [];
  for (const line of text.split("\n").filter((l) => l !== "")) {
    if (line === "[Interface]" || line === "[Peer]") {
      sections.push({ name: line === "[Peer]" ? "Peer" : "Interface", keys: new Map() });
      continue;
    }
    const m = /^([A-Za-z0-9]+) = (\S.*)$/.exec(line);
    const section = sections.at(-1);
    assert.ok(m !== null && section !== undefined, `a line the app refuses: ${JSON.stringify(line)}`);
    const [, key = "", value = ""] = m;
    assert.ok(AMNEZIAWG_KEYS[section.name].has(key), `${key} is not a key the AmneziaWG apps accept in [${section.name}]`);
    section.keys.set(key, value);
  }
  return sections;
}

/**
 * Reassembles AmneziaVPN QR chunks and qUncompresses them (a quint32 big-endian length, then a
 * zlib stream): the import document.
 * @returns the compressed bytes and the JSON document they hold
 */
function readAmneziaVpnChunks(chunks: string[]): { payload: Buffer; doc: Record<string, any> } {
  const payload = reassembleAmneziaVpnChunks(chunks);
  const json = inflateSync(payload.subarray(4));
  assert.equal(json.length, payload.readUInt32BE(0), "qCompress's length prefix");
  return { payload, doc: JSON.parse(json.toString("utf8")) };
}

interface Mesh {
  h: ConsoleHarness;
  page: Page;
  configId: string;
  phoneId: string;
  stagedText: string;
}

/** A config with a gateway (public endpoint) and a phone behind it; the phone's page open, its codes shown. */
async function phoneBehindGateway(t: TestContext, protocol: "wireguard" | "awg_2"): Promise<Mesh | undefined> {
  if (!requireSystem(t, { binaries: ["zbarimg"] })) return undefined;
  const h = await startConsole(t);
  if (!h) return undefined;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "Road warriors", tunnel_protocol: protocol, network_cidr: "10.80.0.0/24" });
  await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "gw", mode: "static", public_address: "198.51.100.7", listen_port: 51820 });
  const phone = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "phone", mode: "static" });
  const staged = await h.api("GET", `/api/v1/configs/${cfg.config_id}/nodes/${phone.node_id}/config`);
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${cfg.config_id}/nodes/${phone.node_id}`);
  await expectText(page.getByRole("heading", { level: 1 }), "phone");
  assert.equal(await page.getByRole("img", { name: /^QR code/ }).count(), 0, "nothing drawn until asked (the codes hold the private key)");
  await page.getByRole("button", { name: "Show QR codes" }).click();
  return { h, page, configId: cfg.config_id, phoneId: phone.node_id, stagedText: staged.config_text };
}

/** The `vpn://` link the download serves in `format=amneziavpn`, through a download token. */
async function downloadedLink(m: Mesh): Promise<string> {
  const issued = await m.h.api("POST", `/api/v1/configs/${m.configId}/nodes/${m.phoneId}/download-token`);
  const res = await fetch(new URL(`${issued.download_path}&format=amneziavpn`, m.h.baseUrl));
  assert.equal(res.status, 200);
  return res.text();
}

/** Decodes the AmneziaWG and AmneziaVPN codes and checks they describe the same tunnel as the staged text. */
async function checkAmneziaCodes(m: Mesh): Promise<{ awg: ReturnType<typeof parseAmneziaWgText>; doc: Record<string, any>; awgText: string }> {
  const awgText = await decodeQr(m.page.getByRole("img", { name: "QR code for the AmneziaWG app: phone" }));
  const awg = parseAmneziaWgText(awgText);
  assert.deepEqual(awg.map((s) => s.name), ["Interface", "Peer"]);
  const stagedKey = /^PrivateKey = (\S+)$/m.exec(m.stagedText)?.[1];
  assert.equal(awg[0]?.keys.get("PrivateKey"), stagedKey, "the AmneziaWG code carries the node's key");
  assert.equal(awg[1]?.keys.get("Endpoint"), "198.51.100.7:51820");

  const parts = m.page.getByRole("img", { name: /^QR code for the AmneziaVPN app, part \d+ of \d+: phone$/ });
  const chunks: string[] = [];
  for (const part of await parts.all()) chunks.push(await decodeQr(part));
  assert.ok(chunks.length >= 1);
  const { payload, doc } = readAmneziaVpnChunks(chunks);
  const link = await downloadedLink(m);
  assert.deepEqual(payload, Buffer.from(link.slice("vpn://".length), "base64url"), "the chunks carry the downloaded vpn:// link's bytes");
  assert.equal(doc.hostName, "198.51.100.7");
  assert.equal(doc.description, "Road warriors – phone");
  return { awg, doc, awgText };
}

test("spec §4 rows 1-2: a wireguard phone's page draws a QR code for the WireGuard, AmneziaWG and AmneziaVPN apps, each read back by zbarimg into what that app imports", { timeout: 120_000 }, async (t) => {
  const m = await phoneBehindGateway(t, "wireguard");
  if (!m) return;
  const wg = await decodeQr(m.page.getByRole("img", { name: "QR code for the WireGuard app: phone" }));
  assert.equal(wg, m.stagedText, "the WireGuard app's code is the config text, byte for byte");
  const { doc, awgText } = await checkAmneziaCodes(m);
  assert.equal(doc.defaultContainer, "amnezia-wireguard");
  const last = JSON.parse(doc.containers[0].wireguard.last_config);
  assert.equal(last.config, awgText, "the AmneziaVPN document holds the AmneziaWG text");
  await expectAccessible(m.page, "node-qr-wireguard");
  await screenshot(m.page, "node-qr-wireguard");
});

test("spec §4 rows 1-2: an awg_2 phone's page offers no WireGuard app code (the app cannot run AmneziaWG), and its Amnezia codes carry the obfuscation parameters", { timeout: 120_000 }, async (t) => {
  const m = await phoneBehindGateway(t, "awg_2");
  if (!m) return;
  const wgSection = m.page.getByRole("region", { name: "WireGuard app" });
  await expectText(wgSection, /Not offered: the WireGuard app cannot run AmneziaWG's obfuscation/);
  assert.equal(await wgSection.getByRole("img").count(), 0, "no WireGuard app code for awg_2");
  const { awg, doc } = await checkAmneziaCodes(m);
  for (const key of ["Jc", "Jmin", "Jmax", "S1", "S2", "S3", "S4", "H1", "H2", "H3", "H4"]) {
    const staged: string | undefined = new RegExp(`^${key} = (\\S+)$`, "m").exec(m.stagedText)?.[1];
    assert.ok(staged !== undefined, `${key} is staged`);
    assert.equal(awg[0]?.keys.get(key), staged, `${key} reaches the AmneziaWG app`);
  }
  assert.equal(doc.defaultContainer, "amnezia-awg");
  assert.equal(doc.containers[0].awg.protocol_version, "2");
  await expectAccessible(m.page, "node-qr-awg2");
  await screenshot(m.page, "node-qr-awg2");
});

test("a full-mesh node too large for one QR code: the page says so instead of drawing, AmneziaVPN says why not, and the AmneziaWG file still downloads", { timeout: 120_000 }, async (t) => {
  if (!requireSystem(t, { binaries: ["zbarimg"] })) return;
  const h = await startConsole(t);
  if (!h) return;
  const cfg = await h.api("POST", "/api/v1/configs", { name: "Big mesh", tunnel_protocol: "wireguard", network_cidr: "10.81.0.0/24" });
  for (let i = 1; i <= 14; i++) {
    await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: `site ${i}`, mode: "static", public_address: `198.51.100.${i}`, listen_port: 51820 });
  }
  const node = await h.api("POST", `/api/v1/configs/${cfg.config_id}/nodes`, { name: "laptop", mode: "static" });
  const page = await h.newPage();
  await login(page);
  await waitLive(page);
  await page.goto(`/configs/${cfg.config_id}/nodes/${node.node_id}`);
  await page.getByRole("button", { name: "Show QR codes" }).click();
  for (const app of ["WireGuard app", "AmneziaWG app"]) {
    await expectText(page.getByRole("region", { name: app }), /Too large for one QR code: [\d,]+ bytes, where a code a phone reads holds about 1,273\. Import the file Big-mesh-laptop\.conf/);
  }
  await expectText(page.getByRole("region", { name: "AmneziaVPN app" }), /Not offered: the AmneziaVPN app connects to one server/);
  assert.equal(await page.getByRole("img", { name: /^QR code/ }).count(), 0, "no unreadable code is drawn");

  await page.getByRole("button", { name: "Create download link" }).click();
  assert.equal(await page.getByRole("link", { name: /for the AmneziaVPN app$/ }).count(), 0, "no AmneziaVPN file for a config it refuses");
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Download Big-mesh-laptop.conf for the AmneziaWG app" }).click()]);
  const sections = parseAmneziaWgText(await readFile(await download.path(), "utf8"));
  assert.equal(sections.filter((s) => s.name === "Peer").length, 14, "every peer, in a text the app accepts");
  await screenshot(page, "node-qr-too-large");
});
