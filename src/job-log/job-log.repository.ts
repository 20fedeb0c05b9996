import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { JOB_LOG_CHANNEL } from '../queue/queue-channels';
import { QueueNotifier } from '../queue/queue-notifier.service';
import { rJob } from '../queue/queue-reads';
import type { JobState } from '../queue/queue.types';
import type { JobProgress } from '../r-engine/job-progress';
import { rowsOf } from '../storage/query-rows';

/** `progress` lines hold a svc_progress report as JSON ({fraction, message}). */
export type LogStream = 'stdout' | 'stderr' | 'svc' | 'progress';

/** One line of a job's log (a row of job_log_line). */
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

/**
 * The lines of job `jobId` after seq $3: at most $4 lines, and only those that start within $5
 * bytes of text (so a page holds at most $5 bytes and one line). The running sum is taken over
 * the $4 lines the index gives in order, so the page costs no more rows than its limit.
 */
function page(jobId: string): string {
  return `(SELECT seq, stream, logged_at, line FROM (
            SELECT seq, stream, logged_at, line,
                   sum(octet_length(line)) OVER (ORDER BY seq) - octet_length(line) AS before
              FROM (SELECT seq, stream, logged_at, line FROM job_log_line
                     WHERE job_id = ${jobId} AND seq > $3 ORDER BY seq LIMIT $4) limited) summed
           WHERE before < $5)`;
}

/** A job's state and the lines of its log after a point (`readTail`). */
export interface LogTail {
  state: JobState;
  /** The job was cancelled. */
  cancelled: boolean;
  lines: LogLine[];
}

/**
 * The job_log_line table: R's output of each job, appended in batches, read from any node. Every
 * statement on the table is here. Those that also touch the job's row (the append sets the job's
 * progress, the reads check its application) stay one statement each, for what one statement
 * guarantees (said at each); they never change the job's delivery, which is the queue's.
 */
@Injectable()
export class JobLogRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
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
   * Appends lines (maybe none) and sets the job's last progress when `progress` is given; nothing when the job
   * is gone (its result was deleted). One statement: the lines and the progress they report are
   * stored together, and only while the job exists, and the lines' JOB_LOG_CHANNEL notification
   * (payload: this node's prefix and the job id) commits with them. The live streams of the log
   * hear of it: on this node at once (QueueNotifier), on the others by the NOTIFY.
   *
   * One notification per statement, and a worker appends a job's lines at most once per
   * LOG_FLUSH_MS (250 ms, the batches of JobLogWriter): a job printing without pause sends at
   * most four a second, however many lines.
   */
  async append(jobId: string, lines: LogLine[], progress?: JobProgress): Promise<void> {
    if (lines.length === 0 && progress === undefined) {
      return;
    }
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
          this.notifier.sender,
        ],
      ),
    );
    if (rows.length > 0) {
      this.notifier.logAppended(jobId);
    }
  }

  /**
   * Lines of a job of `applicationName` after `afterSeq`, oldest first, at most `limit` and
   * `maxBytes` of text (and the line that crosses it: at least one line). One statement: the
   * job's application is checked on the rows that are read.
   */
  async read(
    applicationName: string,
    jobId: string,
    afterSeq: number,
    limit: number,
    maxBytes: number,
  ): Promise<LogLine[]> {
    const rows = rowsOf<LogLineRow>(
      await this.dataSource.query(
        `SELECT l.seq, l.stream, l.logged_at, l.line FROM job j
           CROSS JOIN LATERAL ${page('j.id')} l
          WHERE j.id = $1 AND j.application_name = $2 AND ${rJob('j.kind')}
          ORDER BY l.seq`,
        [jobId, applicationName, afterSeq, limit, maxBytes],
      ),
    );
    return rows.map(logLineOf);
  }

  /**
   * The job's state and its lines after `afterSeq` (oldest first, at most `limit` and `maxBytes`
   * of text, as `read`); null when the job of `applicationName` is gone. One statement, so one snapshot: when the state read is
   * DONE, every line the job's runs stored is among those read or before them (a worker stores
   * its last lines before the result).
   */
  async readTail(
    applicationName: string,
    jobId: string,
    afterSeq: number,
    limit: number,
    maxBytes: number,
  ): Promise<LogTail | null> {
    // No line: one row whose line columns are null.
    const rows = rowsOf<{ state: JobState; cancelled: boolean } & (LogLineRow | { seq: null })>(
      await this.dataSource.query(
        `SELECT j.state, j.cancelled_at IS NOT NULL AS cancelled, l.seq, l.stream, l.logged_at, l.line
           FROM job j
           LEFT JOIN LATERAL ${page('j.id')} l ON true
          WHERE j.id = $1 AND j.application_name = $2 AND ${rJob('j.kind')}
          ORDER BY l.seq`,
        [jobId, applicationName, afterSeq, limit, maxBytes],
      ),
    );
    if (rows.length === 0) {
      return null;
    }
    const lines = rows.flatMap((r) => (r.seq === null ? [] : [logLineOf(r)]));
    return { state: rows[0].state, cancelled: rows[0].cancelled, lines };
  }
}
