import { z } from "zod";

/**
 * Formats of a node config download (spec §4 rows 1–2): `wireguard` is the rendered wg-quick /
 * awg-quick text itself (spec §6.3 `config_text`, byte for byte, the default); `amneziawg` the
 * text reduced to what the AmneziaWG apps accept; `amneziavpn` the AmneziaVPN app's `vpn://`
 * link (src/domain/client-formats.ts).
 */
export const configFormatSchema = z.enum(["wireguard", "amneziawg", "amneziavpn"]);
export type ConfigFormat = z.output<typeof configFormatSchema>;
