/**
 * A node config download in one of its formats (spec §4 rows 1–2; src/protocol/config-formats.ts):
 * the staged text as it is, or the Amnezia apps' forms derived from it (src/domain/client-formats.ts).
 */
import { ClientFormatRefusal, toAmneziaVpnLink, toAmneziaWgText } from "../domain/client-formats.js";
import { AppError } from "../errors.js";
import { configFileName } from "../protocol/config-file-name.js";
import type { ConfigFormat } from "../protocol/config-formats.js";

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
  const filename = configFileName({ name: staged.config_name, id: staged.node.config_id }, { name: staged.node.name, id: staged.node.node_id });
  try {
    if (format === "amneziawg") return { body: toAmneziaWgText(staged.config_text), filename };
    if (format === "amneziavpn") {
      const description = `${staged.config_name} – ${staged.node.name}`;
      return { body: toAmneziaVpnLink(staged.config_text, { description }), filename: filename.replace(/\.conf$/, ".vpn") };
    }
    return { body: staged.config_text, filename };
  } catch (err) {
    if (err instanceof ClientFormatRefusal) throw new AppError("CONFLICT", err.message, { format: err.format, reason: err.reason });
    throw err;
  }
}
