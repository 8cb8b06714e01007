/**
 * Reads back what the console draws as a QR code: a browser screenshot of the element, decoded
 * by a real QR decoder (`zbarimg`, Debian's zbar-tools), not by the library that drew it.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Locator } from "playwright-core";

/**
 * The data of the one QR code `locator` shows, byte for byte (`-Sbinary`: no charset guessing).
 * @throws when zbarimg finds no code (exit status 4) or fails
 */
export async function decodeQr(locator: Locator): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "svc-qr-"));
  try {
    const file = join(dir, "qr.png");
    writeFileSync(file, await locator.screenshot({ animations: "disabled" }));
    const { stdout } = await promisify(execFile)("zbarimg", ["--quiet", "--raw", "-Sbinary", file], { encoding: "buffer", maxBuffer: 1 << 20 });
    return stdout.toString("utf8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
