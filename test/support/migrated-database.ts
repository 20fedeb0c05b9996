import type { DataSource } from 'typeorm';
import { loadConfig } from '../../src/config/app-config';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { openDatabaseForCli } from '../../src/storage/database-options';
import { createTestDatabase, TestDatabase, testEnvironment } from './test-service';

/** A fresh test database with every migration run, opened as the CLI opens it. */
export interface MigratedDatabase {
  database: TestDatabase;
  dataSource: DataSource;
  /** Closes the connection and drops the database. */
  drop: () => Promise<void>;
}

/** A fresh test database with every migration run, for a spec of statements; `drop` ends it. */
export async function openMigratedDatabase(): Promise<MigratedDatabase> {
  const database = await createTestDatabase({ migrated: true });
  const { dataSource, close } = await openDatabaseForCli(
    loadConfig(testEnvironment(database)),
    DATABASE_SCHEMA,
  );
  return {
    database,
    dataSource,
    drop: async () => {
      await close();
      await database.drop();
    },
  };
}
