# The service with native R (Debian's r-base-core), for docker-compose.yml.
# Node 22, a supported LTS line (the service also runs on Node 20 and 24).
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
COPY migrations ./migrations
COPY scripts ./scripts
RUN npm run build && npm prune --omit=dev --omit=optional

FROM node:22-bookworm-slim
RUN apt-get update \
  && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends r-base-core util-linux bubblewrap \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY config ./config
COPY catalog ./catalog
COPY wsdl ./wsdl
COPY bin ./bin
# The svc command line on the PATH; ./data writable by the service's user (the embedded
# database lives there when DATABASE_URL is not set).
RUN ln -s /app/bin/svc.js /usr/local/bin/svc && mkdir -p /app/data && chown node:node /app/data
ENV NODE_ENV=production R_ENGINE=native PORT=8888
# Outside the container the service is reached through the container's own address, not its loopback.
ENV HOST=0.0.0.0
# R jobs run as this unprivileged user's processes, never as root, inside bubblewrap (R_SANDBOX):
# the container needs the security options of docker-compose.yml (docs/operations.md).
USER node
EXPOSE 8888
CMD ["node", "dist/src/main.js"]
