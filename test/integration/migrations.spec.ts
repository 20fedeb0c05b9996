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

  it('CallbackJobs gives each pending callback its callback job, due when it was, and takes it back', async () => {
    const migrationsFrom = (name: string): number =>
      dataSource.migrations.length - dataSource.migrations.findIndex((m) => m.name === name);
    const undo = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) {
        await dataSource.undoLastMigration({ transaction: 'each' });
      }
    };
    const steps = migrationsFrom('CallbackJobs1795760000000');
    await undo(steps);
    const pending = '6a1f0c52-7d3e-4b8a-9c21-0e5f4d3b2a10';
    const delivered = '6a1f0c52-7d3e-4b8a-9c21-0e5f4d3b2a11';
    const due = new Date('2030-01-01T00:00:00.000Z');
    for (const id of [pending, delivered]) {
      await dataSource.query(
        `INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at,
                          run_after, attempts, finished_at, callback_url, callback_links_base)
         VALUES ($1, 'demo', 'script', 'DONE', 0, '{}', 'rest', now(), now(), 1, now(),
                 'https://hooks.example.com/done', 'https://svc.example.com')`,
        [id],
      );
      await dataSource.query(
        `INSERT INTO result (job_id, application_name, result_time, success, type, content_type, data, size, sha256)
         VALUES ($1, 'demo', now(), true, 'zip', 'application/zip', ''::bytea, 0, '')`,
        [id],
      );
    }
    await dataSource.query(
      `INSERT INTO job_callback (job_id, url, state, attempts, created_at, next_attempt_at)
       VALUES ($1, 'https://hooks.example.com/done', 'pending', 2, now(), $3),
              ($2, 'https://hooks.example.com/done', 'delivered', 1, now(), now())`,
      [pending, delivered, due],
    );

    await dataSource.runMigrations({ transaction: 'each' });
    const callbackJobs = await dataSource.query<Array<Record<string, unknown>>>(
      `SELECT application_name, kind, state, run_after, callback_of, callback_url, callback_links_base
         FROM job WHERE kind = 'callback'`,
    );
    expect(callbackJobs).toEqual([
      {
        application_name: 'demo',
        kind: 'callback',
        state: 'QUEUED',
        run_after: due,
        callback_of: pending,
        callback_url: 'https://hooks.example.com/done',
        callback_links_base: 'https://svc.example.com',
      },
    ]);
    // What job status shows stays: the attempts made before.
    expect(
      await dataSource.query(`SELECT job_id, state, attempts FROM job_callback ORDER BY job_id`),
    ).toEqual([
      { job_id: pending, state: 'pending', attempts: 2 },
      { job_id: delivered, state: 'delivered', attempts: 1 },
    ]);

    await undo(steps);
    expect(
      await dataSource.query(
        `SELECT job_id, state, next_attempt_at FROM job_callback WHERE state = 'pending'`,
      ),
    ).toEqual([{ job_id: pending, state: 'pending', next_attempt_at: due }]);
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM job`)).toEqual([{ n: 2 }]);

    await dataSource.runMigrations({ transaction: 'each' });
    await dataSource.query('DELETE FROM job WHERE id = ANY($1::uuid[])', [[pending, delivered]]);
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM job`)).toEqual([{ n: 0 }]);
    expect(await schemaDiff(dataSource)).toEqual({ up: [], down: [] });
  });

  it('MailReplyJobs gives each pending reply its mail-reply job, due when it was, and takes it back', async () => {
    const steps =
      dataSource.migrations.length -
      dataSource.migrations.findIndex((m) => m.name === 'MailReplyJobs1795780000000');
    const undo = async (): Promise<void> => {
      for (let i = 0; i < steps; i++) {
        await dataSource.undoLastMigration({ transaction: 'each' });
      }
    };
    await undo();
    const due = new Date('2030-01-01T00:00:00.000Z');
    await dataSource.query(
      `INSERT INTO mail_reply (source, source_key, application_name, job_id, state, received_at,
                               reply_from, attach_max_bytes, next_attempt_at)
       VALUES ('box', '1:1', 'demo', gen_random_uuid(), 'pending', now(), 'svc@example.com', 0, $1),
              ('box', '1:2', 'demo', gen_random_uuid(), 'sent', now(), 'svc@example.com', 0, NULL),
              ('box', '1:3', 'demo', gen_random_uuid(), 'received', now(), 'svc@example.com', 0, NULL)`,
      [due],
    );

    await dataSource.runMigrations({ transaction: 'each' });
    const replyJobs = await dataSource.query<Array<Record<string, unknown>>>(
      `SELECT j.application_name, j.kind, j.state, j.run_after, m.source_key
         FROM job j JOIN mail_reply m ON m.reply_job_id = j.id`,
    );
    expect(replyJobs).toEqual([
      {
        application_name: 'demo',
        kind: 'mail_reply',
        state: 'QUEUED',
        run_after: due,
        source_key: '1:1',
      },
    ]);
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM job`)).toEqual([{ n: 1 }]);

    await undo();
    expect(
      await dataSource.query(
        `SELECT source_key, next_attempt_at FROM mail_reply WHERE state = 'pending'`,
      ),
    ).toEqual([{ source_key: '1:1', next_attempt_at: due }]);
    expect(await dataSource.query(`SELECT count(*)::int AS n FROM job`)).toEqual([{ n: 0 }]);

    await dataSource.runMigrations({ transaction: 'each' });
    await dataSource.query(`DELETE FROM job WHERE kind = 'mail_reply'`);
    await dataSource.query(`DELETE FROM mail_reply`);
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
