import { readdir } from "node:fs/promises";

/**
 * The entry names of `dir`, or an empty list when `dir` does not exist (a store directory that
 * nothing was written to yet: no snapshots, no packages).
 * @throws the fs error for anything but ENOENT (EACCES, ENOTDIR, ...)
 */
export async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}
