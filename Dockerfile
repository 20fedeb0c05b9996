# The service with native R (Debian's r-base-core), for docker-compose.yml.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
RUN apt-get update \
  && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends r-base-core util-linux \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY config ./config
COPY catalog ./catalog
COPY wsdl ./wsdl
ENV NODE_ENV=production R_ENGINE=native PORT=8888
# R jobs run as this unprivileged user's processes, never as root.
USER node
EXPOSE 8888
CMD ["node", "dist/src/main.js"]
