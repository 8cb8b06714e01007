import { createRequire } from "node:module";

/**
 * package.json relative to this module: `src/lib/version.ts` run from source (tsx) sits two
 * levels below the repository root, the compiled `dist/src/lib/version.js` three (the production
 * build).
 */
const PACKAGE_JSON = import.meta.url.endsWith(".ts") ? "../../package.json" : "../../../package.json";

/** The server's one current system version `{version}` (spec §9 rule 2), from package.json. */
export const VERSION: string = (createRequire(import.meta.url)(PACKAGE_JSON) as { version: string }).version;
