import { createRequire } from "node:module";

/** The server's one current system version `{version}` (spec §9 rule 2), from package.json. */
export const VERSION: string = (createRequire(import.meta.url)("../package.json") as { version: string }).version;
