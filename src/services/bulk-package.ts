import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import * as yazl from "yazl";
import { z } from "zod";
import { readdirOrEmpty } from "../lib/fs.js";
import type { Logger } from "../logger.js";
import { ID_PATTERN } from "../protocol/ids.js";

/**
 * The config bulk package file (spec §2.3, §4 rule 8): one zip of every selected node's staged
 * config text, laid out as `{config}/{interface_name}-{node_id}.conf`. Only one package exists
 * at a time; its metadata is the sidecar `{package_id}.json` beside `{package_id}.zip`.
 */

/** The sidecar of the current package. */
export const packageRecordSchema = z.object({
  package_id: z.string().regex(ID_PATTERN),
  filename: z.string(),
  created_at: z.string(),
  created_at_ms: z.number().int(),
  size_bytes: z.number().int().nonnegative(),
  sha256: z.string(),
  config_ids: z.array(z.string()),
  files: z.number().int().nonnegative(),
});
export type PackageRecord = z.infer<typeof packageRecordSchema>;

/** One config's part of a package. */
export interface PackageConfig {
  configId: string;
  name: string;
  nodes: Array<{ nodeId: string; interfaceName: string; configText: string }>;
}

export function packageZipPath(dir: string, packageId: string): string {
  return join(dir, `${packageId}.zip`);
}

export function packageRecordPath(dir: string, packageId: string): string {
  return join(dir, `${packageId}.json`);
}

/**
 * A name safe as one zip path segment on every unzip tool: runs of characters outside
 * `[A-Za-z0-9._-]` become `_`, no leading dot (no `.`/`..`, no hidden files), at most 64 long.
 * @returns the safe name, or "" when nothing is left
 */
export function safeSegment(text: string): string {
  return text
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .replace(/^[._]+/, "")
    .slice(0, 64)
    .replace(/[._]+$/, "");
}

/**
 * The entry paths of a package: `{config name}/{interface_name}-{node_id}.conf`. A config whose
 * name has nothing safe left, or whose safe name another config of the package already took
 * (case-insensitively, for case-insensitive file systems), uses its config_id instead.
 */
export function packageEntries(configs: PackageConfig[]): Array<{ path: string; text: string }> {
  const taken = new Set<string>();
  const out: Array<{ path: string; text: string }> = [];
  for (const c of configs) {
    let dir = safeSegment(c.name);
    if (dir === "" || taken.has(dir.toLowerCase())) dir = c.configId;
    taken.add(dir.toLowerCase());
    for (const n of c.nodes) {
      const iface = safeSegment(n.interfaceName) || "wg";
      out.push({ path: `${dir}/${iface}-${n.nodeId}.conf`, text: n.configText });
    }
  }
  return out;
}

/** Writes the package zip (regular files, mode 0600: each holds a private key). */
export async function writePackageZip(entries: Array<{ path: string; text: string }>, outZip: string, mtime: Date): Promise<void> {
  const zip = new yazl.ZipFile();
  for (const e of entries) zip.addBuffer(Buffer.from(e.text, "utf8"), e.path, { mtime, mode: 0o100600 });
  zip.end();
  await pipeline(zip.outputStream as Readable, createWriteStream(outZip, { mode: 0o600 }));
}

/** Every readable package sidecar of `dir` (normally one); a missing directory is none. */
export async function readPackageRecords(dir: string, log: Logger): Promise<PackageRecord[]> {
  const names = await readdirOrEmpty(dir);
  const out: PackageRecord[] = [];
  for (const name of names) {
    if (!name.endsWith(".json") || name.startsWith(".")) continue;
    try {
      const parsed = packageRecordSchema.safeParse(JSON.parse(await readFile(join(dir, name), "utf8")));
      if (parsed.success && name === `${parsed.data.package_id}.json`) {
        out.push(parsed.data);
        continue;
      }
    } catch {
      // fall through to the warning
    }
    log.warn({ file: name }, "unreadable package record ignored");
  }
  return out;
}
