import { EnvironmentRuntime } from '../../src/environments/environment-runtime';
import { EnvironmentRepository } from '../../src/environments/environment.repository';
import { PackageRepositoryReader } from '../../src/environments/package-repositories';
import { PackageRepository } from '../../src/packages/package.repository';
import { randomUUID } from 'node:crypto';
import type { Provider } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { CatalogChanges } from '../../src/catalog/catalog-changes';
import { CatalogService } from '../../src/catalog/catalog.service';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { configProviders } from '../../src/config/config.module';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { JobLogRepository } from '../../src/job-log/job-log.repository';
import { QueueNotifier } from '../../src/queue/queue-notifier.service';
import { findRscript } from '../../src/r-engine/launch/r-location';
import { R_ENGINE, type REngine } from '../../src/r-engine/r-engine';
import { createREngine } from '../../src/r-engine/r-engine.factory';
import { JobRecordsRepository } from '../../src/queue/job-records.repository';
import { QueueRepository } from '../../src/queue/queue.repository';
import type { ClaimedJob, JobFileInput, JobKind } from '../../src/queue/queue.types';
import { DatabaseEvents } from '../../src/storage/database-events.service';
import {
  DATABASE_TARGET,
  openDatabaseForCli,
  serverTarget,
} from '../../src/storage/database-options';
import { NodeIdentity } from '../../src/storage/node-identity';
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
  const database = await createTestDatabase({ migrated: true });
  const config = loadConfig(testEnvironment(database, overrides));
  const { dataSource, close } = await openDatabaseForCli(config, DATABASE_SCHEMA);
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
    source: 'rest',
    submittedAt: new Date(),
    files: job.files,
  });
  const [claimed] = await queue.claim('executor-test', 1, 60, job.applicationName);
  if (claimed?.id !== id) {
    throw new Error(`claimed ${claimed?.id ?? 'nothing'} instead of job ${id}`);
  }
  return claimed;
}

/** What runs a job of an application with an R environment (none in these specs). */
export const ENVIRONMENT_RUNTIME_PROVIDERS: Provider[] = [
  EnvironmentRuntime,
  EnvironmentRepository,
  PackageRepository,
  PackageRepositoryReader,
];

/** A TestingModule with an executor, its real parts (native R, the database) and a queue to feed it. */
export interface ExecutorHarness {
  module: TestingModule;
  queue: QueueRepository;
  catalog: CatalogService;
  /** Closes the module, stops R and drops the database. */
  close(): Promise<void>;
}

/**
 * Builds and starts a module of `providers` (the executor and what only it needs, made from the
 * node's configuration) over what every executor uses: the configuration, the R engine a worker
 * node makes (native R), the database and its events, the catalog and the job log.
 */
export async function startExecutorHarness(
  providers: (config: AppConfig) => Provider[],
): Promise<ExecutorHarness> {
  const db = await openMigratedDatabase({ R_ENGINE: 'native' });
  let engine: REngine | null = null;
  let module: TestingModule | null = null;
  const close = async (): Promise<void> => {
    await module?.close();
    await engine?.stop();
    await db.close();
  };
  try {
    engine = createREngine({ ...db.config, scriptJobs: true });
    await engine.start();
    module = await Test.createTestingModule({
      providers: [
        CatalogService,
        JobLogRepository,
        JobRecordsRepository,
        // A flow's step reads the results of the steps it needs through it.
        QueueRepository,
        ...configProviders(db.config),
        { provide: R_ENGINE, useValue: engine },
        { provide: DataSource, useValue: db.dataSource },
        // The node's database events: heard from the server, or in-process on PGlite.
        {
          provide: DATABASE_TARGET,
          useValue: db.config.databaseUrl
            ? serverTarget(db.config)
            : { kind: 'embedded', socketDirectory: '' },
        },
        NodeIdentity,
        DatabaseEvents,
        // The job log's appends notify the log's live streams.
        QueueNotifier,
        CatalogChanges,
        ...providers(db.config),
      ],
    }).compile();
    await module.init();
    return {
      module,
      queue: module.get(QueueRepository),
      catalog: module.get(CatalogService),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
