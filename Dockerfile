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
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/bin ./bin
USER node
CMD ["node", "dist/apps/notifier/src/main.js"]
