import { randomBytes } from "node:crypto";
import { mkdir, open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/**
 * Atomic file replacement, shared by every side (DESIGN §2 `src/lib`: the agent imports it
 * too, so it imports nothing of ours). Used for the agent's WireGuard/AmneziaWG config (spec
 * §3.8 step 3) and bind profile (spec §2.6), the CLI's service unit files (spec §5 rule 4), the
 * server's client artifacts (spec §9), snapshot and package sidecars (spec §2.3, §2.4) and the
 * embedded broker's TLS material.
 */

export interface AtomicWriteOptions {
  /**
   * Permission bits of the written file (default `0o600`). Applied exactly: the temp file is
   * created with them and then chmod-ed, so the umask cannot narrow them and an existing file's
   * looser mode is not inherited. On Windows the bits are left to the OS (ACLs decide there).
   */
  mode?: number;
  /**
   * Durability (default true): fsync the file before the rename and, on POSIX, the directory
   * after it, so that after a crash the path holds the old content or the new, never a mix or
   * nothing. False only renames (the reader still never sees half a file).
   */
  fsync?: boolean;
  /**
   * Create the parent directory and missing ancestors first, those created with `mode`
   * (default: `0o777` less the umask). An existing directory keeps its mode. Without this
   * option a missing parent fails with ENOENT.
   */
  mkdir?: { mode?: number };
}

/**
 * Replaces `path` with `data` atomically: writes a temp file in the same directory (named
 * `.{basename}.{pid}.{12 hex}.tmp`, created exclusively), then renames it over `path`. Readers
 * see the old file or the new one. On any failure the temp file is removed and `path` is as it
 * was.
 * @param data text (written as UTF-8) or bytes
 * @throws the fs error of the failed step (ENOENT for a missing parent without `mkdir`, EISDIR
 *   when `path` is a directory, ...); an AggregateError of it and the cleanup error when the
 *   temp file cannot be removed either
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, options: AtomicWriteOptions = {}): Promise<void> {
  const mode = options.mode ?? 0o600;
  const fsync = options.fsync ?? true;
  const dir = dirname(path);
  if (options.mkdir !== undefined) {
    await mkdir(dir, { recursive: true, ...(options.mkdir.mode === undefined ? {} : { mode: options.mkdir.mode }) });
  }
  const temp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`);
  const handle = await open(temp, "wx", mode);
  try {
    try {
      await handle.writeFile(data);
      // The umask may have narrowed the mode on creation; make it exact.
      if (process.platform !== "win32") await handle.chmod(mode);
      if (fsync) await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch((unlinkErr: NodeJS.ErrnoException) => {
      if (unlinkErr.code !== "ENOENT") throw new AggregateError([err, unlinkErr], `writing ${path} failed and ${temp} could not be removed`);
    });
    throw err;
  }
  if (fsync) await syncDirectory(dir);
}

/**
 * True for a temp file {@link writeFileAtomic} leaves behind when the process dies between
 * creating and renaming it (`.{basename}.{pid}.{12 hex}.tmp`); callers remove such leftovers.
 */
export function isAtomicWriteTemp(name: string): boolean {
  return /^\..+\.\d+\.[0-9a-f]{12}\.tmp$/.test(name);
}

/** Makes a rename in `dir` durable (POSIX); a no-op on Windows, where directories cannot be opened. */
async function syncDirectory(dir: string): Promise<void> {
  if (process.platform === "win32") return;
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
