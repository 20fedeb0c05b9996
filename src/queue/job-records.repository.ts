/**
 * The job table's statements that other modules need, beside delivery (QueueRepository): the
 * job as the API reads it, the applications' job counts, usage and the deletion of a result.
 * Every statement on `job` is in the queue module, in this file or in queue.repository.ts and its
 * queue-*.ts files, but the job log's (src/job-log/), which read the job with its lines and set
 * its progress with them. A statement that also reads or writes another module's table stays one
 * statement here, as the module that calls it wrote it, since splitting it would give up what one
 * statement guarantees (said at each).
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, In } from 'typeorm';
import { auditRowPerJobSql } from '../audit/audit.repository';
import { rowsOf } from '../storage/query-rows';
import { rJob } from './queue-reads';
import { WAITING_RUN_AFTER } from './queue-needs';
import { JobEntity } from './job.entity';
import { type JobState, R_JOB_KINDS } from './queue.types';

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

  /**
   * Several jobs of `applicationName` as a flow shows its steps (src/flows/): their state, times
   * and how they ended; whether a queued one still waits for jobs it needs (not due yet).
   */
  async stepsOf(applicationName: string, jobIds: string[]): Promise<JobStepRow[]> {
    if (jobIds.length === 0) {
      return [];
    }
    const raw: unknown = await this.dataSource.query(
      `SELECT j.id, j.state, j.submitted_at, j.started_at, j.finished_at, j.attempts,
              j.cancelled_at, j.state = 'QUEUED' AND j.run_after = '${WAITING_RUN_AFTER}' AS waiting, r.success
         FROM job j LEFT JOIN result r ON r.job_id = j.id
        WHERE j.id = ANY ($1::uuid[]) AND j.application_name = $2`,
      [jobIds, applicationName],
    );
    return rowsOf<JobStepRow>(raw);
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

/** A job as a flow shows it as a step (`stepsOf`). */
export interface JobStepRow {
  id: string;
  state: JobState;
  submitted_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  attempts: number;
  cancelled_at: Date | null;
  /** Queued, but not due until the jobs it needs have ended. */
  waiting: boolean;
  /** Its result's success; null before it has one. */
  success: boolean | null;
}
