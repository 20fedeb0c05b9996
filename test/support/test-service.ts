import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { startService, RunningService } from '../../src/bootstrap';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { PinoLoggerService } from '../../src/common/pino-logger';
import { copyMigratedEmbeddedDatabase, createMigratedServerDatabase } from './database-template';

/** The server the suite runs against: DATABASE_URL when set (a fresh database per test file), else embedded PGlite. */
export const SERVER_DATABASE_URL = process.env.DATABASE_URL || null;

export interface TestDatabase {
  /** DATABASE_URL for the service, or null for the embedded database. */
  url: string | null;
  dataDir: string;
  drop(): Promise<void>;
}

/**
 * A fresh database: a new database on the server, or a new embedded data directory. Empty, or with
 * `migrated` every migration run (a copy of a template made once: database-template.ts).
 */
export async function createTestDatabase(
  options: { migrated?: boolean } = {},
): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-test-data-'));
  if (!SERVER_DATABASE_URL) {
    if (options.migrated) {
      await copyMigratedEmbeddedDatabase(dataDir);
    }
    return {
      url: null,
      dataDir,
      drop: () => Promise.resolve(rmSync(dataDir, { recursive: true, force: true })),
    };
  }
  const name = `svc_test_${Date.now()}_${randomBytes(4).toString('hex')}`;
  if (options.migrated) {
    await createMigratedServerDatabase(SERVER_DATABASE_URL, name);
  } else {
    const admin = new Client({ connectionString: SERVER_DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
  }
  const url = new URL(SERVER_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    dataDir,
    drop: async () => {
      const client = new Client({ connectionString: SERVER_DATABASE_URL });
      await client.connect();
      const open = await countConnections(client, name);
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      if (open > 0) {
        await client.end();
        throw new Error(`${open} connection(s) to ${name} were still open after the test: a leak`);
      }
      await client.end();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Environment for a service under test: port 0, quiet logs, fast polling, the test database. */
export function testEnvironment(
  database: TestDatabase,
  overrides: Record<string, string> = {},
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    HOST: '127.0.0.1',
    // The tests read /metrics throughout; the default (a bearer token) has its own tests.
    METRICS_ACCESS: 'open',
    DATA_DIR: database.dataDir,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    MIGRATIONS_RUN: 'true',
    POLL_INTERVAL_MS: '200',
  };
  if (database.url) {
    env.DATABASE_URL = database.url;
  } else {
    delete env.DATABASE_URL;
  }
  return { ...env, ...overrides };
}

export interface TestService extends RunningService {
  url: string;
  database: TestDatabase;
  config: AppConfig;
  /** Stops the service and drops its database; fails when child processes of it are left. */
  stop(): Promise<void>;
  /**
   * Stops the service and drops its database without looking for child processes left: for
   * stopping several services that ran side by side, whose children only the last stop can judge
   * (`waitForNoChildProcesses` after the last).
   */
  stopLeavingLeakCheck(): Promise<void>;
}

/**
 * Starts the whole service in this process on a fresh database; `logger` replaces the one made
 * from LOG_LEVEL (a test that reads the logs passes its own).
 */
export async function startTestService(
  overrides: Record<string, string> = {},
  logger?: PinoLoggerService,
): Promise<TestService> {
  // The service would run every migration at its start (MIGRATIONS_RUN=true here, and always on
  // the embedded database): it starts on a copy of the database they make instead.
  const migrated = !SERVER_DATABASE_URL || (overrides.MIGRATIONS_RUN ?? 'true') === 'true';
  const database = await createTestDatabase({ migrated });
  const config = loadConfig(testEnvironment(database, overrides));
  logger ??= new PinoLoggerService(config.logLevel);
  // The service makes the process's umask 0077, as it does in production; the next test file on
  // this Jest worker gets the umask it had before, not the one a service left behind.
  const umask = process.umask();
  const service = await startService(config, logger);
  const stopLeavingLeakCheck = async (): Promise<void> => {
    await service.close();
    process.umask(umask);
  };
  return {
    ...service,
    url: service.url ?? '',
    database,
    stopLeavingLeakCheck: async () => {
      await stopLeavingLeakCheck();
      await database.drop();
    },
    stop: async () => {
      await stopLeavingLeakCheck();
      const leaked = await waitForNoChildProcesses();
      await database.drop();
      throwIfLeaked(leaked);
    },
  };
}

/** Fails with the child processes left running, if any. */
export function throwIfLeaked(leaked: string[]): void {
  if (leaked.length > 0) {
    throw new Error(`the service left child processes running: ${leaked.join(', ')}`);
  }
}

async function countConnections(client: Client, databaseName: string): Promise<number> {
  for (let i = 0; ; i++) {
    const { rows } = await client.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
      [databaseName],
    );
    // Connections close asynchronously after pool.end(): give them a moment.
    if (rows[0].n === 0 || i >= 20) {
      return rows[0].n;
    }
    await sleep(100);
  }
}

/** Child processes of this test process (R runs, for example), as "pid command". */
function childProcesses(): string[] {
  const children: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) {
      continue;
    }
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Fields after the command (which may hold spaces) start after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === process.pid && fields[0] !== 'Z') {
        children.push(`${entry} ${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))}`);
      }
    } catch {
      // The process ended while we looked.
    }
  }
  return children;
}

/** Waits up to 3 s for the service's child processes to end; returns those still running. */
export async function waitForNoChildProcesses(): Promise<string[]> {
  if (!existsSync('/proc/self/stat')) {
    return [];
  }
  for (let i = 0; i < 30; i++) {
    const children = childProcesses();
    if (children.length === 0) {
      return [];
    }
    await sleep(100);
  }
  return childProcesses();
}

export async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it returns a value, or fails after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 60000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(100);
  }
}

/** What a running service has stored of jobs: rows of jobs, of their files and of the files' bytes. */
export interface StoredJobRows {
  jobs: number;
  files: number;
  chunks: number;
}

/** Counts what `service` stores of jobs, to show that a refused submission stored nothing. */
export async function storedJobRows(service: RunningService): Promise<StoredJobRows> {
  const [row] = await service.app
    .get(DataSource)
    .query<{ jobs: number; files: number; chunks: number }[]>(
      `SELECT (SELECT count(*)::int FROM job) AS jobs, (SELECT count(*)::int FROM job_file) AS files,
            (SELECT count(*)::int FROM job_file_chunk) AS chunks`,
    );
  return { jobs: row.jobs, files: row.files, chunks: row.chunks };
}
