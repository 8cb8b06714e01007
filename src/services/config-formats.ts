/**
 * A node config download in one of its formats (spec §4 rows 1–2; src/protocol/config-formats.ts):
 * the staged text as it is, or the Amnezia apps' forms derived from it (src/domain/client-formats.ts).
 */
import { ClientFormatRefusal, toAmneziaVpnLink, toAmneziaWgText } from "../domain/client-formats.js";
import { AppError } from "../errors.js";
import { configFileName } from "../protocol/config-file-name.js";
import type { ConfigFormat, NodeAppConfigsAnswer } from "../protocol/config-formats.js";
import type { TunnelProtocol } from "../protocol/enums.js";

/** What a node config download needs of the staged config (MeshService.getStagedConfig). */
export interface StagedForDownload {
  config_name: string;
  config_text: string;
  node: { config_id: string; node_id: string; name: string };
}

/**
 * The body and file name of a node config download in `format`.
 * - `wireguard`: the staged text byte for byte (its SHA-256 is the one the agent path compares,
 *   spec §3.5), as `<config>-<node>.conf`.
 * - `amneziawg`: the AmneziaWG apps' text, under the same `.conf` name (the apps take the
 *   tunnel's name from the file's).
 * - `amneziavpn`: the `vpn://` link, one line, as `<config>-<node>.vpn` (the AmneziaVPN app's
 *   own file extension for a shared config); the app lists it as "<config> – <node>".
 * @throws AppError `CONFLICT` (details `{ format, reason }`, reason `host_only_commands`,
 *   `needs_one_server` or `too_large`) when the node's config cannot be had in that format
 */
export function formatNodeConfig(staged: StagedForDownload, format: ConfigFormat): { body: string; filename: string } {
  try {
    return { body: bodyOf(staged, format), filename: fileNameOf(staged, format) };
  } catch (err) {
    if (err instanceof ClientFormatRefusal) throw new AppError("CONFLICT", err.message, { format: err.format, reason: err.reason });
    throw err;
  }
}

/** `<config>-<node>.conf`, or `.vpn` for the AmneziaVPN link. */
function fileNameOf(staged: StagedForDownload, format: ConfigFormat): string {
  const filename = configFileName({ name: staged.config_name, id: staged.node.config_id }, { name: staged.node.name, id: staged.node.node_id });
  return format === "amneziavpn" ? filename.replace(/\.conf$/, ".vpn") : filename;
}

/** @throws ClientFormatRefusal when the config cannot be had in `format` */
function bodyOf(staged: StagedForDownload, format: ConfigFormat): string {
  if (format === "amneziawg") return toAmneziaWgText(staged.config_text);
  if (format === "amneziavpn") return toAmneziaVpnLink(staged.config_text, { description: `${staged.config_name} – ${staged.node.name}` });
  return staged.config_text;
}

/** The client apps in the order the console offers them: each takes the download format of its name. */
const APPS: readonly ConfigFormat[] = ["wireguard", "amneziawg", "amneziavpn"];

/**
 * The node's config for each client app (`GET …/nodes/{node_id}/config/apps`): what
 * {@link formatNodeConfig} serves in that app's format, or why the app cannot take it. The
 * WireGuard app is refused an `awg_2` config (`needs_amnezia_app`: it has no obfuscation, so the
 * tunnel would never come up), although the same text downloads as `wireguard` for awg-quick.
 * @returns entries in the order WireGuard, AmneziaWG, AmneziaVPN
 */
export function nodeAppConfigs(staged: StagedForDownload, protocol: TunnelProtocol): NodeAppConfigsAnswer["apps"] {
  return APPS.map((app) => {
    const filename = fileNameOf(staged, app);
    if (app === "wireguard" && protocol === "awg_2") {
      const message = "the WireGuard app cannot run AmneziaWG's obfuscation (awg_2): use the AmneziaWG or AmneziaVPN app";
      return { app, filename, text: null, refusal: { reason: "needs_amnezia_app", message } };
    }
    try {
      return { app, filename, text: bodyOf(staged, app), refusal: null };
    } catch (err) {
      if (!(err instanceof ClientFormatRefusal)) throw err;
      return { app, filename, text: null, refusal: { reason: err.reason, message: err.message } };
    }
  });
}
