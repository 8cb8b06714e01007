import { z } from "zod";

/**
 * Formats of a node config download (spec §4 rows 1–2): `wireguard` is the rendered wg-quick /
 * awg-quick text itself (spec §6.3 `config_text`, byte for byte, the default); `amneziawg` the
 * text reduced to what the AmneziaWG apps accept; `amneziavpn` the AmneziaVPN app's `vpn://`
 * link (src/domain/client-formats.ts).
 */
export const configFormatSchema = z.enum(["wireguard", "amneziawg", "amneziavpn"]);
export type ConfigFormat = z.output<typeof configFormatSchema>;

/**
 * Why a client app cannot take a node's config:
 * - `host_only_commands`: the config runs PostUp/PostDown (a hub's forwarding, a port forward);
 * - `needs_one_server`: the AmneziaVPN app connects to one server, the node has several peers or
 *   one without an endpoint;
 * - `too_large`: more than the AmneziaVPN app's 255 QR chunks;
 * - `needs_amnezia_app`: an `awg_2` config, which the WireGuard app cannot run (no obfuscation).
 */
export const clientFormatRefusalReasonSchema = z.enum(["host_only_commands", "needs_one_server", "too_large", "needs_amnezia_app"]);
export type ClientFormatRefusalReason = z.output<typeof clientFormatRefusalReasonSchema>;

/**
 * `GET …/nodes/{node_id}/config/apps`: the node's config for each client app, in the order
 * WireGuard, AmneziaWG, AmneziaVPN. `text` is what the app imports (file or QR code: the config
 * text, or the `vpn://` link) and `filename` the download's name; `text` is null and `refusal`
 * says why when the app cannot take this config.
 */
export const nodeAppConfigsAnswer = z.object({
  config_id: z.string(),
  node_id: z.string(),
  config_version: z.number(),
  config_sha256: z.string(),
  apps: z.array(
    z.object({
      app: configFormatSchema,
      filename: z.string(),
      text: z.string().nullable(),
      refusal: z.object({ reason: clientFormatRefusalReasonSchema, message: z.string() }).nullable(),
    }),
  ),
});
export type NodeAppConfigsAnswer = z.output<typeof nodeAppConfigsAnswer>;
