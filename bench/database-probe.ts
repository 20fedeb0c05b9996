/**
 * The database alone: a submission's rows written by pg clients in this process, with no HTTP and
 * no NestJS, to see how much of an acknowledgement's time and CPU is PostgreSQL's. Two shapes:
 * the transaction TypeORM sent before commit d610fd5 (START TRANSACTION, INSERT job, INSERT
 * job_file, pg_notify, COMMIT: five round trips) and the one statement `QueueRepository.enqueue`
 * sends since (one round trip).
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { BenchDatabase } from './bench-database';
import { cpuBetween, cpuSnapshot } from './cpu-usage';
import { APPLICATION } from './rest-client';
import { Distribution, distribution } from './stats';

export type ProbeShape = 'transaction, 5 round trips' | 'one statement';

export interface ProbeResult {
  shape: ProbeShape;
  connections: number;
  durationS: number;
  transactions: number;
  perSecond: number;
  latencyMs: Distribution;
  postgresCpuPerTransactionMs: number;
}

const INSERT_JOB =
  'INSERT INTO "job"("id", "application_name", "kind", "state", "priority", "meta", "source", "submitted_at", "run_after", "started_at", "finished_at", "attempts", "lease_owner", "lease_expires_at", "last_error") ' +
  "VALUES ($1, $2, 'script', 'QUEUED', 0, '{}', 'rest', $3, $3, DEFAULT, DEFAULT, 0, DEFAULT, DEFAULT, DEFAULT)";
const INSERT_FILE =
  'INSERT INTO "job_file"("job_id", "name", "content", "size") VALUES ($1, $2, $3, $4) RETURNING "id"';
const NOTIFY = 'SELECT pg_notify($1, $2)';
const ONE_STATEMENT = `WITH new_job AS (
    INSERT INTO job (id, application_name, kind, state, priority, meta, source, submitted_at, run_after, attempts)
    VALUES ($1, $2, 'script', 'QUEUED', 0, '{}', 'rest', $3, $3, 0)
    RETURNING id),
  new_files AS (
    INSERT INTO job_file (job_id, name, content, size)
    SELECT new_job.id, f.name, f.content, octet_length(f.content)
      FROM new_job, unnest($4::varchar[], $5::bytea[]) AS f(name, content))
  SELECT pg_notify('svc_job_queued', $2) FROM new_job`;

async function submitOnce(client: Client, shape: ProbeShape, script: Buffer): Promise<void> {
  const id = randomUUID();
  const now = new Date();
  if (shape === 'one statement') {
    await client.query(ONE_STATEMENT, [id, APPLICATION, now, ['job.R'], [script]]);
    return;
  }
  await client.query('START TRANSACTION');
  try {
    await client.query(INSERT_JOB, [id, APPLICATION, now]);
    await client.query(INSERT_FILE, [id, 'job.R', script, String(script.length)]);
    await client.query(NOTIFY, ['svc_job_queued', APPLICATION]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** `connections` clients each submitting back to back for `durationS` seconds. */
export async function probeDatabase(
  database: BenchDatabase,
  shape: ProbeShape,
  connections: number,
  durationS: number,
  script: Buffer,
): Promise<ProbeResult> {
  const clients = Array.from(
    { length: connections },
    () => new Client({ connectionString: database.url, application_name: 'svc-bench-probe' }),
  );
  await Promise.all(clients.map((client) => client.connect()));
  try {
    for (const client of clients) {
      await submitOnce(client, shape, script); // warm: plan caches, first page reads
    }
    const latencies: number[] = [];
    const before = cpuSnapshot(process.pid, await database.backendPids());
    const start = performance.now();
    const end = start + durationS * 1000;
    await Promise.all(
      clients.map(async (client) => {
        while (performance.now() < end) {
          const t0 = performance.now();
          await submitOnce(client, shape, script);
          latencies.push(performance.now() - t0);
        }
      }),
    );
    const elapsedS = (performance.now() - start) / 1000;
    const cpu = cpuBetween(before, cpuSnapshot(process.pid, await database.backendPids()));
    return {
      shape,
      connections,
      durationS: elapsedS,
      transactions: latencies.length,
      perSecond: latencies.length / elapsedS,
      latencyMs: distribution(latencies),
      postgresCpuPerTransactionMs: cpu.postgresBackendsMs / latencies.length,
    };
  } finally {
    await Promise.all(clients.map((client) => client.end().catch(() => undefined)));
    await database.empty();
  }
}
