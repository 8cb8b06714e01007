# syntax=docker/dockerfile:1
# The svc mesh control backend (README.md "Production brokers, TLS and monitoring"). The image
# runs compiled JavaScript (`node dist/src/main.js`): TypeScript is compiled in the build stage,
# and the runtime holds production dependencies only (no typescript, no tsx). esbuild stays: the
# service bundles the agent for local_build client artifacts (src/services/client-bundle.ts).
#
# Node.js 26, the Active LTS line (README.md "Supported Node.js versions"): its major is the one
# scripts/node-lts.sh runs the test suite on and one of the two ranges of "engines" in
# package.json (test/deploy/node-runtime.test.ts checks they agree). Debian bookworm's own
# nodejs package is 18, so the base image brings Node.

# --- build: every dependency (install scripts skipped: tsc needs no native module), then tsc
FROM node:26-bookworm-slim AS build
WORKDIR /opt/svc
COPY package.json package-lock.json .npmrc ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The web console: built by `npm run build` into dist/web.
COPY web ./web
COPY scripts/build-web.ts ./scripts/build-web.ts
RUN npm run build

# --- deps: production node_modules. better-sqlite3 downloads its prebuilt binary for this Node's
# ABI, or compiles here when the download fails (Node 26's headers need g++ 11 or later: bookworm
# has 12).
FROM node:26-bookworm-slim AS deps
WORKDIR /opt/svc
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

# --- runtime
FROM node:26-bookworm-slim
ENV NODE_ENV=production \
    SVC_HTTP_HOST=0.0.0.0 \
    SVC_HTTP_PORT=8080 \
    SVC_DATA_DIR=/var/lib/svc
WORKDIR /opt/svc
RUN groupadd --system --gid 10001 svc \
 && useradd --system --uid 10001 --gid svc --home-dir /var/lib/svc --shell /usr/sbin/nologin svc \
 && mkdir -p /var/lib/svc \
 && chown svc:svc /var/lib/svc \
 && chmod 0750 /var/lib/svc
COPY --from=deps /opt/svc/node_modules ./node_modules
# package.json: "type": "module" for dist/, and the version the service reports (src/lib/version.ts).
COPY package.json ./
COPY --from=build /opt/svc/dist ./dist
USER svc:svc
VOLUME ["/var/lib/svc"]
# REST/SSE; the embedded broker (only when SVC_MQTT_BROKER=embedded).
EXPOSE 8080 1883
# GET /api/v1/health (no auth). No curl in the slim image: Node's fetch does the probe.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.SVC_HTTP_PORT||8080)+'/api/v1/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node as PID 1 is fine: main.js handles SIGTERM/SIGINT and closes in order.
CMD ["node", "dist/src/main.js"]
