/**
 * The job table's statements that other modules need, beside delivery (QueueRepository): the
 * job as the API reads it, the job's log, usage and the deletion of a result. Every
 * statement on `job` is in the queue module, in this file or in queue.repository.ts and its queue-*.ts files. A statement
 * that also reads or writes another module's table stays one statement here, as the module that
 * calls it wrote it, since splitting it would give up what one statement guarantees (said at
 * each).
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, In } from 'typeorm';
import { auditRowPerJobSql } from '../audit/audit.repository';
import { rowsOf } from '../storage/query-rows';
import { rJob } from './queue-reads';
import { JobEntity, JobState } from './job.entity';
import { R_JOB_KINDS } from './queue.types';

/** `progress` lines hold a svc_progress report as JSON ({fraction, message}). */
export type LogStream = 'stdout' | 'stderr' | 'svc' | 'progress';

/** One line of a job's log (the job_log_line table of `jobs`). */
export interface LogLine {
  seq: number;
  stream: LogStream;
  time: Date;
  line: string;
}

interface LogLineRow {
  seq: number;
  stream: LogStream;
  logged_at: Date;
  line: string;
}

function logLineOf(r: LogLineRow): LogLine {
  return { seq: r.seq, stream: r.stream, time: new Date(r.logged_at), line: r.line };
}

/** A job's state and the lines of its log after a point (`readLogTail`). */
export interface LogTail {
  state: JobState;
  /** The job was cancelled. */
  cancelled: boolean;
  lines: LogLine[];
}

/**
 * Payload: the job id, after lines were appended to its log (sent by the statement that appends
 * them): wakes the live streams of the log.
 */
export const JOB_LOG_CHANNEL = 'svc_job_log';

/** Jobs submitted by one application in one month (`submittedPerMonth`). */
export interface SubmittedRow {
  application_name: string;
  month: string;
  submitted: string;
}

@Injectable()
export class JobRecordsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * A job of `applicationName` as the API shows it; null when there is none. A delivery job
   * (kind `callback` or `mail_reply`: a callback or an e-mail reply of another job) is none: it
   * never shows as a job.
   */
  async findOne(applicationName: string, jobId: string): Promise<JobEntity | null> {
    return this.dataSource
      .getRepository(JobEntity)
      .findOne({ where: { id: jobId, applicationName, kind: In([...R_JOB_KINDS]) } });
  }

  /**
   * Appends lines to a job's log and sets the job's last progress when `progress` is given;
   * nothing when the job is gone (its result was deleted). One statement: the lines and the
   * progress they report are stored together, and only while the job exists, and the lines'
   * JOB_LOG_CHANNEL notification (payload: `sender` and the job id) commits with them. True when
   * lines were stored (then this node delivers the notification in-process, QueueNotifier).
   *
   * One notification per statement, and a worker appends a job's lines at most once per
   * LOG_FLUSH_MS (250 ms, the batches of JobLogWriter): a job printing without pause sends at
   * most four a second, however many lines.
   */
  async appendLogLines(
    jobId: string,
    lines: LogLine[],
    progress: { fraction: number; message: string } | undefined,
    sender: string,
  ): Promise<boolean> {
    const rows = rowsOf<{ notified: unknown }>(
      await this.dataSource.query(
        `WITH progressed AS (
           UPDATE job SET progress_fraction = $6, progress_message = $7
            WHERE id = $1 AND $6::double precision IS NOT NULL),
         appended AS (
           INSERT INTO job_log_line (job_id, seq, stream, logged_at, line)
           SELECT $1, l.seq, l.stream, l.logged_at, l.line
             FROM unnest($2::int[], $3::varchar[], $4::timestamptz[], $5::text[]) AS l(seq, stream, logged_at, line)
            WHERE EXISTS (SELECT 1 FROM job WHERE id = $1)
           ON CONFLICT DO NOTHING
           RETURNING 1)
         SELECT pg_notify($8, $9::text || $1::text) AS notified
          WHERE EXISTS (SELECT 1 FROM appended)`,
        [
          jobId,
          lines.map((l) => l.seq),
          lines.map((l) => l.stream),
          lines.map((l) => l.time),
          lines.map((l) => l.line),
          progress?.fraction ?? null,
          progress?.message ?? null,
          JOB_LOG_CHANNEL,
          sender,
        ],
      ),
    );
    return rows.length > 0;
  }

  /**
   * Lines of a job of `applicationName` after `afterSeq`, oldest first, at most `limit`. One
   * statement: the job's application is checked on the rows that are read.
   */
  async readLogLines(
    applicationName: string,
    jobId: string,
    afterSeq: number,
    limit: number,
  ): Promise<LogLine[]> {
    const rows = rowsOf<LogLineRow>(
      await this.dataSource.query(
        `SELECT l.seq, l.stream, l.logged_at, l.line FROM job_log_line l
           JOIN job j ON j.id = l.job_id AND j.application_name = $2 AND ${rJob('j.kind')}
          WHERE l.job_id = $1 AND l.seq > $3 ORDER BY l.seq LIMIT $4`,
        [jobId, applicationName, afterSeq, limit],
      ),
    );
    return rows.map(logLineOf);
  }

  /**
   * A job's state with its lines after `afterSeq` (oldest first, at most `limit`); null when the
   * job of `applicationName` is gone. One statement, so one snapshot: when the state read is
   * DONE, every line the job's runs stored is among those read or before them (a worker stores
   * its last lines before the result).
   */
  async readLogTail(
    applicationName: string,
    jobId: string,
    afterSeq: number,
    limit: number,
  ): Promise<LogTail | null> {
    // No line: one row whose line columns are null.
    const rows = rowsOf<{ state: JobState; cancelled: boolean } & (LogLineRow | { seq: null })>(
      await this.dataSource.query(
        `SELECT j.state, j.cancelled_at IS NOT NULL AS cancelled, l.seq, l.stream, l.logged_at, l.line
           FROM job j
           LEFT JOIN LATERAL (SELECT seq, stream, logged_at, line FROM job_log_line
                               WHERE job_id = j.id AND seq > $3 ORDER BY seq LIMIT $4) l ON true
          WHERE j.id = $1 AND j.application_name = $2 AND ${rJob('j.kind')}
          ORDER BY l.seq`,
        [jobId, applicationName, afterSeq, limit],
      ),
    );
    if (rows.length === 0) {
      return null;
    }
    const lines = rows.flatMap((r) => (r.seq === null ? [] : [logLineOf(r)]));
    return { state: rows[0].state, cancelled: rows[0].cancelled, lines };
  }

  /**
   * The jobs (not callback deliveries) of every application that has any, by state and, for
   * finished ones, by their result's success: the admin API's list of applications.
   */
  async countsByApplication(): Promise<ApplicationJobCounts[]> {
    const rows = await this.dataSource.query<
      Array<{ application_name: string; state: string; success: boolean | null; jobs: number }>
    >(
      `SELECT j.application_name, j.state, r.success, count(*)::int AS jobs
         FROM job j LEFT JOIN result r ON r.job_id = j.id
        WHERE ${rJob('j.kind')}
        GROUP BY 1, 2, 3`,
    );
    const counts = new Map<string, ApplicationJobCounts>();
    for (const row of rows) {
      const entry = counts.get(row.application_name) ?? {
        applicationName: row.application_name,
        queued: 0,
        running: 0,
        succeeded: 0,
        failed: 0,
      };
      if (row.state === 'QUEUED') {
        entry.queued += row.jobs;
      } else if (row.state === 'RUNNING') {
        entry.running += row.jobs;
      } else if (row.success === false) {
        entry.failed += row.jobs;
      } else {
        entry.succeeded += row.jobs;
      }
      counts.set(row.application_name, entry);
    }
    return [...counts.values()];
  }

  /** Whether the application has any job (not a callback delivery). */
  async hasJobs(applicationName: string): Promise<boolean> {
    const rows = await this.dataSource.query<Array<{ found: boolean }>>(
      `SELECT EXISTS (SELECT 1 FROM job WHERE application_name = $1 AND ${rJob()}) AS found`,
      [applicationName],
    );
    return rows[0]?.found === true;
  }

  /**
   * Jobs submitted per application and month (UTC) in [`from`, `until`), of one application or
   * (null) all: finished ones from job_usage, the others from job. One statement, so that a job
   * finishing meanwhile (moving from one to the other) is counted once.
   */
  async submittedPerMonth(
    from: Date,
    until: Date,
    application: string | null,
  ): Promise<SubmittedRow[]> {
    return this.dataSource.query<SubmittedRow[]>(
      `SELECT application_name, to_char(submitted_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month,
              count(*) AS submitted
         FROM (SELECT application_name, submitted_at FROM job_usage
                WHERE submitted_at >= $1 AND submitted_at < $2
                  AND ($3::varchar IS NULL OR application_name = $3::varchar)
               UNION ALL
               SELECT application_name, submitted_at FROM job
                WHERE state <> 'DONE' AND ${rJob()} AND submitted_at >= $1 AND submitted_at < $2
                  AND ($3::varchar IS NULL OR application_name = $3::varchar)) AS jobs
        GROUP BY 1, 2`,
      [from, until, application],
    );
  }

  /**
   * Deletes a job of `applicationName` that has a result (the result, log and everything else
   * stored with the job go with it), and writes `auditRow` (auditRowJson, or null for none) for
   * it in the same statement, only when it deletes. False when there was no result.
   */
  async deleteWithResult(
    applicationName: string,
    jobId: string,
    auditRow: string | null,
  ): Promise<boolean> {
    const raw: unknown = await this.dataSource.query(
      `WITH deleted AS (
         DELETE FROM job USING result
          WHERE job.id = result.job_id AND job.id = $1 AND job.application_name = $2
          RETURNING job.id, job.application_name),
       audited AS (${auditRowPerJobSql('$3', 'deleted')})
       SELECT id FROM deleted`,
      [jobId, applicationName, auditRow],
    );
    return rowsOf(raw).length > 0;
  }
}

/** An application's jobs by what they are doing or how they ended. */
export interface ApplicationJobCounts {
  applicationName: string;
  queued: number;
  running: number;
  succeeded: number;
  failed: number;
}
