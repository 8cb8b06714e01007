/**
 * Starting a worker thread from a module that may run as TypeScript under `tsx` (`npm start`,
 * `npm test`) or as compiled JavaScript (`npm run start:dist`).
 */
import { Worker, type WorkerOptions } from "node:worker_threads";

/**
 * Starts `entry` (the URL of a `.ts` or `.js` module) in a worker thread. A `.ts` entry is loaded
 * through `tsx`'s loader, registered inside the worker first: Node 20 does not carry the
 * parent's `--import tsx` hooks into a worker's entry point (it fails with
 * `ERR_UNKNOWN_FILE_EXTENSION`).
 * @param entry e.g. `new URL("./store-worker.thread.ts", import.meta.url)`; pick the extension of the
 *   calling module (`import.meta.url.endsWith(".ts")`)
 * @throws Error when `tsx` cannot be resolved for a `.ts` entry
 */
export function startWorker(entry: URL, options: Omit<WorkerOptions, "eval"> = {}): Worker {
  if (!entry.pathname.endsWith(".ts")) return new Worker(entry, options);
  const loader = import.meta.resolve("tsx/esm/api");
  const boot = `import(${JSON.stringify(loader)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`;
  return new Worker(boot, { ...options, eval: true });
}

/** The extension of the calling module's siblings: ".ts" under tsx, ".js" when compiled. */
export function moduleExtension(callerUrl: string): ".ts" | ".js" {
  return callerUrl.endsWith(".ts") ? ".ts" : ".js";
}
