/**
 * Flat as the tables grow: the per-job cost of the claim, the intake and the result fetch on
 * empty tables and on tables holding 1,000,000 finished and 100,000 queued jobs across 100
 * applications (docs/queue.md#large-tables).
 *
 * Two throwaway databases on the local PostgreSQL, both migrated: one kept empty, one filled
 * with generate_series (the finished jobs with their results, the queued ones with one input
 * file each, as submitted jobs have). Rounds alternate between them (the machine's load drifts,
 * so neighbours in time are compared). A round is `jobs` jobs, each through the service's own
 * repository code, one operation at a time as a worker and a client send them: intake
 * (QueueRepository.enqueue, one small file), claim (QueueRepository.claim of one script job, on
 * the claim connection's prepared statement with its generic plan, as a directly connected node
 * runs it), end (QueueRepository.complete), result fetch (ResultRepository.findDataSource). The
 * queued count grows by one job per job claimed (0.2 % a round). Measured per
 * operation: wall time (loopback round trip included) and the CPU of the database's server
 * processes. Then one more job on the filled tables with auto_explain, which prints the plan
 * (ANALYZE, BUFFERS) of every statement the service sent, and one batch of retention's deletion.
 */
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { loadConfig } from '../src/config/app-config';
import { DatabaseConfig } from '../src/config/config-slices';
import { DATABASE_SCHEMA } from '../src/database-schema';
import { JobRecordsRepository } from '../src/queue/job-records.repository';
import { QueueRepository } from '../src/queue/queue.repository';
import { deleteExpiredResults } from '../src/queue/queue-retention';
import { ResultRepository } from '../src/results/result.repository';
import { openDatabaseForCli } from '../src/storage/database-options';
import { NodeIdentity } from '../src/storage/node-identity';
import { BenchDatabase } from './bench-database';
import { processTimes } from './cpu-usage';
import { table } from './report';
import { round } from './stats';

export const OPERATIONS = ['intake', 'claim', 'end', 'fetch'] as const;
export type Operation = (typeof OPERATIONS)[number];

export interface LargeTablesOptions {
  finished: number;
  queued: number;
  applications: number;
  /** Jobs per round. */
  jobs: number;
  /** Rounds per table size, alternating. */
  rounds: number;
  log: (line: string) => void;
}

interface OperationCost {
  /** Median wall time of one operation, ms. */
  p50Ms: number;
  /** Mean wall time, ms. */
  meanMs: number;
  /** Database server CPU per operation, ms. */
  serverCpuMs: number;
}

export interface LargeTablesResult {
  fillSeconds: number;
  /** Per table size and operation: the best round (least disturbed by other work). */
  empty: Record<Operation, OperationCost>;
  filled: Record<Operation, OperationCost>;
  /** filled / empty of the median wall time. */
  ratios: Record<Operation, number>;
  plans: string[];
}

const APPLICATION_PREFIX = 'app';
const SCRIPT = Buffer.from('x <- 1\n');

function applicationOf(i: number, applications: number): string {
  return `${APPLICATION_PREFIX}${String(i % applications).padStart(3, '0')}`;
}

interface Side {
  database: BenchDatabase;
  dataSource: DataSource;
  close: () => Promise<void>;
  queue: QueueRepository;
  results: ResultRepository;
}

async function open(database: BenchDatabase, url = database.url): Promise<Side> {
  const config = loadConfig({ ...process.env, DATABASE_URL: url, LOG_LEVEL: 'silent' });
  const { dataSource, close } = await openDatabaseForCli(config, DATABASE_SCHEMA);
  await dataSource.runMigrations();
  const queue = new QueueRepository(dataSource, new NodeIdentity(), {
    databaseUrl: url,
    databasePooler: 'none',
  } as DatabaseConfig);
  const results = new ResultRepository(dataSource, new JobRecordsRepository(dataSource));
  return { database, dataSource, close, queue, results };
}

async function closeSide(side: Side): Promise<void> {
  await side.queue.onModuleDestroy();
  await side.close();
}

/** The finished jobs with their results, the queued ones with one input file each. */
async function fill(database: BenchDatabase, options: LargeTablesOptions): Promise<void> {
  await database.query(
    `WITH finished AS (
       INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after,
                        attempts, started_at, finished_at)
       SELECT gen_random_uuid(), '${APPLICATION_PREFIX}' || lpad((i % $2)::text, 3, '0'), 'script', 'DONE', 0,
              '{}', 'rest', now() - interval '30 days' + i * interval '1 second',
              now() - interval '30 days' + i * interval '1 second', 1,
              now() - interval '30 days' + i * interval '1 second',
              now() - interval '30 days' + i * interval '1 second' + interval '20 milliseconds'
         FROM generate_series(0, $1 - 1) AS i
       RETURNING id, application_name, finished_at)
     INSERT INTO result (job_id, application_name, result_time, success, type, content_type, data, size, sha256)
     SELECT id, application_name, finished_at, true, 'txt', 'text/plain', '\\x6f6b'::bytea, 2, ''
       FROM finished`,
    [options.finished, options.applications],
  );
  await database.query(
    `WITH queued AS (
       INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after, attempts)
       SELECT gen_random_uuid(), '${APPLICATION_PREFIX}' || lpad((i % $2)::text, 3, '0'), 'script', 'QUEUED', 0,
              '{}', 'rest', now() - interval '1 hour' + i * interval '1 millisecond',
              now() - interval '1 hour' + i * interval '1 millisecond', 0
         FROM generate_series(0, $1 - 1) AS i
       RETURNING id)
     INSERT INTO job_file (job_id, name, content, size)
     SELECT id, 'script.R', $3::bytea, $4 FROM queued`,
    [options.queued, options.applications, SCRIPT, SCRIPT.length],
  );
  for (const name of ['job', 'result', 'job_file']) {
    await database.query(`VACUUM ANALYZE ${name}`);
  }
}

/** CPU of the database's server processes so far, ms. */
async function serverCpuMs(database: BenchDatabase): Promise<number> {
  const pids = await database.backendPids();
  return pids.reduce((sum, pid) => sum + (processTimes(pid)?.selfMs ?? 0), 0);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

/** One round: 2 x `jobs` jobs in, `jobs` claimed, ended and fetched, one operation kind at a time. */
async function round1(side: Side, options: LargeTablesOptions, offset: number) {
  const owner = `bench-${randomUUID().slice(0, 8)}`;
  const times: Record<Operation, number[]> = { intake: [], claim: [], end: [], fetch: [] };
  const cpu: Record<Operation, number> = { intake: 0, claim: 0, end: 0, fetch: 0 };
  const claimed: Array<{ id: string; applicationName: string }> = [];
  const timed = async (operation: Operation, work: () => Promise<void>): Promise<void> => {
    const started = process.hrtime.bigint();
    await work();
    times[operation].push(Number(process.hrtime.bigint() - started) / 1e6);
  };
  const phase = async (
    operation: Operation,
    step: (i: number) => Promise<void>,
    count = options.jobs,
  ) => {
    const before = await serverCpuMs(side.database);
    for (let i = 0; i < count; i += 1) {
      await timed(operation, () => step(i));
    }
    cpu[operation] = ((await serverCpuMs(side.database)) - before) / count;
  };
  // Twice as many jobs in as are claimed: every claim then finds all the applications with jobs
  // queued, on the empty tables as on the large ones (the claim walks the applications that have
  // some), so what differs is the tables' size alone.
  const intakes = 2 * options.jobs;
  await phase(
    'intake',
    async (i) => {
      await side.queue.enqueue({
        id: randomUUID(),
        applicationName: applicationOf(offset + i, options.applications),
        kind: 'script',
        meta: {},
        source: 'rest',
        submittedAt: new Date(),
        files: [{ name: 'script.R', content: SCRIPT }],
      });
    },
    intakes,
  );
  await phase('claim', async () => {
    const [job] = await side.queue.claim(owner, 1, 60, null, ['script']);
    if (!job) {
      throw new Error('the claim found no queued job');
    }
    claimed.push({ id: job.id, applicationName: job.applicationName });
  });
  await phase('end', async (i) => {
    const data = Buffer.from('ok');
    const ended = await side.queue.complete(claimed[i].id, owner, {
      success: true,
      type: 'txt',
      contentType: 'text/plain',
      data,
      sha256: '',
    });
    if (!ended) {
      throw new Error(`job ${claimed[i].id} did not end`);
    }
  });
  await phase('fetch', async (i) => {
    const found = await side.results.findDataSource(claimed[i].applicationName, claimed[i].id);
    if (!found) {
      throw new Error(`no result for ${claimed[i].id}`);
    }
  });
  const costs = {} as Record<Operation, OperationCost>;
  for (const operation of OPERATIONS) {
    const values = times[operation];
    costs[operation] = {
      p50Ms: median(values),
      meanMs: values.reduce((a, b) => a + b, 0) / values.length,
      serverCpuMs: cpu[operation],
    };
  }
  return costs;
}

/** The least disturbed round of each operation (lowest median). */
function best(rounds: Array<Record<Operation, OperationCost>>): Record<Operation, OperationCost> {
  const chosen = {} as Record<Operation, OperationCost>;
  for (const operation of OPERATIONS) {
    chosen[operation] = rounds
      .map((r) => r[operation])
      .reduce((a, b) => (b.p50Ms < a.p50Ms ? b : a));
  }
  return chosen;
}

/** One more job on the filled tables, each statement's plan printed by auto_explain. */
async function explainOneJob(
  database: BenchDatabase,
  options: LargeTablesOptions,
): Promise<string[]> {
  const url = new URL(database.url);
  url.searchParams.set(
    'options',
    '-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 ' +
      '-c auto_explain.log_analyze=on -c auto_explain.log_buffers=on ' +
      '-c auto_explain.log_timing=on -c auto_explain.log_level=notice',
  );
  const side = await open(database, url.toString());
  const plans: string[] = [];
  const listen = (client: PoolClient) =>
    client.on('notice', (notice: { message?: string }) => plans.push(notice.message ?? ''));
  // The pool's connections, those open already (the migrations' check) and those to come.
  const pool = (side.dataSource.driver as unknown as { master: Pool & { _clients: PoolClient[] } })
    .master;
  pool._clients.forEach(listen);
  pool.on('connect', listen);
  // The claim's own connection (a prepared statement with its generic plan).
  const claimPool = (side.queue as unknown as { claimConnection: { pool?: Pool } | null })
    .claimConnection?.pool;
  claimPool?.on('connect', listen);
  try {
    await round1(side, { ...options, jobs: 1 }, 0);
    // Retention's passes on the same tables (the filled jobs finished over the last 30 days, one
    // a second): one that finds nothing due (31 days kept), then one batch of the results older
    // than 29 days; each batch is one statement that locks the rows of its 1,000 jobs alone.
    for (const days of [31, 29]) {
      const started = process.hrtime.bigint();
      const deleted = await deleteExpiredResults(side.dataSource, days * 24);
      plans.push(
        `retention, ${days} days kept: ${deleted} results with their jobs deleted in one pass, ` +
          `${round(Number(process.hrtime.bigint() - started) / 1e6, 1)} ms`,
      );
    }
  } finally {
    await closeSide(side);
  }
  return plans.filter((plan) => plan.includes('Query Text') || plan.startsWith('retention'));
}

export async function largeTablesBench(options: LargeTablesOptions): Promise<LargeTablesResult> {
  const emptyDatabase = await BenchDatabase.create('_empty');
  const filledDatabase = await BenchDatabase.create('_filled');
  const sides: Side[] = [];
  try {
    const empty = await open(emptyDatabase);
    sides.push(empty);
    const filled = await open(filledDatabase);
    sides.push(filled);
    options.log(
      `filling: ${options.finished} finished and ${options.queued} queued jobs over ${options.applications} applications`,
    );
    const fillStarted = Date.now();
    await fill(filledDatabase, options);
    const fillSeconds = (Date.now() - fillStarted) / 1000;
    options.log(`filled in ${round(fillSeconds, 1)} s`);
    const emptyRounds: Array<Record<Operation, OperationCost>> = [];
    const filledRounds: Array<Record<Operation, OperationCost>> = [];
    // A warm-up round on each (first plans, the cache), then the rounds measured in turn.
    await round1(empty, options, 0);
    await emptyDatabase.query('TRUNCATE job CASCADE');
    await round1(filled, options, 0);
    for (let r = 0; r < options.rounds; r += 1) {
      emptyRounds.push(await round1(empty, options, r));
      await emptyDatabase.query('TRUNCATE job CASCADE');
      filledRounds.push(await round1(filled, options, r));
    }
    const emptyBest = best(emptyRounds);
    const filledBest = best(filledRounds);
    const ratios = {} as Record<Operation, number>;
    for (const operation of OPERATIONS) {
      ratios[operation] = filledBest[operation].p50Ms / emptyBest[operation].p50Ms;
    }
    const plans = await explainOneJob(filledDatabase, options);
    return { fillSeconds, empty: emptyBest, filled: filledBest, ratios, plans };
  } finally {
    for (const side of sides) {
      await closeSide(side);
    }
    await emptyDatabase.drop();
    await filledDatabase.drop();
  }
}

/** The table of the large-table section, and whether each hot operation stayed flat. */
export function printLargeTables(result: LargeTablesResult, log: (line: string) => void) {
  log(
    table(
      [
        'operation',
        'empty p50 ms',
        'filled p50 ms',
        'ratio',
        'empty DB CPU/job ms',
        'filled DB CPU/job ms',
      ],
      OPERATIONS.map((operation) => [
        operation,
        String(round(result.empty[operation].p50Ms, 3)),
        String(round(result.filled[operation].p50Ms, 3)),
        String(round(result.ratios[operation], 2)),
        String(round(result.empty[operation].serverCpuMs, 3)),
        String(round(result.filled[operation].serverCpuMs, 3)),
      ]),
    ),
  );
  const targets = (['claim', 'intake', 'fetch'] as const).map((operation) => ({
    operation,
    ratio: result.ratios[operation],
    met: result.ratios[operation] <= 1.2,
  }));
  log(
    `\nTarget: the claim, the intake and the result fetch cost <= 1.2x per job on the large tables: ` +
      `${targets.map((t) => `${t.operation} ${round(t.ratio, 2)}x`).join(', ')} -> ` +
      `${targets.every((t) => t.met) ? 'met' : 'NOT met'}`,
  );
  log('\nPlans of one job on the large tables (auto_explain, ANALYZE, BUFFERS):');
  for (const plan of result.plans) {
    log(plan);
    log('');
  }
  return targets;
}
