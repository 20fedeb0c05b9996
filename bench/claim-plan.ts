/**
 * `node dist/bench/claim-plan.js`: the plan of the claim (QueueRepository.claim, CLAIM_SQL) with
 * 100,000 queued jobs spread over 100 applications, and over one, as docs/queue.md shows it;
 * then, with --callbacks N (default 10000) callback jobs queued beside them (all but 16 waiting
 * to be retried later), the claim's generic plan again and the callback jobs' own claim
 * (CallbackJobsRepository.claim, CALLBACK_CLAIM_SQL).
 * Builds the data set in a throwaway database on the local PostgreSQL (BenchDatabase), runs
 * EXPLAIN (ANALYZE, BUFFERS) of the claim a worker with 2 script and 2 function-call slots sends,
 * inside a transaction that is rolled back (its generic plan, as a node connected directly runs it,
 * and its custom plan, as through PgBouncer or on the embedded database), and drops the database.
 *
 * Options: --jobs N (default 100000), --running N (jobs RUNNING beside them, default 20),
 * --callbacks N.
 */
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { loadConfig } from '../src/config/app-config';
import { DATABASE_SCHEMA } from '../src/database-schema';
import { CALLBACK_CLAIM_SQL } from '../src/queue/callback-jobs.repository';
import { CLAIM_SQL } from '../src/queue/queue-claim';
import { JOB_STARTED_CHANNEL } from '../src/queue/queue-channels';
import { openDatabaseForCli } from '../src/storage/database-options';
import { BenchDatabase } from './bench-database';
import { heading } from './report';
import { optionInt } from './stats';

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function fill(
  client: Client,
  jobs: number,
  applications: number,
  running: number,
): Promise<void> {
  await client.query('TRUNCATE job CASCADE');
  // Jobs submitted a millisecond apart, round robin over the applications; the first `running`
  // of them RUNNING, as on a busy cluster.
  await client.query(
    `INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after, attempts,
                      lease_owner, lease_expires_at, started_at)
     SELECT gen_random_uuid(), 'app' || lpad((i % $2)::text, 3, '0'), 'script',
            CASE WHEN i < $3 THEN 'RUNNING' ELSE 'QUEUED' END, 0, '{}', 'rest',
            now() - interval '1 hour' + i * interval '1 millisecond',
            now() - interval '1 hour', CASE WHEN i < $3 THEN 1 ELSE 0 END,
            CASE WHEN i < $3 THEN 'w' END, CASE WHEN i < $3 THEN now() + interval '1 minute' END,
            CASE WHEN i < $3 THEN now() END
       FROM generate_series(0, $1 - 1) AS i`,
    [jobs + running, applications, running],
  );
  await client.query('VACUUM ANALYZE job');
}

/**
 * `callbacks` finished jobs of app000 with their results and callbacks, each with its callback
 * job queued: the first 16 due now, the others an hour from now (waiting to be retried).
 */
async function fillCallbacks(client: Client, callbacks: number): Promise<void> {
  await client.query(
    `WITH ended AS (
       INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after,
                        attempts, finished_at, callback_url)
       SELECT gen_random_uuid(), 'app000', 'script', 'DONE', 0, '{}', 'rest', now() - interval '2 hours',
              now() - interval '2 hours', 1, now() - interval '1 hour', 'https://hooks.example.com/' || i
         FROM generate_series(0, $1 - 1) AS i
       RETURNING id, submitted_at, callback_url),
     results AS (
       INSERT INTO result (job_id, application_name, result_time, success, type, content_type, data, size, sha256)
       SELECT id, 'app000', now(), true, 'zip', 'application/zip', ''::bytea, 0, '' FROM ended),
     callbacks AS (
       INSERT INTO job_callback (job_id, url, state, attempts, created_at)
       SELECT id, callback_url, 'pending', 1, now() - interval '1 hour' FROM ended)
     INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after,
                      attempts, callback_url, callback_of)
     SELECT gen_random_uuid(), 'app000', 'callback', 'QUEUED', 0, '{}', 'callback', now() - interval '1 hour',
            CASE WHEN row_number() OVER (ORDER BY id) <= 16 THEN now() - interval '1 second'
                 ELSE now() + interval '1 hour' END,
            1, callback_url, id
       FROM ended`,
    [callbacks],
  );
  await client.query('VACUUM ANALYZE job');
  await client.query('VACUUM ANALYZE job_callback');
  await client.query('VACUUM ANALYZE result');
}

/** EXPLAIN of the callback jobs' claim for 16 free callback slots, rolled back. */
async function callbackPlan(client: Client): Promise<string> {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${CALLBACK_CLAIM_SQL}`,
      ['w1', 16, 60],
    );
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  } finally {
    await client.query('ROLLBACK');
  }
}

/** The claim's parameters as a worker with 2 script and 2 function-call slots sends them. */
const CLAIM_PARAMETERS: Array<string | number | string[] | null> = [
  'w1',
  2,
  60,
  null,
  JOB_STARTED_CHANNEL,
  ['script'],
  ['xml', 'json'],
  2,
  'bench ',
  [],
  [],
  [],
];

/**
 * EXPLAIN of one claim, rolled back. With `generic`, the plan the service uses on its claim
 * connection (ClaimConnection: a prepared statement under force_generic_plan, planned once);
 * otherwise the custom plan PostgreSQL makes per call (PgBouncer, the embedded database).
 */
async function plan(client: Client, generic: boolean): Promise<string> {
  await client.query('BEGIN');
  try {
    const { rows } = generic
      ? await client.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE claim_plan(${CLAIM_PARAMETERS.map(
            (value) => literal(client, value),
          ).join(', ')})`,
        )
      : await client.query<{ 'QUERY PLAN': string }>(
          `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${CLAIM_SQL}`,
          CLAIM_PARAMETERS,
        );
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  } finally {
    await client.query('ROLLBACK');
  }
}

/** A parameter as an SQL literal (EXECUTE of a prepared statement takes no bind parameters). */
function literal(client: Client, value: string | number | string[] | null): string {
  if (value === null) {
    return 'NULL';
  }
  if (Array.isArray(value)) {
    return client.escapeLiteral(`{${value.join(',')}}`);
  }
  return typeof value === 'number' ? String(value) : client.escapeLiteral(value);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      jobs: { type: 'string' },
      running: { type: 'string' },
      callbacks: { type: 'string' },
    },
  });
  const callbacks = optionInt('callbacks', values.callbacks ?? '10000', 0, 10_000_000);
  const jobs = optionInt('jobs', values.jobs ?? '100000', 1, 10_000_000);
  const running = optionInt('running', values.running ?? '20', 0, 100_000);
  const database = await BenchDatabase.create();
  try {
    const { dataSource, close } = await openDatabaseForCli(
      loadConfig({ ...process.env, DATABASE_URL: database.url, LOG_LEVEL: 'silent' }),
      DATABASE_SCHEMA,
    );
    await dataSource.runMigrations();
    await close();
    // As the claim connection is set up (ClaimConnection).
    const client = new Client({
      connectionString: database.url,
      options: '-c plan_cache_mode=force_generic_plan',
    });
    await client.connect();
    try {
      await client.query(
        `PREPARE claim_plan(varchar, int, int, varchar, text, varchar[], varchar[], int, text,
                            varchar[], float8[], int[]) AS ${CLAIM_SQL}`,
      );
      for (const applications of [100, 1]) {
        await fill(client, jobs, applications, running);
        for (const generic of [true, false]) {
          log(
            heading(
              `${jobs} queued jobs over ${applications} application(s), ${running} running: ` +
                (generic ? 'generic plan (direct connection)' : 'custom plan (pooler, embedded)'),
            ),
          );
          await client.query(`SET plan_cache_mode = ${generic ? 'force_generic_plan' : 'auto'}`);
          // The second run is the steady state (the first reads pages into the cache).
          await plan(client, generic);
          log(await plan(client, generic));
        }
      }
      // Callback jobs beside the R jobs: the R jobs' claim reads none of them (job_claim_idx
      // leaves them out), the callbacks' claim reads only the due ones.
      await fill(client, jobs, 100, running);
      await fillCallbacks(client, callbacks);
      await client.query('SET plan_cache_mode = force_generic_plan');
      log(
        heading(
          `${jobs} queued jobs over 100 applications, ${running} running, ${callbacks} callback jobs queued: generic plan (direct connection)`,
        ),
      );
      await plan(client, true);
      log(await plan(client, true));
      await client.query('SET plan_cache_mode = auto');
      log(heading(`the callback jobs' claim, ${callbacks} queued (16 due), 16 free slots`));
      await callbackPlan(client);
      log(await callbackPlan(client));
    } finally {
      await client.end();
    }
  } finally {
    await database.drop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
