# One image for every Baton service; the compose file picks the entry point.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN NX_DAEMON=false npx nx run-many -t build --outputStyle=static \
 && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production
# The heap settings Baton's services are measured with (docs/performance.md): resident memory then
# follows what a service keeps. This default is the router's, the watchdog's and the notifier's;
# docker-compose.yml gives each service its own (infra/service-node-options.json: the ledger 64 MB).
ENV NODE_OPTIONS="--max-semi-space-size=4 --max-old-space-size=96"
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/bin ./bin
# The NATS credentials volume (docker-compose.yml): a new named volume takes this folder's owner.
RUN mkdir -p /auth && chown node:node /auth
USER node
CMD ["node", "dist/apps/notifier/src/main.js"]
