# rowi in a container, on Node.js 24: SQLite through Node's own node:sqlite, so npm compiles
# nothing and the image needs no compilers (better-sqlite3 is for Node 20 only).
#
#   docker build -t rowi .
#   docker run -p 8080:8080 -v rowi-data:/data rowi                         # SQLite in the volume
#   docker run -p 8080:8080 -e ROWI_DATABASE_URL=postgres://… rowi         # PostgreSQL
#   docker run --rm -v rowi-data:/data rowi callers create --name NAME --role admin
#
# See README "Deployment".

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The optional package of better-sqlite3 is skipped on Node 24 (its engines say Node 20).
COPY packages ./packages
RUN npm ci
COPY tsconfig.json ./
COPY scripts ./scripts
COPY src ./src
COPY console ./console
# The server, bundled into dist/rowi/ (scripts/build.mjs); esbuild goes with the other dev packages.
RUN node scripts/build.mjs \
 && npm prune --omit=dev

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    ROWI_HOST=0.0.0.0 \
    ROWI_PORT=8080 \
    ROWI_DATA=/data/rowi.db
WORKDIR /app
# The code stays owned by root (the service cannot change it); only /data is the node user's.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node
EXPOSE 8080
# Slim images have no curl: node's own fetch asks for readiness (the database answers and is
# migrated). Plain HTTP on loopback: with ROWI_TLS_CERT/ROWI_TLS_KEY set, override this check.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.ROWI_PORT || 8080) + '/health/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# V8 on Node 24 sizes its young generation from the machine's memory; 16 MB semispaces keep a
# process's heap as on Node 20 (README, Benchmark: peak RSS 249 MB against 172 MB under load).
ENTRYPOINT ["node", "--max-semi-space-size=16", "dist/rowi/cli.js"]
CMD ["serve"]
