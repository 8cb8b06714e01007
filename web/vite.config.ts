import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

/**
 * The console build (issue 12, docs/console.md): `web/` → `dist/web/`, served by
 * `src/http/console.plugin.ts`. JSX is compiled by Vite's own transformer (React's automatic
 * runtime), so no React plugin is needed for a production build. Hashed files land in
 * `dist/web/assets/` (served `immutable`); no inline script or style is emitted, so the
 * `Content-Security-Policy` of `'self'` holds.
 */
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/",
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir: fileURLToPath(new URL("../dist/web", import.meta.url)),
    emptyOutDir: true,
    assetsDir: "assets",
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
    rolldownOptions: {
      output: {
        // A lazily loaded page is `features/<area>/page.tsx`: its chunk is named after the area
        // (`mesh-…js`, `node-…js`), not after the file every feature shares.
        chunkFileNames: (chunk) => {
          const area = /features\/([\w-]+)\/page\.tsx$/.exec(chunk.facadeModuleId ?? "")?.[1];
          return `assets/${area ?? "[name]"}-[hash].js`;
        },
      },
      // Libraries' "use client" directives mean nothing in a client-only bundle.
      onwarn(warning, warn) {
        if (warning.code === "MODULE_LEVEL_DIRECTIVE") return;
        warn(warning);
      },
    },
  },
  server: {
    // `npx vite web` during development: the API is the service on its default port.
    proxy: { "/api": { target: "http://127.0.0.1:8080", changeOrigin: false } },
  },
});
