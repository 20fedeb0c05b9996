import { existsSync } from 'node:fs';
import {
  DynamicModule,
  INestApplication,
  INestApplicationContext,
  LoggerService,
  Module,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { DataSource } from 'typeorm';
import { ApplicationSettingsRepository } from './applications/application-settings.repository';
import { applyStoredSlots } from './applications/application-settings.service';
import { AppModule } from './app.module';
import { HttpAnswerAdapter } from './common/http-answer.adapter';
import { loadCatalogFolder } from './catalog/catalog-folder';
import { CatalogService } from './catalog/catalog.service';
import { AppConfig, corsOriginsOf, trustProxyOf } from './config/app-config';
import { DatabaseConfig } from './config/config-slices';
import { ConfigModule } from './config/config.module';
import { DATABASE_SCHEMA } from './database-schema';
import {
  DatabaseTarget,
  PendingMigrationsError,
  pendingMigrations,
  serverTarget,
} from './storage/database-options';
import { EmbeddedPostgres } from './storage/embedded-postgres';
import { usePrivateUmask } from './storage/private-files';
import { StorageModule } from './storage/storage.module';
import { MEDIA_TYPE_ROUTES } from './common/event-stream-route';
import { cutSlowReaders } from './common/slow-readers';

/** How long an idle HTTP keep-alive connection stays open. */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;
/** Request headers a node reads (a bearer token of 64 KB included); larger: 431. */
const MAX_HEADER_BYTES = 96 * 1024;

/** Where this machine reaches a server bound to `host` (every interface: the loopback). */
export function localUrlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') {
    return '127.0.0.1';
  }
  return host.includes(':') ? `[${host}]` : host;
}

export interface RunningService {
  config: AppConfig;
  /** The Nest application (roles all and api) or context (role worker). */
  app: INestApplication | INestApplicationContext;
  /** Base URL of the HTTP server, when there is one. */
  url: string | null;
  close(): Promise<void>;
}

/**
 * What start-up needs before the role's modules are made: the configuration, the database and
 * the catalog, with no timers or listeners of their own (the role's modules bring those).
 */
@Module({})
class StartupModule {
  static forTarget(config: AppConfig, target: DatabaseTarget): DynamicModule {
    return {
      module: StartupModule,
      imports: [
        ConfigModule.forConfig(config),
        StorageModule.forTarget(target, DATABASE_SCHEMA, 'svc-startup'),
      ],
      providers: [CatalogService, ApplicationSettingsRepository],
    };
  }
}

/**
 * Brings the schema up to date or refuses to start: the embedded database (and MIGRATIONS_RUN=true)
 * run pending migrations; otherwise they are an error that names the command to run. Then the
 * stored slot counts are put in force and, on a fresh embedded database, the example catalog is
 * loaded. Runs in a context of its own, closed before the role's modules are made: they size
 * their pools from the slots and may read the catalog as they start.
 */
async function prepareDatabase(
  config: AppConfig,
  target: DatabaseTarget,
  logger: LoggerService,
): Promise<void> {
  const startup = await NestFactory.createApplicationContext(
    StartupModule.forTarget(config, target),
    { logger, abortOnError: false },
  );
  try {
    const database = startup.get(DatabaseConfig);
    const dataSource = startup.get(DataSource);
    const pending = await pendingMigrations(dataSource);
    if (pending.length > 0) {
      if (!database.embeddedDatabase && !database.migrationsRun) {
        throw new PendingMigrationsError(pending);
      }
      await dataSource.runMigrations({ transaction: 'each' });
      logger.log(`applied migrations: ${pending.join(', ')}`, 'Database');
    }
    await applyStoredSlots(config, startup.get(ApplicationSettingsRepository));
    const catalog = startup.get(CatalogService);
    if (
      database.embeddedDatabase &&
      existsSync(database.catalogDir) &&
      (await catalog.countFiles()) === 0
    ) {
      const report = await loadCatalogFolder(catalog, database.catalogDir);
      logger.log(
        `loaded the example catalog from ${database.catalogDir}: ${report.created.length} file(s)`,
        'Catalog',
      );
    }
  } finally {
    await startup.close();
  }
}

export async function startService(
  config: AppConfig,
  logger: LoggerService,
): Promise<RunningService> {
  // Before anything is created: what the service makes is its user's only (private-files.ts).
  usePrivateUmask();
  const embedded = config.embeddedDatabase ? await EmbeddedPostgres.start(config.dataDir) : null;
  const target: DatabaseTarget = embedded
    ? {
        kind: 'embedded',
        socketDirectory: embedded.socketDirectory,
        onNotification: (listener) => embedded.onNotification(listener),
      }
    : serverTarget(config);
  let app: INestApplication | INestApplicationContext | null = null;
  try {
    await prepareDatabase(config, target, logger);
    const module = AppModule.forRole(config, target);
    let url: string | null = null;
    if (config.role === 'worker') {
      app = await NestFactory.createApplicationContext(module, { logger, abortOnError: false });
      await app.init();
    } else {
      const httpApp = await NestFactory.create<NestExpressApplication>(
        module,
        new HttpAnswerAdapter(),
        {
          logger,
          bodyParser: false,
          abortOnError: false,
        },
      );
      httpApp.disable('x-powered-by');
      // Forwarded headers count only from the proxies TRUST_PROXY names (public-uri.ts, req.ip).
      httpApp.set('trust proxy', trustProxyOf(config));
      // The job log's live stream and its text share a path, told apart by Accept.
      httpApp.enableVersioning(MEDIA_TYPE_ROUTES);
      const corsOrigins = corsOriginsOf(config);
      if (corsOrigins.length > 0) {
        httpApp.enableCors({
          origin: corsOrigins,
          // What a browser client reads beyond the simple headers: the job's result link, the
          // data's file name and validators, and when to come back.
          exposedHeaders: ['Location', 'Content-Disposition', 'ETag', 'Retry-After'],
          maxAge: 600,
        });
      }
      app = httpApp;
      const server = httpApp.getHttpServer();
      // An idle keep-alive connection outlives the idle timeouts of load balancers (60 s is
      // common) and of clients: with Node's 5 s, the node could close a connection just as a
      // client sent its next request on it, which the client sees as a reset (a lost PUT).
      server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1000;
      // Node reads at most 16 KiB of headers: a large access token (a user in many groups) would
      // be cut off before authentication, and some Node versions then reset the connection
      // instead of answering 431. Read per connection, so set before listening.
      (server as typeof server & { maxHeaderSize?: number }).maxHeaderSize = MAX_HEADER_BYTES;
      // A client that takes nothing of an answer for too long is cut, whatever the answer.
      cutSlowReaders(server, config.streamSlowReaderSeconds * 1000);
      await httpApp.listen(config.port, config.host);
      const address = server.address() as { port: number } | null;
      url = `http://${localUrlHost(config.host)}:${address?.port ?? config.port}`;
    }
    const running = app;
    return {
      config,
      app: running,
      url,
      close: async () => {
        await running.close();
        await embedded?.stop();
      },
    };
  } catch (error) {
    await app?.close().catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
    throw error;
  }
}
