import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { findRscript } from '../../src/r-engine/native-r.engine';
import { QueueRepository } from '../../src/queue/queue.repository';
import type { ClaimedJob, JobFileInput, JobKind } from '../../src/queue/queue.types';
import { openDatabaseForCli } from '../../src/storage/database-options';
import { createTestDatabase, TestDatabase, testEnvironment } from './test-service';

/** Native R can run here: an Rscript is found and the run did not ask for webR. */
export const NATIVE_R =
  process.env.R_ENGINE !== 'webr' &&
  findRscript({ rHome: null, rscriptPath: null, rMemoryLimitMb: 0 }) !== null;

/** A fresh database with the schema, and the configuration of a node using it. */
export interface MigratedDatabase {
  database: TestDatabase;
  config: AppConfig;
  dataSource: DataSource;
  /** Closes the connections and drops the database. */
  close(): Promise<void>;
}

export async function openMigratedDatabase(
  overrides: Record<string, string> = {},
): Promise<MigratedDatabase> {
  const database = await createTestDatabase();
  const config = loadConfig(testEnvironment(database, overrides));
  const { dataSource, close } = await openDatabaseForCli(config, DATABASE_SCHEMA);
  await dataSource.runMigrations();
  return {
    database,
    config,
    dataSource,
    close: async () => {
      await close();
      await database.drop();
    },
  };
}

/**
 * Queues a job and claims it as a worker would (the claim brings the files along): what an
 * executor is handed.
 */
export async function queueAndClaim(
  queue: QueueRepository,
  job: {
    applicationName: string;
    kind: JobKind;
    files: JobFileInput[];
    meta?: Record<string, string>;
  },
): Promise<ClaimedJob> {
  const id = randomUUID();
  await queue.enqueue({
    id,
    applicationName: job.applicationName,
    kind: job.kind,
    meta: job.meta ?? {},
    source: 'test',
    submittedAt: new Date(),
    files: job.files,
  });
  const [claimed] = await queue.claim('executor-test', 1, 60, job.applicationName);
  if (claimed?.id !== id) {
    throw new Error(`claimed ${claimed?.id ?? 'nothing'} instead of job ${id}`);
  }
  return claimed;
}
