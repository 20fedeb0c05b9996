import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { loadConfig } from '../../src/config/app-config';
import { DATABASE_SCHEMA } from '../../src/database-schema';
import { openDatabaseForCli } from '../../src/storage/database-options';

/*
 * A migrated database made once and copied for each test file that wants one. Running 26
 * migrations costs a server database a few hundred milliseconds and an embedded one PGlite's
 * initdb as well (2 s alone, 5 under a suite's load): paid once per code version, not per service
 * start. A copy is the same database a fresh start would have made: the same migrations, nothing
 * else (no catalog, no rows). Specs that show migrations themselves, or a first start, start from
 * an empty database (`createTestDatabase`).
 */

const REPOSITORY = join(__dirname, '..', '..');

/** Names the schema: the migrations' sources and the embedded PostgreSQL's version. */
function schemaDigest(): string {
  const hash = createHash('sha256');
  const migrations = join(REPOSITORY, 'migrations');
  for (const name of readdirSync(migrations).sort()) {
    hash.update(name).update(readFileSync(join(migrations, name)));
  }
  const pglite = JSON.parse(
    readFileSync(
      join(REPOSITORY, 'node_modules', '@electric-sql', 'pglite', 'package.json'),
      'utf8',
    ),
  ) as { version: string };
  hash.update(pglite.version);
  return hash.digest('hex').slice(0, 16);
}

async function migrate(environment: NodeJS.ProcessEnv): Promise<void> {
  const { dataSource, close } = await openDatabaseForCli(loadConfig(environment), DATABASE_SCHEMA);
  try {
    await dataSource.runMigrations({ transaction: 'each' });
  } finally {
    await close();
  }
}

/**
 * The migrated embedded data directory's `pgdata`, copied into `dataDir`. The template is built
 * beside the test files' own directories and renamed into place once complete, so a worker never
 * copies half of one; two workers that build it at once both succeed and one copy is kept.
 */
export async function copyMigratedEmbeddedDatabase(dataDir: string): Promise<void> {
  const template = join(tmpdir(), `svc-test-pgdata-${schemaDigest()}`);
  if (!existsSync(join(template, 'pgdata'))) {
    const building = mkdtempSync(`${template}-building-`);
    try {
      const environment: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: building };
      delete environment.DATABASE_URL;
      await migrate(environment);
      rmSync(join(building, 'svc.owner'), { force: true });
      try {
        renameSync(building, template);
      } catch {
        // Another worker put its template in place first: it is the same database.
      }
    } finally {
      rmSync(building, { recursive: true, force: true });
    }
  }
  cpSync(join(template, 'pgdata'), join(dataDir, 'pgdata'), { recursive: true });
}

/**
 * Creates database `name` on the server as a copy of the migrated template database, which is
 * made (under an advisory lock, so that one worker makes it) the first time a schema is seen.
 */
export async function createMigratedServerDatabase(serverUrl: string, name: string): Promise<void> {
  const template = `svc_template_${schemaDigest()}`;
  const admin = new Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query('SELECT pg_advisory_lock(hashtext($1))', [template]);
    try {
      const { rows } = await admin.query<{ ready: boolean }>(
        'SELECT datistemplate AS ready FROM pg_database WHERE datname = $1',
        [template],
      );
      if (!rows[0]?.ready) {
        await admin.query(`DROP DATABASE IF EXISTS ${template}`);
        await admin.query(`CREATE DATABASE ${template}`);
        const url = new URL(serverUrl);
        url.pathname = `/${template}`;
        await migrate({ ...process.env, DATABASE_URL: url.toString() });
        // Marked only once complete: a template left half made by a killed run is made again.
        await admin.query(`ALTER DATABASE ${template} IS_TEMPLATE true`);
      }
    } finally {
      await admin.query('SELECT pg_advisory_unlock(hashtext($1))', [template]);
    }
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
}
