import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { JobRecordsRepository } from '../queue/job-records.repository';
import type { UsageMonthView } from './usage-view';

/**
 * One application's usage in one calendar month (UTC): jobs submitted in the month; outcomes,
 * run times, R CPU (summed over the rCpuJobs jobs whose engine measured it) and bytes of the
 * jobs that finished in it.
 */
export type MonthlyUsage = UsageMonthView;

export interface UsageQuery {
  /** First day of the first month, UTC. */
  from: Date;
  /** First day of the month after the last, UTC. */
  until: Date;
  /** One application, or every application when null. */
  application: string | null;
}

interface FinishedRow {
  application_name: string;
  month: string;
  succeeded: string;
  failed: string;
  cancelled: string;
  run_total: string | null;
  run_p50: number | null;
  run_p95: number | null;
  wait_p50: number | null;
  wait_p95: number | null;
  cpu_total: string | null;
  cpu_jobs: string;
  bytes_in: string;
  bytes_out: string;
}

/**
 * Usage statistics from job_usage, the record each finished job leaves (written by the queue
 * with its result), and from the job table for jobs that have not finished yet: every job is in
 * exactly one of the two, so "submitted" counts each once (that count is the queue module's
 * statement, JobRecordsRepository.submittedPerMonth, since it reads the job table).
 */
@Injectable()
export class UsageRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly records: JobRecordsRepository,
  ) {}

  async monthly(query: UsageQuery): Promise<MonthlyUsage[]> {
    const params = [query.from, query.until, query.application];
    const finished = await this.dataSource.query<FinishedRow[]>(
      `SELECT application_name, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month,
              count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded,
              count(*) FILTER (WHERE outcome = 'failed') AS failed,
              count(*) FILTER (WHERE outcome = 'cancelled') AS cancelled,
              round(sum(run_ms)) AS run_total,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY run_ms) AS run_p50,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY run_ms) AS run_p95,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY wait_ms) AS wait_p50,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY wait_ms) AS wait_p95,
              sum(r_cpu_ms) AS cpu_total, count(r_cpu_ms) AS cpu_jobs,
              sum(bytes_in) AS bytes_in, sum(bytes_out) AS bytes_out
         FROM (SELECT *, extract(epoch FROM finished_at - started_at) * 1000 AS run_ms,
                      extract(epoch FROM started_at - submitted_at) * 1000 AS wait_ms
                 FROM job_usage
                WHERE finished_at >= $1 AND finished_at < $2
                  AND ($3::varchar IS NULL OR application_name = $3::varchar)) AS usage
        GROUP BY 1, 2`,
      params,
    );
    const submitted = await this.records.submittedPerMonth(
      query.from,
      query.until,
      query.application,
    );
    const months = new Map<string, MonthlyUsage>();
    const entry = (application: string, month: string): MonthlyUsage => {
      const key = `${application} ${month}`;
      let usage = months.get(key);
      if (!usage) {
        usage = {
          application,
          month,
          submitted: 0,
          succeeded: 0,
          failed: 0,
          cancelled: 0,
          runTimeTotalMs: 0,
          runTimeP50Ms: null,
          runTimeP95Ms: null,
          waitTimeP50Ms: null,
          waitTimeP95Ms: null,
          rCpuTotalMs: 0,
          rCpuJobs: 0,
          bytesIn: 0,
          bytesOut: 0,
        };
        months.set(key, usage);
      }
      return usage;
    };
    for (const row of finished) {
      Object.assign(entry(row.application_name, row.month), {
        succeeded: Number(row.succeeded),
        failed: Number(row.failed),
        cancelled: Number(row.cancelled),
        runTimeTotalMs: Number(row.run_total ?? 0),
        runTimeP50Ms: row.run_p50 === null ? null : Math.round(Number(row.run_p50)),
        runTimeP95Ms: row.run_p95 === null ? null : Math.round(Number(row.run_p95)),
        waitTimeP50Ms: row.wait_p50 === null ? null : Math.round(Number(row.wait_p50)),
        waitTimeP95Ms: row.wait_p95 === null ? null : Math.round(Number(row.wait_p95)),
        rCpuTotalMs: Number(row.cpu_total ?? 0),
        rCpuJobs: Number(row.cpu_jobs),
        bytesIn: Number(row.bytes_in),
        bytesOut: Number(row.bytes_out),
      });
    }
    for (const row of submitted) {
      entry(row.application_name, row.month).submitted = Number(row.submitted);
    }
    return [...months.values()].sort(
      (a, b) => a.month.localeCompare(b.month) || a.application.localeCompare(b.application),
    );
  }
}
