import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import * as yazl from "yazl";
import { z } from "zod";
import { readdirOrEmpty } from "../lib/fs.js";
import type { Logger } from "../logger.js";
import { isAppError } from "../errors.js";
import { ID_PATTERN } from "../protocol/ids.js";
import type { MeshService } from "./mesh.service.js";

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

/**
 * Time (ms) a package step may run before it yields to the event loop (a bulk
 * package of a 1,000-node full mesh — ~100 MB of text, most of it rendered on demand — blocks no
 * turn for long). A tuning constant.
 */
const PACKAGE_STEP_MS = 10;

/** Yields to the event loop once the running turn has used `stepMs`. */
function stepper(stepMs: number): () => Promise<void> {
  let start = performance.now();
  return async () => {
    if (performance.now() - start < stepMs) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    start = performance.now();
  };
}

/**
 * The package contents of the given configs, in that order: every node's staged config text
 * (rendered and stored on demand when lazily staged: `MeshService.getStagedConfig`), yielding to
 * the event loop between nodes once a turn has run `stepMs` ms (default {@link PACKAGE_STEP_MS}).
 * A node deleted meanwhile or never staged is left out.
 * @throws AppError NOT_FOUND for an unknown config id
 */
export async function collectPackageConfigs(
  mesh: Pick<MeshService, "getConfig" | "getStagedConfig">,
  configIds: readonly string[],
  stepMs = PACKAGE_STEP_MS,
): Promise<PackageConfig[]> {
  const step = stepper(stepMs);
  const configs: PackageConfig[] = [];
  for (const configId of configIds) {
    const config = await mesh.getConfig(configId); // NOT_FOUND for unknown ids
    const nodes: PackageConfig["nodes"] = [];
    for (const node of config.nodes) {
      await step();
      try {
        const staged = await mesh.getStagedConfig(configId, node.node_id);
        nodes.push({ nodeId: node.node_id, interfaceName: node.interface_name, configText: staged.config_text });
      } catch (err) {
        if (!isAppError(err, "NOT_FOUND")) throw err;
        // Deleted meanwhile, or never staged: nothing to package for it.
      }
    }
    configs.push({ configId, name: config.name, nodes });
  }
  return configs;
}

/**
 * Writes the package zip (regular files, mode 0600: each holds a private key). Entries are added
 * (encoded, CRC-32 computed) in steps of about `stepMs` ms per turn (default {@link PACKAGE_STEP_MS}).
 */
export async function writePackageZip(entries: Array<{ path: string; text: string }>, outZip: string, mtime: Date, stepMs = PACKAGE_STEP_MS): Promise<void> {
  const zip = new yazl.ZipFile();
  const step = stepper(stepMs);
  for (const e of entries) {
    await step();
    zip.addBuffer(Buffer.from(e.text, "utf8"), e.path, { mtime, mode: 0o100600 });
  }
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
