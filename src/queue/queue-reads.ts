/**
 * Reads: the counts of queued and running jobs, for metrics, the statistics, the workers'
 * scaling and the maxQueuedJobs admission.
 */
import { DataSource, EntityManager } from 'typeorm';

/**
 * The filter that keeps the delivery jobs (callbacks, e-mail replies) out of what shows or counts
 * as a job, `column` the job's kind (and lets the statements on queued jobs use job_claim_idx,
 * whose predicate is this text).
 */
export function rJob(column = 'kind'): string {
  return `${column} IN ('script', 'xml', 'json')`;
}

/**
 * The backlog: jobs queued plus jobs running, all applications, as `backlog`. Workers are scaled
 * on it (the KEDA ScaledObject of deploy/kubernetes runs this text; /metrics serves it as
 * svc_queue_backlog): ceil(backlog / SCRIPT_SLOTS) workers keep every job in a slot. Two counts
 * rather than `state IN (...)`, which the planner answers with a pass over the whole table: each
 * count reads only its own partial index (job_claim_idx on QUEUED, job_lease_idx on RUNNING).
 */
export const QUEUE_BACKLOG_SQL =
  "SELECT (SELECT count(*) FROM job WHERE state = 'QUEUED' AND kind IN ('script', 'xml', 'json')) + (SELECT count(*) FROM job WHERE state = 'RUNNING' AND kind IN ('script', 'xml', 'json')) AS backlog";

/** Jobs queued plus running (QUEUE_BACKLOG_SQL), for metrics. */
export async function queueBacklog(dataSource: DataSource): Promise<number> {
  const rows = await dataSource.query<Array<{ backlog: string | number }>>(QUEUE_BACKLOG_SQL);
  return Number(rows[0]?.backlog ?? 0);
}

/**
 * Jobs of `applicationName` queued, counted up to `atMost` (its maxQueuedJobs): job_claim_idx
 * leads with the application, so the count reads at most that many index entries. On
 * `runner` when given (a transaction's manager).
 */
export async function queuedJobsOf(
  dataSource: DataSource,
  applicationName: string,
  atMost: number,
  runner: DataSource | EntityManager = dataSource,
): Promise<number> {
  const rows = await runner.query<Array<{ n: number }>>(
    `SELECT count(*)::int AS n FROM (
       SELECT 1 FROM job WHERE state = 'QUEUED' AND ${rJob()} AND application_name = $1 LIMIT $2) queued`,
    [applicationName, atMost],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Whether `applicationName` has room for one more queued job under `maxQueued` (its
 * maxQueuedJobs), decided for the rest of `manager`'s transaction: the application's advisory
 * lock, held to its end, makes a second node's admission (an enqueue or a retry) wait here and
 * then count this one (READ COMMITTED: its count is a statement after the wait). `queued`: the
 * jobs queued that it counted.
 */
export async function queueRoomOf(
  manager: EntityManager,
  applicationName: string,
  maxQueued: number,
): Promise<{ room: boolean; queued: number }> {
  await manager.query(`SELECT pg_advisory_xact_lock(hashtext('svc.queued:' || $1))`, [
    applicationName,
  ]);
  const queued = await queuedJobsOf(manager.connection, applicationName, maxQueued, manager);
  return { room: queued < maxQueued, queued };
}

/**
 * Jobs queued and running per application, for metrics and the statistics: two grouped counts,
 * each over its own partial index (job_claim_idx leads with the application).
 */
export async function jobsPerApplication(
  dataSource: DataSource,
): Promise<Array<{ applicationName: string; state: 'QUEUED' | 'RUNNING'; jobs: number }>> {
  const rows = await dataSource.query<
    Array<{ application_name: string; state: 'QUEUED' | 'RUNNING'; jobs: number }>
  >(
    `SELECT application_name, 'QUEUED' AS state, count(*)::int AS jobs FROM job
      WHERE state = 'QUEUED' AND ${rJob()} GROUP BY application_name
     UNION ALL
     SELECT application_name, 'RUNNING' AS state, count(*)::int AS jobs FROM job
      WHERE state = 'RUNNING' AND ${rJob()} GROUP BY application_name`,
  );
  return rows.map((row) => ({
    applicationName: row.application_name,
    state: row.state,
    jobs: row.jobs,
  }));
}

/** Jobs waiting to run, for metrics and tests. */
export async function queueDepth(dataSource: DataSource): Promise<number> {
  const rows = await dataSource.query<Array<{ n: number }>>(
    `SELECT count(*)::int AS n FROM job WHERE state = 'QUEUED' AND ${rJob()}`,
  );
  return rows[0]?.n ?? 0;
}
