# syntax=docker/dockerfile:1
# The svc mesh control backend (issue 6 Build item 7; docs/issue6-emqx-deploy.md).
# Runs TypeScript through tsx, which is a production dependency (package.json "start"), so
# `npm ci --omit=dev` keeps everything the service needs and drops typescript and @types.

# --- build: production node_modules (better-sqlite3 compiles here if no prebuilt binary fits)
FROM node:20-bookworm-slim AS deps
WORKDIR /opt/svc
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

# --- runtime
FROM node:20-bookworm-slim
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
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
USER svc:svc
VOLUME ["/var/lib/svc"]
# REST/SSE; the embedded broker (only when SVC_MQTT_BROKER=embedded).
EXPOSE 8080 1883
# GET /api/v1/health (no auth). No curl in the slim image: Node's fetch does the probe.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.SVC_HTTP_PORT||8080)+'/api/v1/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node as PID 1 is fine: src/main.ts handles SIGTERM/SIGINT and closes in order.
CMD ["node", "--import", "tsx", "src/main.ts"]
