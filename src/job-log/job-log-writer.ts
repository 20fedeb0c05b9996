import { Logger } from '@nestjs/common';
import type { JobProgress } from '../r-engine/job-progress';
import { JobLogRepository, LogLine } from './job-log.repository';

/** How often buffered lines are written while R runs. */
export const LOG_FLUSH_MS = 250;

/**
 * What a stored line costs against JOB_LOG_MAX_BYTES beyond its text: its line break (1) and
 * its row (63: a job_log_line row's header, job id, number, stream and time, and its index
 * entry, rounded down). So an empty line costs 64 bytes, and a log of empty lines stops as
 * soon as one of text does (docs/api.md#a-jobs-log).
 */
export const LOG_LINE_OVERHEAD_BYTES = 64;

/**
 * Collects one run's output lines and writes them in batches (every LOG_FLUSH_MS), so they reach
 * the database as R prints them without a statement per line. Each line costs its UTF-8 bytes
 * and LOG_LINE_OVERHEAD_BYTES; past `maxBytes` the rest is cut, with one note line saying so.
 */
export class JobLogWriter {
  private readonly logger = new Logger(JobLogWriter.name);
  private pending: LogLine[] = [];
  private bytes = 0;
  private cut = false;
  /** The last progress report not yet written. */
  private latestProgress: JobProgress | undefined;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly repository: JobLogRepository,
    private readonly jobId: string,
    private nextSeq: number,
    private readonly maxBytes: number,
  ) {}

  /**
   * A writer for one attempt of a job. Only writers add lines, so the first attempt starts at 0
   * without asking the database (a round trip per job); a later one goes on after the earlier
   * attempts' lines.
   */
  static async open(
    repository: JobLogRepository,
    jobId: string,
    attempt: number,
    maxBytes: number,
  ): Promise<JobLogWriter> {
    const nextSeq = attempt <= 1 ? 0 : await repository.nextSeq(jobId);
    return new JobLogWriter(repository, jobId, nextSeq, maxBytes);
  }

  add(stream: 'stdout' | 'stderr', line: string): void {
    if (this.fits(line)) {
      this.push(stream, line);
    }
  }

  /**
   * A progress report: the job's last progress, written with the next batch, and a `progress`
   * line in the log, which costs as any line against the cap (past it only the job's progress
   * is kept up to date).
   */
  progress(progress: JobProgress): void {
    this.latestProgress = progress;
    const line = JSON.stringify(progress);
    if (this.fits(line)) {
      this.push('progress', line);
    } else {
      this.timer ??= setTimeout(() => {
        this.timer = null;
        void this.flush();
      }, LOG_FLUSH_MS);
    }
  }

  /** Whether `line` may still be stored; the first that may not cuts the log, with its note. */
  private fits(line: string): boolean {
    if (this.cut) {
      return false;
    }
    const cost = Buffer.byteLength(line, 'utf8') + LOG_LINE_OVERHEAD_BYTES;
    if (this.bytes + cost > this.maxBytes) {
      this.cut = true;
      this.push(
        'svc',
        `[output cut: the log of a job keeps at most ${this.maxBytes} bytes (JOB_LOG_MAX_BYTES)]`,
      );
      return false;
    }
    this.bytes += cost;
    return true;
  }

  private push(stream: LogLine['stream'], line: string): void {
    this.pending.push({ seq: this.nextSeq++, stream, time: new Date(), line });
    this.timer ??= setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, LOG_FLUSH_MS);
  }

  /** Writes what is buffered; batches are written in order. */
  flush(): Promise<void> {
    const batch = this.pending;
    const progress = this.latestProgress;
    this.pending = [];
    this.latestProgress = undefined;
    this.writing = this.writing.then(() =>
      this.repository.append(this.jobId, batch, progress).catch((error: Error) => {
        this.logger.warn(
          `job ${this.jobId}: could not store ${batch.length} log line(s): ${error.message}`,
        );
      }),
    );
    return this.writing;
  }

  /** The run is over: writes the rest. */
  async close(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    await this.flush();
  }
}
