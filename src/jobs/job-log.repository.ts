import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { JobRecordsRepository, LogLine } from '../queue/job-records.repository';
import { rowsOf } from '../storage/query-rows';
import type { JobProgress } from '../r-engine/job-progress';

export type { LogLine, LogStream } from '../queue/job-records.repository';

/**
 * The job_log_line table: R's output of each job, appended in batches, read from any node. The
 * statements that also touch the job table (append with the job's progress, read with its
 * application's check) are the queue module's (JobRecordsRepository).
 */
@Injectable()
export class JobLogRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly records: JobRecordsRepository,
  ) {}

  /** The next free line number of a job (a retried job continues its log). */
  async nextSeq(jobId: string): Promise<number> {
    const rows = rowsOf<{ next: number }>(
      await this.dataSource.query(
        'SELECT COALESCE(max(seq) + 1, 0)::int AS next FROM job_log_line WHERE job_id = $1',
        [jobId],
      ),
    );
    return rows[0]?.next ?? 0;
  }

  /**
   * Appends lines in one statement, and sets the job's last progress when `progress` is given;
   * nothing when the job is gone (its result was deleted).
   */
  async append(jobId: string, lines: LogLine[], progress?: JobProgress): Promise<void> {
    if (lines.length === 0) {
      return;
    }
    await this.records.appendLogLines(jobId, lines, progress);
  }

  /** Lines of a job of `applicationName` after `afterSeq`, oldest first, at most `limit`. */
  async read(
    applicationName: string,
    jobId: string,
    afterSeq: number,
    limit: number,
  ): Promise<LogLine[]> {
    return this.records.readLogLines(applicationName, jobId, afterSeq, limit);
  }
}
