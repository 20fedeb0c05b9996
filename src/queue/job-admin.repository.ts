/**
 * The operator console's statements on `job` (docs/api.md#the-operator-console): the R jobs
 * newest first under filters, one job with its outcome, a failed job queued again (retry), the
 * jobs a bulk cancel takes, and the overview's aggregates. In the queue module because every
 * statement on `job` is; the console's module (src/console-api) turns the rows into its views.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Readable } from 'node:stream';
import { DataSource } from 'typeorm';
import { JOB_FILE_CHUNKS, readChunks, readInline } from '../storage/blob-chunks';
import { auditRowPerJobSql } from '../audit/audit.repository';
import { rowsOf } from '../storage/query-rows';
import { NodeIdentity } from '../storage/node-identity';
import { notificationPrefix } from '../storage/database-events.service';
import { MailReplyJobsRepository } from './mail-reply-jobs.repository';
import { JOB_QUEUED_CHANNEL } from './queue-channels';
import { queueRoomOf, rJob } from './queue-reads';
import type { JobKind, JobSource } from './queue.types';

/** A job's state as the console filters it: the queue's three and how a finished one ended. */
export const CONSOLE_STATES = [
  'QUEUED',
  'RUNNING',
  'DONE',
  'SUCCEEDED',
  'FAILED',
  'CANCELLED',
] as const;
export type ConsoleState = (typeof CONSOLE_STATES)[number];

/** Which jobs: every field optional (null or empty: no condition). */
export interface JobFilter {
  /** The applications the caller may see; null: every application. */
  applications: readonly string[] | null;
  states: readonly ConsoleState[];
  kind: JobKind | null;
  source: JobSource | null;
  principal: string | null;
  /** Submitted at or after. */
  from: Date | null;
  /** Submitted before. */
  to: Date | null;
  /** Ids from `from` to `to` (a job id's prefix); null: any. */
  idRange?: { from: string; to: string } | null;
}

/** Where the previous page ended: its last job's submission time (microseconds, UTC) and id. */
export interface JobPosition {
  at: string;
  id: string;
}

/** A job as the console shows it, read with its result's success. */
export interface AdminJobRow {
  id: string;
  application_name: string;
  kind: JobKind;
  source: JobSource;
  state: 'QUEUED' | 'RUNNING' | 'DONE';
  priority: number;
  submitted_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  submitted_by: string | null;
  /** A function call's R function; null: a script job (or a call from before it was kept). */
  function_name: string | null;
  attempts: number;
  lost_runs: number;
  last_error: string | null;
  cancelled_by: string | null;
  cancelled_at: Date | null;
  meta: Record<string, string>;
  progress_fraction: number | null;
  progress_message: string | null;
  success: boolean | null;
  /** The result's type (its data's extension); null before it has one. */
  result_type: string | null;
  /** The submission time to the microsecond, for the next page's position. */
  position_at: string;
}

/** What a retry found: the job's state before and whether it was queued again. */
export type RetryOutcome =
  /** `repliesQueued`: e-mail replies owed again, whose mail-reply jobs were queued with it. */
  | { outcome: 'retried'; repliesQueued: boolean }
  | { outcome: 'unknown' }
  | { outcome: 'refused'; reason: 'queued' | 'running' | 'succeeded' | 'cancelled' | 'no-inputs' }
  /** A failed job whose application has `queued` jobs queued, its maxQueuedJobs. */
  | { outcome: 'queue-full'; queued: number };

/** One bucket of an overview series, as the statement returns it. */
export interface OverviewBucketRow {
  at: Date;
  started: number;
  finished: number;
  /** Of those finished: succeeded, and failed (cancelled ones in neither). */
  succeeded: number;
  failed: number;
  wait_p50: number | null;
  wait_p95: number | null;
  run_p50: number | null;
  run_p95: number | null;
  queue_depth: number;
}

/** An application's jobs now and in the last hour. */
export interface OverviewApplicationRow {
  application_name: string;
  queued: number;
  running: number;
  succeeded_last_hour: number;
  failed_last_hour: number;
}

const JOB_COLUMNS = `j.id, j.application_name, j.kind, j.source, j.state, j.priority, j.submitted_at,
  j.started_at, j.finished_at, j.submitted_by, j.function_name, j.attempts, j.lost_runs, j.last_error,
  j.cancelled_by, j.cancelled_at, j.meta, j.progress_fraction, j.progress_message, r.success,
  r.type AS result_type,
  to_char(j.submitted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position_at`;

/** The SQL condition of each console state on `j` (the job) and `r` (its result). */
const STATE_CONDITION: Record<ConsoleState, string> = {
  QUEUED: "j.state = 'QUEUED'",
  RUNNING: "j.state = 'RUNNING'",
  DONE: "j.state = 'DONE'",
  SUCCEEDED: "(j.state = 'DONE' AND r.success AND j.cancelled_at IS NULL)",
  FAILED: "(j.state = 'DONE' AND NOT r.success AND j.cancelled_at IS NULL)",
  CANCELLED: "(j.state = 'DONE' AND j.cancelled_at IS NOT NULL)",
};

/**
 * The overview's jobs: every R job submitted in the last two days (the day's series and the
 * waits of jobs that queued before it), and the older ones still queued or running (each state
 * on its partial index). Bounded by time, not by the table. `$1`: the applications or null.
 */
const OVERVIEW_COLUMNS = `j.application_name, j.state, j.submitted_at, j.started_at, j.finished_at,
         j.cancelled_at`;
const OF_APPLICATIONS = '($1::varchar[] IS NULL OR j.application_name = ANY($1::varchar[]))';
const OVERVIEW_JOBS = `
  SELECT ${OVERVIEW_COLUMNS}, r.success
    FROM job j LEFT JOIN result r ON r.job_id = j.id
   WHERE ${rJob('j.kind')} AND j.submitted_at >= now() - interval '2 days' AND ${OF_APPLICATIONS}
  ${['QUEUED', 'RUNNING']
    .map(
      (state) => `UNION ALL
  SELECT ${OVERVIEW_COLUMNS}, NULL FROM job j
   WHERE j.state = '${state}' AND ${rJob('j.kind')} AND j.submitted_at < now() - interval '2 days'
     AND ${OF_APPLICATIONS}`,
    )
    .join('\n  ')}`;

/** A filter as SQL conditions on `j` and `r`, its values appended to `params`. */
function conditionsOf(filter: JobFilter, params: unknown[]): string[] {
  const add = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  const conditions = [rJob('j.kind')];
  if (filter.applications !== null) {
    conditions.push(`j.application_name = ANY(${add(filter.applications)}::varchar[])`);
  }
  if (filter.states.length > 0) {
    conditions.push(`(${filter.states.map((state) => STATE_CONDITION[state]).join(' OR ')})`);
  }
  if (filter.kind !== null) {
    conditions.push(`j.kind = ${add(filter.kind)}`);
  }
  if (filter.source !== null) {
    conditions.push(`j.source = ${add(filter.source)}`);
  }
  if (filter.principal !== null) {
    conditions.push(`j.submitted_by = ${add(filter.principal)}`);
  }
  if (filter.from !== null) {
    conditions.push(`j.submitted_at >= ${add(filter.from)}`);
  }
  if (filter.to !== null) {
    conditions.push(`j.submitted_at < ${add(filter.to)}`);
  }
  if (filter.idRange) {
    conditions.push(
      `j.id BETWEEN ${add(filter.idRange.from)}::uuid AND ${add(filter.idRange.to)}::uuid`,
    );
  }
  return conditions;
}

@Injectable()
export class JobAdminRepository {
  private readonly sender: string;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    node: NodeIdentity,
    private readonly replyJobs: MailReplyJobsRepository,
  ) {
    this.sender = notificationPrefix(node.id);
  }

  /**
   * Up to `limit` jobs under `filter`, newest first (submitted_at DESC, id DESC: the index
   * job_admin_list_idx), after `after` when given.
   */
  async list(filter: JobFilter, limit: number, after: JobPosition | null): Promise<AdminJobRow[]> {
    const params: unknown[] = [];
    const conditions = conditionsOf(filter, params);
    if (after !== null) {
      params.push(after.at, after.id);
      conditions.push(
        `(j.submitted_at, j.id) < ($${params.length - 1}::timestamptz, $${params.length}::uuid)`,
      );
    }
    params.push(limit);
    return this.dataSource.query<AdminJobRow[]>(
      `SELECT ${JOB_COLUMNS} FROM job j LEFT JOIN result r ON r.job_id = j.id
        WHERE ${conditions.join(' AND ')}
        ORDER BY j.submitted_at DESC, j.id DESC LIMIT $${params.length}`,
      params,
    );
  }

  /**
   * How many jobs `filter` matches, counted up to `cap` (the count then stops: a page's total
   * must not cost a pass over a table of millions); `capped`: more than `cap` match.
   */
  async count(filter: JobFilter, cap: number): Promise<{ total: number; capped: boolean }> {
    const params: unknown[] = [];
    const conditions = conditionsOf(filter, params);
    params.push(cap + 1);
    const [row] = await this.dataSource.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM (
         SELECT 1 FROM job j LEFT JOIN result r ON r.job_id = j.id
          WHERE ${conditions.join(' AND ')} LIMIT $${params.length}) AS matched`,
      params,
    );
    return { total: Math.min(row.n, cap), capped: row.n > cap };
  }

  /** One R job of `applicationName`; null when there is none. */
  async findOne(applicationName: string, jobId: string): Promise<AdminJobRow | null> {
    const rows = await this.dataSource.query<AdminJobRow[]>(
      `SELECT ${JOB_COLUMNS} FROM job j LEFT JOIN result r ON r.job_id = j.id
        WHERE j.id = $1 AND j.application_name = $2 AND ${rJob('j.kind')}`,
      [jobId, applicationName],
    );
    return rows[0] ?? null;
  }

  /**
   * A job's input files kept in job_file (a job that succeeded or was cancelled has none left):
   * the first `limit` by name, with their sizes, and how many there are (job_file_job_name_uq
   * leads with the job: one index range).
   */
  async inputFiles(
    jobId: string,
    limit: number,
  ): Promise<{ files: Array<{ id: string; name: string; size: number }>; total: number }> {
    const rows = await this.dataSource.query<
      Array<{ id: string; name: string; size: string; total: number }>
    >(
      `SELECT f.id::text AS id, f.name, f.size, count(*) OVER ()::int AS total
         FROM job_file f WHERE f.job_id = $1 ORDER BY f.name LIMIT $2`,
      [jobId, limit],
    );
    return {
      files: rows.map((row) => ({ id: row.id, name: row.name, size: Number(row.size) })),
      total: rows[0]?.total ?? 0,
    };
  }

  /**
   * One input file of an R job of `applicationName` as a source to stream from: inline bytes
   * come with the row, chunked ones are read piece by piece (job_file_chunk) as the stream is
   * consumed. Null when there is no such file (or it went with its job's success meanwhile).
   */
  async inputFile(
    applicationName: string,
    jobId: string,
    fileId: string,
  ): Promise<{ name: string; size: number; open: () => Readable } | null> {
    const rows = await this.dataSource.query<
      Array<{ id: string; name: string; size: string; data: Buffer | null }>
    >(
      `SELECT f.id::text AS id, f.name, f.size, CASE WHEN f.chunked THEN NULL ELSE f.content END AS data
         FROM job_file f JOIN job j ON j.id = f.job_id
        WHERE f.id = $1::bigint AND f.job_id = $2 AND j.application_name = $3 AND ${rJob('j.kind')}`,
      [fileId, jobId, applicationName],
    );
    const row = rows[0];
    if (row === undefined) {
      return null;
    }
    const size = Number(row.size);
    const inline = row.data;
    return {
      name: row.name,
      size,
      open: () =>
        inline !== null
          ? readInline(inline)
          : readChunks(this.dataSource, JOB_FILE_CHUNKS, row.id, size),
    };
  }

  /**
   * Up to `limit` jobs under `filter`, newest first: those a bulk action takes (a cancel its
   * queued and running ones, a retry its failed ones; the caller sets the states), one by one,
   * through the action on one job.
   */
  async matching(
    filter: JobFilter,
    limit: number,
  ): Promise<Array<{ id: string; application_name: string; kind: JobKind }>> {
    const params: unknown[] = [];
    const conditions = conditionsOf(filter, params);
    params.push(limit);
    return this.dataSource.query(
      `SELECT j.id, j.application_name, j.kind FROM job j LEFT JOIN result r ON r.job_id = j.id
        WHERE ${conditions.join(' AND ')}
        ORDER BY j.submitted_at DESC, j.id DESC LIMIT $${params.length}`,
      params,
    );
  }

  /**
   * Queues a failed job again, in ONE statement, only when it ended with a failure result (not
   * cancelled) and still has its input files: state QUEUED, due now, its result (and its
   * delivered or pending callback, so the new result gets one) removed, its run's times and lost
   * runs cleared, its attempts kept counting; `auditRow` (auditRowJson) written, and the workers
   * woken by `svc_job_queued`, only when it does. The row lock orders it with a concurrent retry,
   * cancel or deletion.
   *
   * What the failed run delivered is owed again, so the new outcome reaches whoever got the old
   * one: an e-mail reply that was sent or given up becomes pending, its mail-reply job queued in
   * the same transaction (it goes once the new result is there); a drop directory's result is
   * written to the outbox again (its record counts from the retry for its retention). A reply
   * still pending waits for the new result as it is.
   *
   * With `maxQueued` (the application's maxQueuedJobs), a retry queues a job as a submission
   * does: only while fewer are queued, decided under the same advisory lock as the enqueue's
   * admission (queueRoomOf), else `queue-full`.
   */
  async retry(
    applicationName: string,
    jobId: string,
    auditRow: string | null,
    maxQueued: number | null = null,
  ): Promise<RetryOutcome> {
    return this.dataSource.transaction(async (manager) => {
      const room =
        maxQueued === null ? null : await queueRoomOf(manager, applicationName, maxQueued);
      const raw: unknown = await manager.query(
        `WITH target AS (
           SELECT j.id, j.state, j.cancelled_at IS NOT NULL AS cancelled, r.success,
                  EXISTS (SELECT 1 FROM job_file f WHERE f.job_id = j.id) AS has_inputs
             FROM job j LEFT JOIN result r ON r.job_id = j.id
            WHERE j.id = $1 AND j.application_name = $2 AND ${rJob('j.kind')}
            FOR UPDATE OF j),
         retried AS (
           UPDATE job SET state = 'QUEUED', run_after = now(), started_at = NULL, finished_at = NULL,
                  lost_runs = 0, lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
                  progress_fraction = NULL, progress_message = NULL
             FROM target
            WHERE job.id = target.id AND target.state = 'DONE' AND target.success = false
              AND NOT target.cancelled AND target.has_inputs AND $6::boolean
            RETURNING job.id, job.application_name, job.kind),
         result_removed AS (DELETE FROM result WHERE job_id IN (SELECT id FROM retried)),
         callback_removed AS (DELETE FROM job_callback WHERE job_id IN (SELECT id FROM retried)),
         callback_job_removed AS (DELETE FROM job WHERE callback_of IN (SELECT id FROM retried)),
         replies_owed AS (
           UPDATE mail_reply SET state = 'pending', reply_job_id = NULL, attempts = 0,
                  first_attempt_at = NULL, last_error = NULL, replied_at = NULL
            WHERE job_id IN (SELECT id FROM retried) AND rejection IS NULL
              AND state IN ('sent', 'failed')
            RETURNING source, source_key),
         drops_owed AS (
           UPDATE drop_file SET result_written_at = NULL, claimed_at = now()
            WHERE job_id IN (SELECT id FROM retried) AND submitted_at IS NOT NULL),
         audited AS (${auditRowPerJobSql('$3', 'retried')})
         SELECT target.state, target.cancelled, target.success, target.has_inputs,
                (SELECT pg_notify($4, $5::text || retried.kind) FROM retried) IS NOT NULL AS retried,
                (SELECT coalesce(json_agg(json_build_array(source, source_key)), '[]'::json)
                   FROM replies_owed) AS replies
           FROM target`,
        [jobId, applicationName, auditRow, JOB_QUEUED_CHANNEL, this.sender, room?.room ?? true],
      );
      const row = rowsOf<{
        state: string;
        cancelled: boolean;
        success: boolean | null;
        has_inputs: boolean;
        retried: boolean;
        replies: Array<[string, string]>;
      }>(raw)[0];
      if (row === undefined) {
        return { outcome: 'unknown' };
      }
      if (row.retried) {
        let repliesQueued = false;
        for (const [source, sourceKey] of row.replies) {
          repliesQueued =
            (await this.replyJobs.queue(source, sourceKey, this.sender, manager)) || repliesQueued;
        }
        return { outcome: 'retried', repliesQueued };
      }
      if (
        room !== null &&
        !room.room &&
        row.state === 'DONE' &&
        row.success === false &&
        !row.cancelled &&
        row.has_inputs
      ) {
        return { outcome: 'queue-full', queued: room.queued };
      }
      const reason =
        row.state === 'QUEUED'
          ? 'queued'
          : row.state === 'RUNNING'
            ? 'running'
            : row.cancelled
              ? 'cancelled'
              : row.success === true
                ? 'succeeded'
                : 'no-inputs';
      return { outcome: 'refused', reason };
    });
  }

  /** Each application's jobs queued and running now, and those that ended in the last hour. */
  async overviewApplications(
    applications: readonly string[] | null,
  ): Promise<OverviewApplicationRow[]> {
    return this.dataSource.query<OverviewApplicationRow[]>(
      `SELECT application_name,
              count(*) FILTER (WHERE state = 'QUEUED')::int AS queued,
              count(*) FILTER (WHERE state = 'RUNNING')::int AS running,
              count(*) FILTER (WHERE state = 'DONE' AND finished_at >= now() - interval '1 hour'
                                 AND success AND cancelled_at IS NULL)::int AS succeeded_last_hour,
              count(*) FILTER (WHERE state = 'DONE' AND finished_at >= now() - interval '1 hour'
                                 AND NOT success AND cancelled_at IS NULL)::int AS failed_last_hour
         FROM (${OVERVIEW_JOBS}) AS w
        GROUP BY application_name`,
      [applications],
    );
  }

  /**
   * The last `count` buckets of `bucketSeconds` each (the last one holds now), aligned on the
   * epoch: per bucket the jobs started and finished in it, the median and 95th percentile of
   * their waits (submitted to started) and run times (started to finished), and the jobs queued
   * at its end (submitted before it, not yet started or ended then).
   */
  async overviewSeries(
    applications: readonly string[] | null,
    bucketSeconds: number,
    count: number,
  ): Promise<OverviewBucketRow[]> {
    return this.dataSource.query<OverviewBucketRow[]>(
      `WITH w AS MATERIALIZED (${OVERVIEW_JOBS}),
       origin AS (
         SELECT to_timestamp(floor(extract(epoch FROM now()) / $2) * $2 - ($3 - 1) * $2) AS at),
       bucket AS (
         SELECT i, origin.at + make_interval(secs => i * $2) AS at
           FROM origin, generate_series(0, $3 - 1) AS i),
       started AS (
         SELECT floor(extract(epoch FROM w.started_at - origin.at) / $2)::int AS i, count(*)::int AS n,
                percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (
                  ORDER BY extract(epoch FROM w.started_at - w.submitted_at) * 1000) AS ms
           FROM w, origin WHERE w.started_at >= origin.at GROUP BY 1),
       finished AS (
         SELECT floor(extract(epoch FROM w.finished_at - origin.at) / $2)::int AS i, count(*)::int AS n,
                count(*) FILTER (WHERE w.success AND w.cancelled_at IS NULL)::int AS ok,
                count(*) FILTER (WHERE NOT w.success AND w.cancelled_at IS NULL)::int AS bad,
                percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (
                  ORDER BY extract(epoch FROM w.finished_at - w.started_at) * 1000) AS ms
           FROM w, origin WHERE w.finished_at >= origin.at GROUP BY 1),
       arrived AS (
         SELECT greatest(-1, floor(extract(epoch FROM w.submitted_at - origin.at) / $2))::int AS i,
                count(*)::int AS n
           FROM w, origin GROUP BY 1),
       left_queue AS (
         SELECT greatest(-1, floor(extract(epoch FROM coalesce(w.started_at, w.finished_at) - origin.at) / $2))::int AS i,
                count(*)::int AS n
           FROM w, origin WHERE coalesce(w.started_at, w.finished_at) IS NOT NULL GROUP BY 1)
       SELECT bucket.at, coalesce(s.n, 0) AS started, coalesce(f.n, 0) AS finished,
              coalesce(f.ok, 0) AS succeeded, coalesce(f.bad, 0) AS failed,
              s.ms[1] AS wait_p50, s.ms[2] AS wait_p95, f.ms[1] AS run_p50, f.ms[2] AS run_p95,
              ((SELECT coalesce(sum(n), 0) FROM arrived WHERE arrived.i <= bucket.i)
               - (SELECT coalesce(sum(n), 0) FROM left_queue WHERE left_queue.i <= bucket.i))::int AS queue_depth
         FROM bucket
         LEFT JOIN started s ON s.i = bucket.i
         LEFT JOIN finished f ON f.i = bucket.i
        ORDER BY bucket.i`,
      [applications, bucketSeconds, count],
    );
  }

  /**
   * The applications of the R jobs among `jobIds`, and (`recentlyQueued`) of those submitted in
   * the last `seconds`: what the console's event stream tells its clients changed.
   */
  async applicationsTouched(
    jobIds: readonly string[],
    recentlyQueued: boolean,
    seconds: number,
  ): Promise<string[]> {
    const rows = await this.dataSource.query<Array<{ application_name: string }>>(
      `SELECT DISTINCT application_name FROM job
        WHERE ${rJob()} AND (id = ANY($1::uuid[])
           OR ($2 AND submitted_at >= now() - make_interval(secs => $3)))`,
      [jobIds, recentlyQueued, seconds],
    );
    return rows.map((row) => row.application_name);
  }
}
