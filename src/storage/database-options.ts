import { DataSource, DataSourceOptions } from 'typeorm';
import type { DatabaseConfig } from '../config/config-slices';
import { DataDirOwnedError } from './data-dir-owner';
import { EmbeddedPostgres, trustedSocketDirectory } from './embedded-postgres';

/** The injection token of the DatabaseTarget. */
export const DATABASE_TARGET = Symbol('DATABASE_TARGET');

/**
 * Where the service's database is: a server URL or the embedded PGlite socket. On a server,
 * `listenUrl` is the direct connection for LISTEN, or null when there is none (DATABASE_URL goes
 * through a transaction-mode pooler and DATABASE_LISTEN_URL is not set): the nodes then poll.
 */
export type DatabaseTarget =
  | { kind: 'server'; url: string; listenUrl: string | null; poolSize?: number }
  | {
      kind: 'embedded';
      socketDirectory: string;
      /** In the owner process: hears the notifications of every client (EmbeddedPostgres). */
      onNotification?: (listener: (channel: string, payload: string) => void) => () => void;
    };

/** The server target of `config` (DATABASE_URL, DATABASE_LISTEN_URL, DATABASE_POOLER, DATABASE_POOL_SIZE). */
export function serverTarget(
  config: Pick<DatabaseConfig, 'databaseUrl' | 'databaseListenUrl' | 'databasePooler'> &
    Partial<Pick<DatabaseConfig, 'databasePoolSize'>>,
): DatabaseTarget {
  const url = config.databaseUrl ?? '';
  return {
    kind: 'server',
    url,
    listenUrl: config.databaseListenUrl ?? (config.databasePooler === 'none' ? url : null),
    poolSize: config.databasePoolSize,
  };
}

/** The tables (entities) and migrations a data source is opened with; the composition root has them. */
export interface DatabaseSchema {
  entities: NonNullable<DataSourceOptions['entities']>;
  migrations: NonNullable<DataSourceOptions['migrations']>;
}

export function buildDataSourceOptions(
  target: DatabaseTarget,
  schema: DatabaseSchema,
  applicationName = 'svc',
): DataSourceOptions {
  const common = {
    type: 'postgres' as const,
    entities: schema.entities,
    migrations: schema.migrations,
    migrationsTableName: 'svc_migrations',
    migrationsRun: false,
    synchronize: false,
    applicationName,
  };
  if (target.kind === 'embedded') {
    // One connection: PGlite runs one session, and its socket server one transaction at a time.
    return {
      ...common,
      host: target.socketDirectory,
      port: 5432,
      username: 'postgres',
      database: 'postgres',
      extra: { max: 1 },
    };
  }
  return {
    ...common,
    url: target.url,
    // A short connect timeout turns a database outage into quick 503s instead of hung requests.
    extra: { max: target.poolSize ?? 10, connectionTimeoutMillis: 3000 },
  };
}

/**
 * The database a command-line tool works on. `viaService`: the embedded database of a running
 * service, reached through its socket (its migrations are the service's business).
 */
export interface CliDatabase {
  dataSource: DataSource;
  target: DatabaseTarget;
  viaService: boolean;
  close: () => Promise<void>;
}

/**
 * Opens the configured database for a command-line tool. The embedded one is opened here when
 * no process owns DATA_DIR (and owned while the command runs); when a service owns it, the
 * command is a client of that service's database, so its writes are the service's at once.
 */
export async function openDatabaseForCli(
  config: DatabaseConfig,
  schema: DatabaseSchema,
): Promise<CliDatabase> {
  let embedded: EmbeddedPostgres | null = null;
  let target: DatabaseTarget = serverTarget(config);
  if (config.embeddedDatabase) {
    try {
      embedded = await EmbeddedPostgres.start(config.dataDir);
      target = { kind: 'embedded', socketDirectory: embedded.socketDirectory };
    } catch (error) {
      const socketDirectory = error instanceof DataDirOwnedError && error.owner.socketDirectory;
      if (!socketDirectory) {
        throw error;
      }
      target = {
        kind: 'embedded',
        socketDirectory: trustedSocketDirectory(config.dataDir, socketDirectory),
      };
    }
  }
  const dataSource = new DataSource(buildDataSourceOptions(target, schema, 'svc-cli'));
  try {
    await dataSource.initialize();
  } catch (error) {
    await embedded?.stop();
    if (config.embeddedDatabase && !embedded) {
      throw new Error(
        `cannot reach the database of the svc process that owns DATA_DIR ${config.dataDir} ` +
          `(${(error as Error).message}); run this command as that process's user`,
      );
    }
    throw error;
  }
  return {
    dataSource,
    target,
    viaService: config.embeddedDatabase && !embedded,
    close: async () => {
      await dataSource.destroy();
      await embedded?.stop();
    },
  };
}

export class PendingMigrationsError extends Error {
  constructor(pending: string[]) {
    super(
      `The database has ${pending.length} pending migration(s) (${pending.join(', ')}). ` +
        'Run `svc migrate run` (or `npm run migration:run`) against it, or set MIGRATIONS_RUN=true to apply them at start-up.',
    );
  }
}

/** Names of the migrations that the database has not run yet. */
export async function pendingMigrations(dataSource: DataSource): Promise<string[]> {
  const queryRunner = dataSource.createQueryRunner();
  try {
    const hasTable = await queryRunner.hasTable(
      dataSource.options.migrationsTableName ?? 'migrations',
    );
    const executed = hasTable
      ? new Set(
          (
            (await queryRunner.query(
              `SELECT name FROM "${dataSource.options.migrationsTableName}"`,
            )) as Array<{
              name: string;
            }>
          ).map((row) => row.name),
        )
      : new Set<string>();
    return dataSource.migrations
      .map((m) => m.name ?? m.constructor.name)
      .filter((name) => !executed.has(name));
  } finally {
    await queryRunner.release();
  }
}
