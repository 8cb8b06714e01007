/**
 * The file name a node's config is downloaded under (the `content-disposition` of the config
 * download, and the name the console's `curl -o` and download link use): `<config>-<node>.conf`.
 *
 * Why this shape: a folder of downloads named `svc0.conf` cannot tell two nodes apart, so the
 * name carries the config and the node. The WireGuard apps (Windows, macOS, Android, iOS) take
 * the tunnel's name from the imported file's name and accept `^[a-zA-Z0-9_=+.-]{1,32}$`
 * (wireguard-windows `conf/name.go`), so the stem keeps to that alphabet and to 32 characters.
 * wg-quick takes the *interface* name from the file name too, with the stricter rule
 * `^[a-zA-Z0-9_=+.-]{1,15}$`: the node's own `interface_name` (svc0 by default) is that name, and
 * the console's hint installs the download as `/etc/wireguard/<interface_name>.conf` (or
 * `/etc/amnezia/amneziawg/…`) before `wg-quick up <interface_name>` instead of running
 * wg-quick on the downloaded name.
 */

/** The longest stem (without `.conf`): the WireGuard apps' tunnel-name limit. */
export const CONFIG_FILE_STEM_MAX = 32;

/** Characters kept as they are; every run of others becomes one `-`. */
const UNSAFE_RUN = /[^A-Za-z0-9_=+.-]+/g;

/** `name` in the tunnel-name alphabet: unsafe runs as `-`, no `-` or `.` at either end. */
function slug(name: string): string {
  return name.replace(UNSAFE_RUN, "-").replace(/^[-.]+|[-.]+$/g, "");
}

/** `text` cut to `max` characters, without a `-` or `.` left dangling at the cut. */
function cut(text: string, max: number): string {
  return text.slice(0, Math.max(0, max)).replace(/[-.]+$/, "");
}

/**
 * `<config>-<node>.conf` for a node's config download, each part reduced to
 * `[A-Za-z0-9_=+.-]`, the stem at most {@link CONFIG_FILE_STEM_MAX} characters: the node's part
 * keeps up to 20 of them, the config's part the rest. A name with no usable character falls
 * back to its id (ids are `^[a-z0-9][a-z0-9_-]{0,63}$`).
 * @example configFileName({ name: "Office mesh", id: "c1" }, { name: "laptop 7", id: "n1" }) === "Office-mesh-laptop-7.conf"
 */
export function configFileName(config: { name: string; id: string }, node: { name: string; id: string }): string {
  const nodePart = cut(slug(node.name) || slug(node.id), 20);
  const configPart = cut(slug(config.name) || slug(config.id), CONFIG_FILE_STEM_MAX - 1 - nodePart.length);
  const stem = configPart === "" ? nodePart : `${configPart}-${nodePart}`;
  return `${stem}.conf`;
}
