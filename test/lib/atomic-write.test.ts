import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { isAtomicWriteTemp, writeFileAtomic } from "../../src/lib/atomic-write.js";
import { readdirOrEmpty } from "../../src/lib/fs.js";

async function tempDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "svc-lib-atomic-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test("writeFileAtomic: the mode is exact under a narrowing umask and replaces a looser existing file's mode", async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, "unit.service");
  await writeFile(path, "old\n", { mode: 0o600 });
  const umask = process.umask(0o077);
  try {
    await writeFileAtomic(path, "new\n", { mode: 0o644 });
  } finally {
    process.umask(umask);
  }
  assert.equal(await readFile(path, "utf8"), "new\n");
  assert.equal((await stat(path)).mode & 0o777, 0o644);
  assert.deepEqual(await readdir(dir), ["unit.service"], "no temp file left behind");
});

test("writeFileAtomic: default mode 0600; bytes are written as they are", async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, "a.zip");
  const bytes = Buffer.from([0, 1, 2, 255]);
  await writeFileAtomic(path, bytes, { fsync: false });
  assert.deepEqual(await readFile(path), bytes);
  assert.equal((await stat(path)).mode & 0o777, 0o600);
});

test("writeFileAtomic: a missing parent fails with ENOENT unless mkdir is asked for, which uses its mode", async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, "x", "y", "profile.json");
  await assert.rejects(writeFileAtomic(path, "{}"), { code: "ENOENT" });
  await writeFileAtomic(path, "{}", { mkdir: { mode: 0o700 } });
  assert.equal((await stat(join(dir, "x"))).mode & 0o777, 0o700);
  assert.equal((await stat(join(dir, "x", "y"))).mode & 0o777, 0o700);
  assert.equal(await readFile(path, "utf8"), "{}");
});

test("writeFileAtomic: a failed rename leaves the target and no temp file; leftovers are recognised by name", async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, "target");
  await mkdir(path);
  await assert.rejects(writeFileAtomic(path, "x"));
  assert.deepEqual(await readdir(dir), ["target"]);
  assert.equal(isAtomicWriteTemp(`.target.${process.pid}.0123456789ab.tmp`), true);
  assert.equal(isAtomicWriteTemp("target.tmp"), false);
  assert.equal(isAtomicWriteTemp(".target.json.tmp"), false);
});

test("readdirOrEmpty: a missing directory is empty; other errors are thrown", async (t) => {
  const dir = await tempDir(t);
  assert.deepEqual(await readdirOrEmpty(join(dir, "none")), []);
  await writeFile(join(dir, "file"), "");
  assert.deepEqual(await readdirOrEmpty(dir), ["file"]);
  await assert.rejects(readdirOrEmpty(join(dir, "file")), { code: "ENOTDIR" });
});
