import { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/app-config';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { startService } from '../../src/bootstrap';
import { schemaDiff } from '../../src/storage/schema-diff';
import { openDatabaseForCli, pendingMigrations } from '../../src/storage/database-options';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import {
  createTestDatabase,
  SERVER_DATABASE_URL,
  TestDatabase,
  testEnvironment,
} from '../support/test-service';

describe('migrations', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let close: () => Promise<void>;

  beforeAll(async () => {
    database = await createTestDatabase();
    ({ dataSource, close } = await openDatabaseForCli(
      loadConfig(testEnvironment(database)),
      DATABASE_SCHEMA,
    ));
  });

  afterAll(async () => {
    await close();
    await database.drop();
  });

  it('start with every migration pending on an empty database', async () => {
    expect(await pendingMigrations(dataSource)).toEqual(dataSource.migrations.map((m) => m.name));
  });

  it('bring the schema exactly to the entities: no drift', async () => {
    await dataSource.runMigrations({ transaction: 'each' });
    expect(await pendingMigrations(dataSource)).toEqual([]);
    expect(await schemaDiff(dataSource)).toEqual({ up: [], down: [] });
  });

  it('revert cleanly and apply again', async () => {
    for (let i = 0; i < dataSource.migrations.length; i++) {
      await dataSource.undoLastMigration({ transaction: 'each' });
    }
    expect((await dataSource.query(`SELECT to_regclass('public.job') AS t`)) as unknown).toEqual([
      { t: null },
    ]);
    await dataSource.runMigrations({ transaction: 'each' });
    expect(await schemaDiff(dataSource)).toEqual({ up: [], down: [] });
  });
});

const describeWithServer = SERVER_DATABASE_URL ? describe : describe.skip;

// The embedded database always applies its migrations itself, so only a server can have pending ones.
describeWithServer('start-up against a PostgreSQL server with pending migrations', () => {
  it('refuses to start and names the command to run, unless MIGRATIONS_RUN is set', async () => {
    const database = await createTestDatabase();
    try {
      const logger = new PinoLoggerService('silent');
      const config = loadConfig(
        testEnvironment(database, { MIGRATIONS_RUN: 'false', ROLE: 'api' }),
      );
      await expect(startService(config, logger)).rejects.toThrow(
        /pending migration.*npm run migration:run/,
      );
      const service = await startService(
        loadConfig(testEnvironment(database, { MIGRATIONS_RUN: 'true', ROLE: 'api' })),
        logger,
      );
      await service.close();
      const again = await startService(config, logger);
      await again.close();
    } finally {
      await database.drop();
    }
  });
});
