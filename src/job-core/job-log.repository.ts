import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { JobRecordsRepository, LogLine, LogTail } from '../queue/job-records.repository';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { rowsOf } from '../storage/query-rows';
import type { JobProgress } from '../r-engine/job-progress';

export type { LogLine, LogStream, LogTail } from '../queue/job-records.repository';

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
    private readonly notifier: QueueNotifier,
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
   * nothing when the job is gone (its result was deleted). The live streams of the log hear of
   * it: on this node at once, on the others by the statement's NOTIFY.
   */
  async append(jobId: string, lines: LogLine[], progress?: JobProgress): Promise<void> {
    if (lines.length === 0) {
      return;
    }
    if (await this.records.appendLogLines(jobId, lines, progress, this.notifier.sender)) {
      this.notifier.logAppended(jobId);
    }
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

  /**
   * The job's state and its lines after `afterSeq` (at most `limit`), read together; null when
   * the job of `applicationName` is gone.
   */
  async readTail(
    applicationName: string,
    jobId: string,
    afterSeq: number,
    limit: number,
  ): Promise<LogTail | null> {
    return this.records.readLogTail(applicationName, jobId, afterSeq, limit);
  }
}
