import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { rowsOf } from '../storage/query-rows';
import type { JobProgress } from '../r-engine/job-progress';

/** `progress` lines hold a svc_progress report as JSON ({fraction, message}). */
export type LogStream = 'stdout' | 'stderr' | 'svc' | 'progress';

export interface LogLine {
  seq: number;
  stream: LogStream;
  time: Date;
  line: string;
}

/** The job_log_line table: R's output of each job, appended in batches, read from any node. */
@Injectable()
export class JobLogRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

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
    await this.dataSource.query(
      `WITH progressed AS (
         UPDATE job SET progress_fraction = $6, progress_message = $7
          WHERE id = $1 AND $6::double precision IS NOT NULL)
       INSERT INTO job_log_line (job_id, seq, stream, logged_at, line)
       SELECT $1, l.seq, l.stream, l.logged_at, l.line
         FROM unnest($2::int[], $3::varchar[], $4::timestamptz[], $5::text[]) AS l(seq, stream, logged_at, line)
        WHERE EXISTS (SELECT 1 FROM job WHERE id = $1)
       ON CONFLICT DO NOTHING`,
      [
        jobId,
        lines.map((l) => l.seq),
        lines.map((l) => l.stream),
        lines.map((l) => l.time),
        lines.map((l) => l.line),
        progress?.fraction ?? null,
        progress?.message ?? null,
      ],
    );
  }

  /** Lines of a job of `applicationName` after `afterSeq`, oldest first, at most `limit`. */
  async read(
    applicationName: string,
    jobId: string,
    afterSeq: number,
    limit: number,
  ): Promise<LogLine[]> {
    const rows = rowsOf<{ seq: number; stream: LogStream; logged_at: Date; line: string }>(
      await this.dataSource.query(
        `SELECT l.seq, l.stream, l.logged_at, l.line FROM job_log_line l
           JOIN job j ON j.id = l.job_id AND j.application_name = $2
          WHERE l.job_id = $1 AND l.seq > $3 ORDER BY l.seq LIMIT $4`,
        [jobId, applicationName, afterSeq, limit],
      ),
    );
    return rows.map((r) => ({
      seq: r.seq,
      stream: r.stream,
      time: new Date(r.logged_at),
      line: r.line,
    }));
  }
}
